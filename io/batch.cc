// batch, padded_batch and unbatch.
#include "cadre/base/errors.h"
#include "cadre/io/dataset.h"
#include "core/base/strings.h"
#include "core/runtime/memory.h"
#include "io/dataset_node.h"
#include "io/tensor_rows.h"

namespace cadre::io {
namespace {

// Joins elements feature by feature; every element must carry the same feature names and
// the same presence of labels.
// `rows` is scratch space that the caller keeps from batch to batch, so that a batch
// allocates only its outputs.
Element join_elements(const std::vector<Element>& elements, bool pad, double padding_value,
                      std::vector<const Tensor*>& rows) {
  const Element& first = elements.front();
  auto mismatch = [&](const Element& e) {
    return InvalidArgumentError(
        str_cat("cannot batch elements with features [", join(first.features.names()), "]",
                first.has_labels() ? " and labels" : "", " together with elements with [",
                join(e.features.names()), "]", e.has_labels() ? " and labels" : ""));
  };
  for (const Element& e : elements) {
    if (e.features.size() != first.features.size() || e.has_labels() != first.has_labels()) {
      throw mismatch(e);
    }
  }
  auto join_rows = [&](const std::vector<const Tensor*>& rows, const std::string& what) {
    return pad ? pad_and_stack_rows(rows, padding_value, what) : stack_rows(rows, what);
  };
  Element out;
  rows.resize(elements.size());
  // Features iterate in name order, so equal name sets line up position by position.
  size_t position = 0;
  for (const auto& [name, unused] : first.features) {
    for (size_t i = 0; i < elements.size(); ++i) {
      const auto& item = *(elements[i].features.begin() + position);
      if (item.first != name) throw mismatch(elements[i]);
      rows[i] = &item.second;
    }
    out.features.set(name, join_rows(rows, name));
    ++position;
  }
  if (first.has_labels()) {
    for (size_t i = 0; i < elements.size(); ++i) rows[i] = &elements[i].labels;
    out.labels = join_rows(rows, "labels");
  }
  // The origins of the elements, each preceded by its length; none if one is unknown.
  size_t words = 0;
  for (const Element& e : elements) {
    if (e.origin.empty()) return out;
    words += 1 + e.origin.size();
  }
  out.origin.reserve(words);
  for (const Element& e : elements) {
    out.origin.push_back(static_cast<int64_t>(e.origin.size()));
    out.origin.insert(out.origin.end(), e.origin.begin(), e.origin.end());
  }
  return out;
}

class BatchNode : public UnaryNode<BatchNode> {
 public:
  BatchNode(NodePtr input, int64_t batch_size, bool drop_remainder, bool pad, double padding_value)
      : UnaryNode(std::move(input)),
        batch_size_(batch_size),
        drop_remainder_(drop_remainder),
        pad_(pad),
        padding_value_(padding_value) {
    if (batch_size <= 0) {
      throw InvalidArgumentError(
          str_cat("batch: batch_size is ", batch_size, "; expected a positive number"));
    }
  }
  std::string_view kind() const override { return pad_ ? "padded_batch" : "batch"; }

  bool can_fetch() const override { return input_->can_fetch(); }
  Element fetch(std::span<const int64_t> origin) const override {
    std::vector<Element> elements;
    for (size_t at = 0; at < origin.size();) {
      auto words = static_cast<uint64_t>(origin[at]);
      if (words == 0 || words > origin.size() - at - 1) {
        throw DataLossError(str_cat(kind(), ": the origin of a batch is damaged at word ", at));
      }
      elements.push_back(input_->fetch(origin.subspan(at + 1, words)));
      at += 1 + words;
    }
    if (elements.empty()) throw DataLossError(str_cat(kind(), ": the origin of a batch is empty"));
    std::vector<const Tensor*> rows;
    return join_elements(elements, pad_, padding_value_, rows);
  }

  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override;

 private:
  friend class BatchIterator;
  int64_t batch_size_;
  bool drop_remainder_, pad_;
  double padding_value_;
};

// batch and padded_batch: elements (or, from an in-memory source, rows) gathered batch_size
// at a time and joined.
class BatchIterator : public IteratorNode {
 public:
  BatchIterator(const BatchNode& n, const IteratorContext& c)
      : IteratorNode(n.pad_ ? "padded_batch" : "batch"),
        node_(n),
        input_(n.input()->make_iterator(c)) {}
  std::optional<Element> next() override {
    if (!node_.pad_ && input_->yields_rows()) {
      return next_of_rows();
    }
    elements_.clear();  // keeps its capacity from batch to batch
    while (static_cast<int64_t>(elements_.size()) < node_.batch_size_) {
      auto e = input_->next();
      if (!e) break;
      if (elements_.empty()) check_fits(*e);
      elements_.push_back(std::move(*e));
    }
    if (elements_.empty()) return std::nullopt;
    if (node_.drop_remainder_ && static_cast<int64_t>(elements_.size()) < node_.batch_size_) {
      elements_.clear();
      return std::nullopt;
    }
    Element out = join_elements(elements_, node_.pad_, node_.padding_value_, rows_);
    elements_.clear();
    return out;
  }
  bool skip() override {
    if (node_.pad_ || !input_->yields_rows()) return IteratorNode::skip();
    return pick_rows();
  }
  void save_state(StateWriter& w) override { input_->save(w.child("input")); }
  void restore_state(const StateReader& r) override { input_->restore(r.child("input")); }

 private:
  // Rows of an in-memory source gathered straight into the batch: the same batch as
  // joining the elements, without making them.
  std::optional<Element> next_of_rows() {
    if (!pick_rows()) return std::nullopt;
    return node_.input()->fetch_rows(rows_of_batch_);
  }

  // The next batch's rows into rows_of_batch_; false when there is no batch.
  bool pick_rows() {
    rows_of_batch_.clear();
    while (static_cast<int64_t>(rows_of_batch_.size()) < node_.batch_size_) {
      std::optional<int64_t> row = input_->next_row();
      if (!row) break;
      if (rows_of_batch_.empty() && !fits_checked_) {
        check_fits(node_.input()->fetch({&*row, 1}));
        fits_checked_ = true;
      }
      rows_of_batch_.push_back(*row);
    }
    if (rows_of_batch_.empty()) return false;
    return !node_.drop_remainder_ ||
           static_cast<int64_t>(rows_of_batch_.size()) == node_.batch_size_;
  }

  // A batch the size of the first element times batch_size must fit in memory twice
  // (the elements and the stacked batch): refused before it is gathered, since it
  // would grow the process until the kernel killed it.
  void check_fits(const Element& first) const {
    double bytes = first.labels.defined() ? static_cast<double>(first.labels.nbytes()) : 0;
    for (const auto& [name, tensor] : first.features) bytes += tensor.nbytes();
    double needed = 2 * bytes * static_cast<double>(node_.batch_size_);
    if (needed > static_cast<double>(memory_limit_bytes())) {
      throw ResourceExhaustedError(
          str_cat("batch: ", node_.batch_size_, " elements of ", human_bytes(bytes), " need ",
                  human_bytes(needed), " to batch; this process may use ",
                  human_bytes(memory_limit_bytes()), " at most: choose a smaller batch size"));
    }
  }

  const BatchNode& node_;
  std::unique_ptr<IteratorNode> input_;
  std::vector<Element> elements_;
  std::vector<int64_t> rows_of_batch_;
  bool fits_checked_ = false;
  std::vector<const Tensor*> rows_;
};

std::unique_ptr<IteratorNode> BatchNode::make_iterator(const IteratorContext& context) const {
  return std::make_unique<BatchIterator>(*this, context);
}

class UnbatchNode : public UnaryNode<UnbatchNode> {
 public:
  explicit UnbatchNode(NodePtr input) : UnaryNode(std::move(input)) {}
  std::string_view kind() const override { return "unbatch"; }

  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override {
    class It : public IteratorNode {
     public:
      It(const UnbatchNode& n, const IteratorContext& c)
          : IteratorNode("unbatch"), input_(n.input()->make_iterator(c)) {}
      std::optional<Element> next() override {
        while (!current_ || index_ >= rows_) {
          current_ = input_->next();
          if (!current_) return std::nullopt;
          index_ = 0;
          rows_ = count_rows(*current_);
        }
        Element out;
        for (const auto& [name, t] : current_->features)
          out.features.set(name, row_view(t, index_));
        if (current_->has_labels()) out.labels = row_view(current_->labels, index_);
        ++index_;
        return out;
      }
      void save_state(StateWriter& w) override {
        std::vector<Element> current;
        if (current_ && index_ < rows_) current.push_back(*current_);
        w.write_elements("current", current);
        w.write_int("index", index_);
        input_->save(w.child("input"));
      }
      void restore_state(const StateReader& r) override {
        std::vector<Element> current = r.read_elements("current");
        current_.reset();
        rows_ = 0;
        if (!current.empty()) {
          current_ = std::move(current.front());
          rows_ = count_rows(*current_);
        }
        index_ = r.read_int("index");
        input_->restore(r.child("input"));
      }

     private:
      static int64_t count_rows(const Element& e) {
        int64_t rows = -1;
        auto check = [&](const std::string& name, const Tensor& t) {
          if (t.rank() == 0) {
            throw InvalidArgumentError(str_cat("unbatch: '", name, "' is a scalar"));
          }
          if (rows >= 0 && t.dim(0) != rows) {
            throw InvalidArgumentError(str_cat("unbatch: '", name, "' has ", t.dim(0),
                                               " rows where other features have ", rows));
          }
          rows = t.dim(0);
        };
        for (const auto& [name, t] : e.features) check(name, t);
        if (e.has_labels()) check("labels", e.labels);
        return std::max<int64_t>(rows, 0);
      }

      std::unique_ptr<IteratorNode> input_;
      std::optional<Element> current_;
      int64_t index_ = 0, rows_ = 0;
    };
    return std::make_unique<It>(*this, context);
  }
};

}  // namespace

Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  return Dataset(std::make_shared<BatchNode>(node_, batch_size, drop_remainder, false, 0.0));
}

Dataset Dataset::padded_batch(int64_t batch_size, double padding_value, bool drop_remainder) const {
  return Dataset(
      std::make_shared<BatchNode>(node_, batch_size, drop_remainder, true, padding_value));
}

Dataset Dataset::unbatch() const { return Dataset(std::make_shared<UnbatchNode>(node_)); }

}  // namespace cadre::io
