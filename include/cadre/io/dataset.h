// Dataset: an input pipeline in the style of tf.data, built by chaining transformations on a
// source and walked by an Iterator.
//
//   Dataset ds = io::fashion_mnist(dir, io::Split::kTrain)
//                    .shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
//                    .shuffle(10'000, /*seed=*/42).repeat()
//                    .batch(ctx.per_replica_batch_size(256)).prefetch(2);
//   Iterator it = ds.make_iterator();
//   while (auto batch = it.next()) train_step(batch->features, batch->labels);
//
// A Dataset is an immutable description: transformations return new Datasets and leave
// this one usable; copying a Dataset is cheap. Any number of iterators may walk a Dataset
// at once, from any threads. Elements are io::Element: named feature tensors and optional
// labels.
//
// Functions passed to map, filter and interleave may throw: the exception reaches the
// caller of Iterator::next() for that element (with its message), also from background
// threads. With num_parallel_calls > 1 a map function is called concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cadre/base/env.h"
#include "cadre/io/dataset_options.h"
#include "cadre/io/element.h"
#include "cadre/io/iterator_state.h"

namespace cadre::io {

// "Choose for me": map parallelism equal to the cores, or a prefetch buffer that adapts to
// the consumer (see prefetch).
inline constexpr int kAutotune = -1;

class DatasetNode;
class IteratorNode;

// One walk through a Dataset. Move-only; destroying it stops and joins its background
// threads (prefetch, parallel map), also while they are blocked on a full buffer. Not
// thread-safe: one consumer thread calls next(), save() and restore().
class Iterator {
 public:
  // Walks `dataset` from `root`, one of its iterator nodes.
  Iterator(std::shared_ptr<const DatasetNode> dataset, std::unique_ptr<IteratorNode> root);
  Iterator(Iterator&&) noexcept;
  Iterator& operator=(Iterator&&) noexcept;
  ~Iterator();

  // The next element, or nullopt at the end of the data (and on every call after it).
  std::optional<Element> next();
  // The position after the last element returned, including shuffle buffers, RNG state,
  // file offsets and elements already prefetched or mapped in the background, so that an
  // iterator of the same pipeline restored from it returns exactly the elements this one
  // would have returned next.
  IteratorState save();
  // Says that save() will be called soon, after the next few elements: a pipeline that
  // ends with prefetch then records its input's position in the background, where it
  // costs the consumer nothing, and save() only has to name the prefetched elements. A
  // save() without it, or after more elements than were prefetched, waits for the
  // background thread to pause instead (and saves the same state).
  void prepare_save();
  // Moves this iterator (of the same pipeline) to a saved position. Throws
  // InvalidArgumentError when the state does not fit the pipeline.
  void restore(const IteratorState& state);

 private:
  // Iterator nodes refer to their dataset's nodes, so the dataset outlives the walk.
  std::shared_ptr<const DatasetNode> dataset_;
  std::unique_ptr<IteratorNode> root_;
};

class Dataset {
 public:
  using MapFn = std::function<Element(Element)>;
  using Predicate = std::function<bool(const Element&)>;
  using InterleaveFn = std::function<Dataset(const Element&)>;
  using GeneratorFn = std::function<std::optional<Element>()>;

  explicit Dataset(std::shared_ptr<const DatasetNode> node);

  // --- sources ---
  // One element.
  static Dataset from_tensors(Element element);
  // Element i holds row i (along dimension 0) of every feature and of the labels, which
  // must all have the same first dimension (InvalidArgumentError otherwise). Rows are
  // views of the given tensors.
  static Dataset from_tensor_slices(Features features, Tensor labels = Tensor());
  static Dataset from_tensor_slices(Tensor values);  // single-tensor elements
  // int64 scalars start, start + step, ... before stop (step may be negative, not 0).
  static Dataset range(int64_t stop);
  static Dataset range(int64_t start, int64_t stop, int64_t step = 1);
  // Byte-string elements (uint8 [n]), e.g. file names to interleave over.
  static Dataset from_strings(std::vector<std::string> strings);
  // The names of the files matching a glob pattern ("data/train-*.tfrecord"), sorted, as
  // byte strings. Unlike TensorFlow's, the order is not shuffled: shuffle afterwards with a
  // seed (auto-sharding divides these files among workers, which must agree on the order).
  // Throws NotFoundError when nothing matches.
  static Dataset list_files(const std::string& pattern);
  // Elements from calls to a copy of `next` until it returns nullopt. Every iterator gets
  // its own copy, so a stateful callable restarts from its initial state. Iterator state
  // records how many elements were produced and restore replays that many, so resuming is
  // exact for callables that produce the same sequence every time.
  static Dataset from_generator(GeneratorFn next);
  // Element i joins the i-th elements of every dataset: features merged by name, labels
  // from the one dataset that has them (a feature name in two datasets, or labels in two,
  // is an InvalidArgumentError). Ends with the shortest dataset.
  static Dataset zip(std::vector<Dataset> datasets);

  // --- transformations ---
  // fn applied to every element. num_parallel_calls > 1 (or kAutotune) runs fn on that
  // many background threads; deterministic = false lets a finished element overtake a
  // slower earlier one. An exception in fn is delivered at that element's position and
  // iteration may continue after it.
  Dataset map(MapFn fn, int num_parallel_calls = 1, bool deterministic = true) const;
  Dataset filter(Predicate predicate) const;
  // Stacks `batch_size` consecutive elements along a new dimension 0 (features by name,
  // labels likewise). The last batch may be smaller unless drop_remainder. Elements of one
  // batch must agree in names and shapes (InvalidArgumentError naming the feature and the
  // two shapes otherwise: use padded_batch for varying shapes).
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const;
  // Like batch, but pads each feature (and the labels) to the largest size in the batch of
  // every dimension, with `padding_value`. Ranks must agree.
  Dataset padded_batch(int64_t batch_size, double padding_value = 0,
                       bool drop_remainder = false) const;
  // The inverse of batch: one element per row of dimension 0 (which all features and the
  // labels must share).
  Dataset unbatch() const;
  // Samples uniformly from a buffer of `buffer_size` elements refilled from the input. The
  // order is a function of `seed` (and, with reshuffle_each_iteration, of the pass of an
  // enclosing repeat) only.
  Dataset shuffle(int64_t buffer_size, uint64_t seed = 0,
                  bool reshuffle_each_iteration = true) const;
  // The input `count` times over; count < 0 repeats forever.
  Dataset repeat(int64_t count = -1) const;
  // The first `count` elements (all of them when count < 0).
  Dataset take(int64_t count) const;
  // All but the first `count` elements (none when count < 0).
  Dataset skip(int64_t count) const;
  // Elements i with i % num_shards == index: shards are disjoint and cover the input.
  Dataset shard(int64_t num_shards, int64_t index) const;
  // Maps each input element to a dataset and interleaves the outputs: `cycle_length`
  // datasets are open at once, and `block_length` consecutive elements are taken from each
  // in turn (tf.data's interleave order). An exhausted dataset's slot is refilled from the
  // next input element.
  Dataset interleave(InterleaveFn fn, int64_t cycle_length, int64_t block_length = 1) const;
  // Produces up to `buffer_size` elements ahead on a background thread. kAutotune starts at
  // one element and grows (up to 16) when the consumer has to wait although the buffer
  // had filled up since its last wait, i.e. when production is bursty. A consumer that
  // finds the buffer empty spins for up to 200 us before it sleeps, since waking it would
  // cost the producer a system call and an interrupt per element.
  Dataset prefetch(int64_t buffer_size = kAutotune) const;
  // The input's elements, read once: an empty `filename` keeps them in memory; otherwise
  // they are written to `filename` (records of encoded elements, published by rename once
  // a pass completes) and later iterators, also in other processes, read that file. A pass
  // that stops early caches nothing. The file is written through `env` (null: the real
  // file system).
  Dataset cache(const std::string& filename = "", std::shared_ptr<Env> env = nullptr) const;
  // Adds an int64 scalar feature `name` counting elements from `start`.
  Dataset enumerate(int64_t start = 0, const std::string& name = "index") const;
  // This dataset's elements, then `other`'s.
  Dataset concatenate(const Dataset& other) const;
  // The same elements, with options for the code that runs the pipeline (auto-sharding
  // across workers: see dataset_options.h). Options set nearer the output win.
  Dataset with_options(const DatasetOptions& options) const;

  Iterator make_iterator() const;
  const std::shared_ptr<const DatasetNode>& node() const { return node_; }

 private:
  std::shared_ptr<const DatasetNode> node_;
};

}  // namespace cadre::io

namespace cadre {
using io::Dataset;
using io::Iterator;
}  // namespace cadre
