// cache: the input's elements kept after the first complete pass, in memory or in a file of
// TFRecord-framed encoded elements.
#include <mutex>

#include "cadre/base/errors.h"
#include "cadre/io/dataset.h"
#include "cadre/io/tfrecord.h"
#include "core/base/strings.h"
#include "io/dataset_node.h"
#include "io/element_codec.h"
#include "io/saved_elements.h"

namespace cadre::io {
namespace {

// What the iterators of one in-memory cache share: the elements of the first complete pass.
struct MemoryCache {
  std::mutex mutex;
  bool complete = false;  // guarded by mutex; elements are immutable once complete
  std::vector<Element> elements;
};

class CacheNode : public DatasetNode {
 public:
  CacheNode(NodePtr input, std::string filename, std::shared_ptr<Env> env)
      : input_(std::move(input)), filename_(std::move(filename)), env_(std::move(env)) {}
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override;
  std::string_view kind() const override { return "cache"; }
  // A file cache hides its input: the file holds what that input produced when written.
  std::vector<NodePtr> inputs() const override {
    if (filename_.empty()) return {input_};
    return {};
  }
  // A new, empty memory cache over the new input.
  NodePtr with_inputs(std::vector<NodePtr> inputs) const override {
    return std::make_shared<CacheNode>(inputs.at(0), filename_, env_);
  }
  const NodePtr& input() const { return input_; }
  // The memory cache holds its input's elements as they were; the file cache's elements
  // are its file's records.
  bool can_fetch() const override { return filename_.empty() && input_->can_fetch(); }
  Element fetch(std::span<const int64_t> origin) const override { return input_->fetch(origin); }

  NodePtr input_;
  std::string filename_;
  std::shared_ptr<Env> env_;  // for the file cache
  std::shared_ptr<MemoryCache> memory_ = std::make_shared<MemoryCache>();
};

class MemoryCacheIterator : public IteratorNode {
 public:
  MemoryCacheIterator(const CacheNode& node, const IteratorContext& context)
      : IteratorNode("memory_cache"), node_(node), context_(context) {
    if (!cache_complete()) input_ = node_.input()->make_iterator(context_);
  }

  std::optional<Element> next() override {
    if (!input_) {  // reading
      if (index_ >= node_.memory_->elements.size()) return std::nullopt;
      return node_.memory_->elements[index_++];
    }
    auto e = input_->next();
    if (e) {
      written_.push_back(*e);
      return e;
    }
    publish();
    input_.reset();
    index_ = written_.size();
    written_.clear();
    return std::nullopt;
  }

  void save_state(StateWriter& w) override {
    w.write_int("reading", input_ == nullptr);
    w.write_int("index", static_cast<int64_t>(index_));
    if (input_) {
      save_elements(w, "written", written_, *node_.input());
      input_->save(w.child("input"));
    }
  }

  void restore_state(const StateReader& r) override {
    index_ = static_cast<size_t>(r.read_int("index"));
    written_.clear();
    if (r.read_int("reading") != 0) {
      input_.reset();
      if (!cache_complete()) fill();  // another process filled it: fill ours the same way
      return;
    }
    input_ = node_.input()->make_iterator(context_);
    input_->restore(r.child("input"));
    written_ = restore_elements(r, "written", *node_.input());
  }

 private:
  bool cache_complete() const {
    std::lock_guard lock(node_.memory_->mutex);
    return node_.memory_->complete;
  }

  void publish() {
    std::lock_guard lock(node_.memory_->mutex);
    if (node_.memory_->complete) return;  // another iterator finished first
    node_.memory_->elements = written_;
    node_.memory_->complete = true;
  }

  void fill() {
    auto input = node_.input()->make_iterator(context_);
    written_.clear();
    while (auto e = input->next()) written_.push_back(std::move(*e));
    publish();
    written_.clear();
  }

  const CacheNode& node_;
  IteratorContext context_;
  std::unique_ptr<IteratorNode> input_;  // null once reading from the cache
  std::vector<Element> written_;         // this pass so far, while not reading
  size_t index_ = 0;
};

// Writes `<filename>.partial` during the first pass and renames it to `filename` at the
// end; later iterators read `filename`. Records sit at the same offsets in both files, so a
// saved offset means the same position in either.
class FileCacheIterator : public IteratorNode {
 public:
  FileCacheIterator(const CacheNode& node, const IteratorContext& context)
      : IteratorNode("file_cache"),
        node_(node),
        context_(context),
        partial_(node.filename_ + ".partial") {
    if (env().file_exists(node_.filename_)) {
      reader_ = std::make_unique<TFRecordReader>(node_.filename_, node_.env_);
    } else {
      // The writer opens (truncating the partial file) at the first element, so that a
      // restore before it can still continue a partial file.
      input_ = node_.input()->make_iterator(context_);
    }
  }

  std::optional<Element> next() override {
    if (reader_) {
      auto record = reader_->read();
      if (!record) return std::nullopt;
      size_t offset = 0;
      Element e = decode_element(*record, offset, node_.filename_);
      return e;
    }
    if (!input_) return std::nullopt;
    if (!writer_) writer_ = open_writer(/*append=*/false);
    auto e = input_->next();
    if (e) {
      std::string bytes;
      encode_element(*e, bytes);
      writer_->write(bytes);
      return e;
    }
    // Publish atomically: readers never see a partial cache under the final name.
    writer_->flush(/*sync=*/true);
    writer_->close();
    env().rename_file(partial_, node_.filename_);
    writer_.reset();
    input_.reset();
    return std::nullopt;
  }

  void save_state(StateWriter& w) override {
    w.write_int("reading", reader_ != nullptr);
    if (reader_) {
      w.write_int("offset", static_cast<int64_t>(reader_->offset()));
    } else if (input_) {
      if (!writer_) writer_ = open_writer(/*append=*/false);
      writer_->flush(/*sync=*/true);  // the saved offset must name bytes on disk
      w.write_int("offset", static_cast<int64_t>(writer_->offset()));
      input_->save(w.child("input"));
    } else {
      w.write_int("offset", -1);  // the writing pass ended
    }
  }

  void restore_state(const StateReader& r) override {
    int64_t offset = r.read_int("offset");
    reader_.reset();
    writer_.reset();
    input_.reset();
    if (offset < 0) return;
    if (r.read_int("reading") != 0 || env().file_exists(node_.filename_)) {
      reader_ = std::make_unique<TFRecordReader>(node_.filename_, node_.env_);
      reader_->seek(static_cast<uint64_t>(offset));
      return;
    }
    if (!env().file_exists(partial_) || env().file_size(partial_) < static_cast<uint64_t>(offset)) {
      throw FailedPreconditionError(str_cat("cache: cannot resume writing ", partial_,
                                            ": it is missing or shorter than the saved ", offset,
                                            " bytes"));
    }
    env().truncate_file(partial_, static_cast<uint64_t>(offset));
    writer_ = open_writer(/*append=*/true);
    input_ = node_.input()->make_iterator(context_);
    input_->restore(r.child("input"));
  }

 private:
  Env& env() const { return *node_.env_; }
  std::unique_ptr<TFRecordWriter> open_writer(bool append) const {
    return std::make_unique<TFRecordWriter>(partial_, append, node_.env_);
  }

  const CacheNode& node_;
  IteratorContext context_;
  std::string partial_;
  std::unique_ptr<TFRecordReader> reader_;  // set when reading the finished cache
  std::unique_ptr<IteratorNode> input_;     // set while writing
  std::unique_ptr<TFRecordWriter> writer_;  // opened with the first element written
};

std::unique_ptr<IteratorNode> CacheNode::make_iterator(const IteratorContext& context) const {
  if (filename_.empty()) return std::make_unique<MemoryCacheIterator>(*this, context);
  return std::make_unique<FileCacheIterator>(*this, context);
}

}  // namespace

Dataset Dataset::cache(const std::string& filename, std::shared_ptr<Env> env) const {
  return Dataset(std::make_shared<CacheNode>(node_, filename, env ? std::move(env) : posix_env()));
}

}  // namespace cadre::io
