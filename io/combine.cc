// Transformations that combine datasets: concatenate (one after the other) and zip (side by
// side, element by element).
#include "cadre/base/errors.h"
#include "cadre/io/dataset.h"
#include "core/base/strings.h"
#include "io/dataset_node.h"

namespace cadre::io {
namespace {

class ConcatenateNode : public DatasetNode {
 public:
  ConcatenateNode(NodePtr first, NodePtr second) : inputs_{std::move(first), std::move(second)} {}
  std::string_view kind() const override { return "concatenate"; }
  std::vector<NodePtr> inputs() const override { return {inputs_[0], inputs_[1]}; }
  NodePtr with_inputs(std::vector<NodePtr> inputs) const override {
    return std::make_shared<ConcatenateNode>(inputs.at(0), inputs.at(1));
  }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override {
    class It : public IteratorNode {
     public:
      It(const ConcatenateNode& n, const IteratorContext& c)
          : IteratorNode("concatenate"), node_(n), context_(c) {
        input_ = n.inputs_[0]->make_iterator(c);
      }
      std::optional<Element> next() override {
        while (input_) {
          if (auto e = input_->next()) return e;
          input_ = ++which_ < 2 ? node_.inputs_[which_]->make_iterator(context_) : nullptr;
        }
        return std::nullopt;
      }
      void save_state(StateWriter& w) override {
        w.write_int("which", which_);
        if (input_) input_->save(w.child("input"));
      }
      void restore_state(const StateReader& r) override {
        which_ = static_cast<int>(r.read_int("which"));
        input_ = which_ < 2 ? node_.inputs_[which_]->make_iterator(context_) : nullptr;
        if (input_) input_->restore(r.child("input"));
      }

     private:
      const ConcatenateNode& node_;
      IteratorContext context_;
      std::unique_ptr<IteratorNode> input_;
      int which_ = 0;
    };
    return std::make_unique<It>(*this, context);
  }

 private:
  NodePtr inputs_[2];
};

class ZipNode : public DatasetNode {
 public:
  explicit ZipNode(std::vector<NodePtr> inputs) : inputs_(std::move(inputs)) {
    if (inputs_.empty()) throw InvalidArgumentError("zip: no datasets given");
  }
  std::string_view kind() const override { return "zip"; }
  std::vector<NodePtr> inputs() const override { return inputs_; }
  NodePtr with_inputs(std::vector<NodePtr> inputs) const override {
    return std::make_shared<ZipNode>(std::move(inputs));
  }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override {
    class It : public IteratorNode {
     public:
      It(const ZipNode& n, const IteratorContext& c) : IteratorNode("zip") {
        for (const NodePtr& input : n.inputs_) inputs_.push_back(input->make_iterator(c));
      }
      std::optional<Element> next() override {
        if (done_) return std::nullopt;
        Element out;
        for (size_t i = 0; i < inputs_.size(); ++i) {
          auto e = inputs_[i]->next();
          if (!e) {
            done_ = true;
            return std::nullopt;
          }
          for (auto& [name, t] : e->features) {
            if (out.features.contains(name)) {
              throw InvalidArgumentError(str_cat("zip: feature '", name, "' of dataset ", i,
                                                 " is also in an earlier dataset; rename it "
                                                 "with map first"));
            }
            out.features.set(name, t);
          }
          if (e->has_labels()) {
            if (out.has_labels()) {
              throw InvalidArgumentError(str_cat("zip: dataset ", i,
                                                 " has labels, and so does "
                                                 "an earlier one; keep labels in one of them"));
            }
            out.labels = e->labels;
          }
        }
        return out;
      }
      void save_state(StateWriter& w) override {
        w.write_int("done", done_);
        for (size_t i = 0; i < inputs_.size(); ++i) inputs_[i]->save(w.child(str_cat("input", i)));
      }
      void restore_state(const StateReader& r) override {
        done_ = r.read_int("done") != 0;
        for (size_t i = 0; i < inputs_.size(); ++i) {
          inputs_[i]->restore(r.child(str_cat("input", i)));
        }
      }

     private:
      std::vector<std::unique_ptr<IteratorNode>> inputs_;
      bool done_ = false;
    };
    return std::make_unique<It>(*this, context);
  }

 private:
  std::vector<NodePtr> inputs_;
};

}  // namespace

Dataset Dataset::concatenate(const Dataset& other) const {
  return Dataset(std::make_shared<ConcatenateNode>(node_, other.node_));
}
Dataset Dataset::zip(std::vector<Dataset> datasets) {
  std::vector<NodePtr> nodes;
  for (const Dataset& d : datasets) nodes.push_back(d.node());
  return Dataset(std::make_shared<ZipNode>(std::move(nodes)));
}

}  // namespace cadre::io
