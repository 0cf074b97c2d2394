// The merging layers, of several inputs: Add and Concatenate.
#include "cadre/base/errors.h"
#include "cadre/keras/layers.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "core/base/strings.h"
#include "keras/layer_impl.h"

namespace cadre::keras {

namespace {

using internal::Config;
using internal::Dims;
using internal::LayerImpl;

class MergeImpl : public LayerImpl {
 public:
  MergeImpl(std::string kind, int axis, std::string name)
      : LayerImpl(std::move(kind), std::move(name)), axis_(axis) {}
  int arity() const override { return 0; }
  Dims output_shape(const std::vector<Dims>& in) const override {
    Dims out = in[0];
    int rank = static_cast<int>(out.size());
    int axis = axis_ < 0 ? axis_ + rank : axis_;
    if (kind() == "Concatenate" && (axis <= 0 || axis >= rank)) {
      throw InvalidArgumentError(str_cat("axis ", axis_, " is not a feature axis of rank ", rank));
    }
    for (size_t i = 1; i < in.size(); ++i) {
      if (static_cast<int>(in[i].size()) != rank) {
        throw InvalidArgumentError(
            str_cat("inputs of different ranks: ", internal::dims_string(in[0]), " and ",
                    internal::dims_string(in[i])));
      }
      for (int d = 1; d < rank; ++d) {
        if (kind() == "Concatenate" && d == axis) {
          out[d] = (out[d] < 0 || in[i][d] < 0) ? -1 : out[d] + in[i][d];
        } else if (in[i][d] != out[d] && in[i][d] >= 0 && out[d] >= 0) {
          throw InvalidArgumentError(
              str_cat("inputs of incompatible shapes: ", internal::dims_string(in[0]), " and ",
                      internal::dims_string(in[i])));
        }
      }
    }
    return out;
  }
  Tensor call(const std::vector<Tensor>& in, bool, Tensor*) const override {
    if (kind() == "Concatenate") return concat(in, axis_ < 0 ? axis_ + in[0].rank() : axis_);
    Tensor sum = in[0];
    for (size_t i = 1; i < in.size(); ++i) sum = add(sum, in[i]);
    return sum;
  }
  Config config() const override {
    return kind() == "Concatenate" ? Config{{"axis", std::to_string(axis_)}} : Config{};
  }

 private:
  int axis_;
};

}  // namespace

Add::Add(LayerOptions options) : Layer(std::make_shared<MergeImpl>("Add", 0, options.name)) {}
Concatenate::Concatenate(int axis, LayerOptions options)
    : Layer(std::make_shared<MergeImpl>("Concatenate", axis, options.name)) {}

}  // namespace cadre::keras
