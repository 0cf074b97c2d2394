// Model::summary: Keras's table of layers, output shapes and parameter counts.
#include <cstdio>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "keras/model_state.h"

namespace cadre::keras {

namespace {

using internal::Dims;

// Parameters of each layer (once, at its first call), trainable or not.
struct Counts {
  int64_t trainable = 0;
  int64_t non_trainable = 0;
};

std::vector<Dims> input_shapes(const internal::Node& node) {
  std::vector<Dims> shapes;
  for (const auto& in : node.inbound) shapes.push_back(in->shape);
  return shapes;
}

Counts count(const internal::Node& node) {
  Counts c;
  for (const internal::WeightInfo& w : node.layer->weights(input_shapes(node))) {
    int64_t n = 1;
    for (int64_t d : w.shape) n *= d;
    (w.trainable ? c.trainable : c.non_trainable) += n;
  }
  return c;
}

// "1.03 MB": float32 bytes in Keras's units.
std::string memory(int64_t params) {
  double bytes = static_cast<double>(params) * 4;
  const char* units[] = {"Byte", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f %s", bytes, units[u]);
  return buffer;
}

void require_built(const Model::State& state, const char* what) {
  if (!state.built()) {
    throw FailedPreconditionError(str_cat(what, ": model '", state.name,
                                          "' is not built yet: start it with an InputLayer, call "
                                          "build(input_shape), or fit it first"));
  }
}

}  // namespace

int64_t Model::count_params() const {
  require_built(*state_, "count_params");
  int64_t total = 0;
  std::vector<const internal::LayerImpl*> counted;
  for (const auto& node : state_->order) {
    if (std::find(counted.begin(), counted.end(), node->layer.get()) != counted.end()) continue;
    counted.push_back(node->layer.get());
    Counts c = count(*node);
    total += c.trainable + c.non_trainable;
  }
  return total;
}

std::string Model::summary_string(int line_length) const {
  require_built(*state_, "summary");
  const int c1 = line_length * 45 / 100, c2 = line_length * 85 / 100, c3 = line_length;
  auto row = [&](const std::string& a, const std::string& b, const std::string& c) {
    std::string line = " " + a;
    line = line.substr(0, c1 - 1) + " ";
    line.resize(c1, ' ');
    line += b;
    line = line.substr(0, c2 - 1) + " ";
    line.resize(c2, ' ');
    line += c;
    line.resize(c3, ' ');
    return line + "\n";
  };
  std::string out = str_cat("Model: \"", state_->name, "\"\n");
  out += std::string(line_length, '_') + "\n";
  out += row("Layer (type)", "Output Shape", "Param #");
  out += std::string(line_length, '=') + "\n";
  if (!state_->sequential) {
    for (const auto& in : state_->inputs) {
      out += row(str_cat(in->input_name, " (InputLayer)"),
                 str_cat("[", internal::dims_string(in->shape), "]"), "0");
      out += std::string(line_length, ' ') + "\n";
    }
  }
  Counts total;
  std::vector<const internal::LayerImpl*> counted;
  for (const auto& node : state_->order) {
    Counts c = count(*node);
    bool first = std::find(counted.begin(), counted.end(), node->layer.get()) == counted.end();
    if (first) {
      counted.push_back(node->layer.get());
      total.trainable += c.trainable;
      total.non_trainable += c.non_trainable;
    }
    out += row(str_cat(node->layer->name(), " (", node->layer->kind(), ")"),
               internal::dims_string(node->shape), std::to_string(c.trainable + c.non_trainable));
    out += std::string(line_length, ' ') + "\n";
  }
  out += std::string(line_length, '=') + "\n";
  int64_t all = total.trainable + total.non_trainable;
  out += str_cat("Total params: ", all, " (", memory(all), ")\n");
  out += str_cat("Trainable params: ", total.trainable, " (", memory(total.trainable), ")\n");
  out += str_cat("Non-trainable params: ", total.non_trainable, " (", memory(total.non_trainable),
                 ")\n");
  out += std::string(line_length, '_') + "\n";
  return out;
}

void Model::summary(std::FILE* out) const {
  std::string text = summary_string();
  std::fputs(text.c_str(), out);
  std::fflush(out);
}

}  // namespace cadre::keras
