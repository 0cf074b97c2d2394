// Dataset sources held in memory or computed: from_tensors, from_tensor_slices, range,
// from_strings, list_files, from_generator.
#include <glob.h>

#include <algorithm>

#include "cadre/base/errors.h"
#include "cadre/io/dataset.h"
#include "core/base/strings.h"
#include "io/dataset_node.h"
#include "io/tensor_rows.h"

namespace cadre::io {
namespace {

class TensorsNode : public DatasetNode {
 public:
  explicit TensorsNode(Element element) : element_(std::move(element)) {}
  std::string_view kind() const override { return "from_tensors"; }

  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext&) const override {
    class It : public IteratorNode {
     public:
      explicit It(const Element& e) : IteratorNode("from_tensors"), element_(e) {}
      std::optional<Element> next() override {
        if (done_) return std::nullopt;
        done_ = true;
        Element e = element_;
        e.origin = {0};
        return e;
      }
      void save_state(StateWriter& w) override { w.write_int("done", done_); }
      void restore_state(const StateReader& r) override { done_ = r.read_int("done") != 0; }

     private:
      const Element& element_;
      bool done_ = false;
    };
    return std::make_unique<It>(element_);
  }
  bool can_fetch() const override { return true; }
  Element fetch(std::span<const int64_t> origin) const override {
    if (origin.size() != 1 || origin[0] != 0) {
      throw DataLossError(str_cat("from_tensors: no element at origin [", join(origin), "]"));
    }
    Element e = element_;
    e.origin = {0};
    return e;
  }

 private:
  Element element_;
};

class SlicesNode : public DatasetNode {
 public:
  std::string_view kind() const override { return "from_tensor_slices"; }
  SlicesNode(Features features, Tensor labels)
      : features_(std::move(features)), labels_(std::move(labels)) {
    std::vector<std::string> described;
    auto check = [&](const std::string& name, const Tensor& t) {
      if (t.rank() == 0) {
        throw InvalidArgumentError(
            str_cat("from_tensor_slices: '", name, "' is a scalar; slicing needs dimension 0"));
      }
      if (size_ < 0) size_ = t.dim(0);
      described.push_back(str_cat(name, " ", t.shape()));
      if (t.dim(0) != size_) {
        throw InvalidArgumentError(
            str_cat("from_tensor_slices: dimension 0 differs among [", join(described), "]"));
      }
    };
    for (const auto& [name, t] : features_) check(name, t);
    if (labels_.defined()) check("labels", labels_);
    if (size_ < 0) throw InvalidArgumentError("from_tensor_slices: no tensors to slice");
    // Rows are views with the stored strides; make them on host memory once.
    for (const auto& [name, t] : features_) features_.set(name, t.to(Device::cpu(0)));
    if (labels_.defined()) labels_ = labels_.to(Device::cpu(0));
  }

  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext&) const override {
    class It : public IteratorNode {
     public:
      explicit It(const SlicesNode& node) : IteratorNode("from_tensor_slices"), node_(node) {}
      std::optional<Element> next() override {
        if (index_ >= node_.size_) return std::nullopt;
        return node_.row(index_++);
      }
      bool yields_rows() const override { return true; }
      std::optional<int64_t> next_row() override {
        if (index_ >= node_.size_) return std::nullopt;
        return index_++;
      }
      void save_state(StateWriter& w) override { w.write_int("index", index_); }
      void restore_state(const StateReader& r) override { index_ = r.read_int("index"); }

     private:
      const SlicesNode& node_;
      int64_t index_ = 0;
    };
    return std::make_unique<It>(*this);
  }

  bool can_fetch() const override { return true; }
  Element fetch(std::span<const int64_t> origin) const override {
    if (origin.size() != 1 || origin[0] < 0 || origin[0] >= size_) {
      throw DataLossError(str_cat("from_tensor_slices: no slice at origin [", join(origin),
                                  "]; there are ", size_));
    }
    return row(origin[0]);
  }
  Element fetch_rows(std::span<const int64_t> rows) const override {
    Element e;
    for (const auto& [name, t] : features_) {
      e.features.set(name, gather_rows(t, rows, "from_tensor_slices"));
    }
    if (labels_.defined()) e.labels = gather_rows(labels_, rows, "from_tensor_slices");
    e.origin = batch_origin(rows);
    return e;
  }

 private:
  Element row(int64_t i) const {
    Element e;
    for (const auto& [name, t] : features_) e.features.set(name, row_view(t, i));
    if (labels_.defined()) e.labels = row_view(labels_, i);
    e.origin = {i};
    return e;
  }

  Features features_;
  Tensor labels_;
  int64_t size_ = -1;
};

class RangeNode : public DatasetNode {
 public:
  RangeNode(int64_t start, int64_t stop, int64_t step) : start_(start), stop_(stop), step_(step) {
    if (step == 0) throw InvalidArgumentError("range: step must not be 0");
  }
  std::string_view kind() const override { return "range"; }

  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext&) const override {
    class It : public IteratorNode {
     public:
      explicit It(const RangeNode& n) : IteratorNode("range"), node_(n), value_(n.start_) {}
      std::optional<Element> next() override {
        if (node_.step_ > 0 ? value_ >= node_.stop_ : value_ <= node_.stop_) return std::nullopt;
        int64_t v = value_;
        value_ += node_.step_;
        return node_.fetch({&v, 1});
      }
      void save_state(StateWriter& w) override { w.write_int("value", value_); }
      void restore_state(const StateReader& r) override { value_ = r.read_int("value"); }

     private:
      const RangeNode& node_;
      int64_t value_;
    };
    return std::make_unique<It>(*this);
  }

  // The origin of an element is its value.
  bool can_fetch() const override { return true; }
  Element fetch(std::span<const int64_t> origin) const override {
    auto in_range = [&](int64_t v) {
      bool inside = step_ > 0 ? v >= start_ && v < stop_ : v <= start_ && v > stop_;
      if (!inside) return false;
      // |v - start| and |step| in unsigned arithmetic: exact, whatever the values.
      uint64_t distance = step_ > 0 ? static_cast<uint64_t>(v) - static_cast<uint64_t>(start_)
                                    : static_cast<uint64_t>(start_) - static_cast<uint64_t>(v);
      uint64_t stride = step_ > 0 ? static_cast<uint64_t>(step_) : 0 - static_cast<uint64_t>(step_);
      return distance % stride == 0;
    };
    if (origin.size() != 1 || !in_range(origin[0])) {
      throw DataLossError(str_cat("range(", start_, ", ", stop_, ", ", step_, "): origin [",
                                  join(origin), "] is not one of its values"));
    }
    Element e(Tensor::scalar<int64_t>(origin[0]));
    e.origin = {origin[0]};
    return e;
  }

 private:
  int64_t start_, stop_, step_;
};

class GeneratorNode : public DatasetNode {
 public:
  explicit GeneratorNode(Dataset::GeneratorFn fn) : fn_(std::move(fn)) {
    if (!fn_) throw InvalidArgumentError("from_generator: empty function");
  }
  std::string_view kind() const override { return "generator"; }

  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext&) const override {
    class It : public IteratorNode {
     public:
      explicit It(const Dataset::GeneratorFn& fn) : IteratorNode("generator"), initial_(fn) {
        fn_ = initial_;
      }
      std::optional<Element> next() override {
        if (done_) return std::nullopt;
        std::optional<Element> e = fn_();
        if (!e) {
          done_ = true;
        } else {
          ++produced_;
        }
        return e;
      }
      void save_state(StateWriter& w) override { w.write_int("produced", produced_); }
      void restore_state(const StateReader& r) override {
        int64_t target = r.read_int("produced");
        fn_ = initial_;  // a fresh copy, then replay
        produced_ = 0;
        done_ = false;
        while (produced_ < target) {
          if (!next()) {
            throw InvalidArgumentError(str_cat("generator: the saved state is ", target,
                                               " elements in, but the generator now ends after ",
                                               produced_));
          }
        }
      }

     private:
      const Dataset::GeneratorFn& initial_;
      Dataset::GeneratorFn fn_;
      int64_t produced_ = 0;
      bool done_ = false;
    };
    return std::make_unique<It>(fn_);
  }

 private:
  Dataset::GeneratorFn fn_;
};

// Byte-string elements (uint8 [n]) from a list, for from_strings and list_files.
Element string_element(std::string_view kind, const std::vector<std::string>& strings,
                       std::span<const int64_t> origin) {
  if (origin.size() != 1 || origin[0] < 0 || origin[0] >= static_cast<int64_t>(strings.size())) {
    throw DataLossError(
        str_cat(kind, ": no string at origin [", join(origin), "]; there are ", strings.size()));
  }
  Element e(bytes_tensor(strings[origin[0]]));
  e.origin = {origin[0]};
  return e;
}

class StringsIterator : public IteratorNode {
 public:
  StringsIterator(std::string_view kind, const std::vector<std::string>& strings)
      : IteratorNode(kind), strings_(strings) {}
  std::optional<Element> next() override {
    if (index_ >= strings_.size()) return std::nullopt;
    auto i = static_cast<int64_t>(index_++);
    return string_element(kind(), strings_, {&i, 1});
  }
  void save_state(StateWriter& w) override { w.write_int("index", static_cast<int64_t>(index_)); }
  void restore_state(const StateReader& r) override {
    index_ = static_cast<size_t>(r.read_int("index"));
  }

 private:
  const std::vector<std::string>& strings_;
  size_t index_ = 0;
};

class StringsNode : public DatasetNode {
 public:
  explicit StringsNode(std::vector<std::string> strings) : strings_(std::move(strings)) {}
  std::string_view kind() const override { return "from_strings"; }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext&) const override {
    return std::make_unique<StringsIterator>("from_strings", strings_);
  }
  bool can_fetch() const override { return true; }
  Element fetch(std::span<const int64_t> origin) const override {
    return string_element(kind(), strings_, origin);
  }

 private:
  std::vector<std::string> strings_;
};

class ListFilesNode : public FileSourceNode {
 public:
  explicit ListFilesNode(std::vector<std::string> files) : files_(std::move(files)) {}
  std::string_view kind() const override { return "list_files"; }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext&) const override {
    return std::make_unique<StringsIterator>("list_files", files_);
  }
  bool can_fetch() const override { return true; }
  Element fetch(std::span<const int64_t> origin) const override {
    return string_element(kind(), files_, origin);
  }
  const std::vector<std::string>& files() const override { return files_; }
  NodePtr with_files(std::vector<std::string> files) const override {
    return std::make_shared<ListFilesNode>(std::move(files));
  }

 private:
  std::vector<std::string> files_;
};

}  // namespace

Dataset Dataset::from_tensors(Element element) {
  return Dataset(std::make_shared<TensorsNode>(std::move(element)));
}

Dataset Dataset::from_tensor_slices(Features features, Tensor labels) {
  return Dataset(std::make_shared<SlicesNode>(std::move(features), std::move(labels)));
}

Dataset Dataset::from_tensor_slices(Tensor values) {
  return from_tensor_slices(Features{{std::string(kValueFeature), std::move(values)}});
}

Dataset Dataset::range(int64_t stop) { return range(0, stop, 1); }

Dataset Dataset::range(int64_t start, int64_t stop, int64_t step) {
  return Dataset(std::make_shared<RangeNode>(start, stop, step));
}

Dataset Dataset::from_strings(std::vector<std::string> strings) {
  return Dataset(std::make_shared<StringsNode>(std::move(strings)));
}

Dataset Dataset::list_files(const std::string& pattern) {
  glob_t matches{};
  int status = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &matches);
  std::vector<std::string> files(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
  ::globfree(&matches);
  if (status == GLOB_NOMATCH || (status == 0 && files.empty())) {
    throw NotFoundError(str_cat("list_files: no file matches '", pattern, "'"));
  }
  if (status != 0) {
    throw UnavailableError(str_cat("list_files: cannot read the directories of '", pattern, "'"));
  }
  std::sort(files.begin(), files.end());
  return Dataset(std::make_shared<ListFilesNode>(std::move(files)));
}

Dataset Dataset::from_generator(GeneratorFn next) {
  return Dataset(std::make_shared<GeneratorNode>(std::move(next)));
}

}  // namespace cadre::io
