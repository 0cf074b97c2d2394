// Input spread over the replicas of a strategy (Strategy::distribute_dataset and
// distribute_datasets_from_function): each step gives every replica its element, on its
// device.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "cadre/io/dataset.h"
#include "cadre/strategies/per_replica.h"
#include "cadre/tensor/device.h"

namespace cadre {

// How a worker's replicas take their share of each global batch: this worker's replicas
// are replicas [first, first + devices) of `total` in the job.
struct BatchSplit {
  int first = 0;
  int total = 1;
};

// Move-only; one consumer thread, as io::Iterator.
class DistributedIterator {
 public:
  // Element r is delivered on devices[r]. With split_batches, each element is a global
  // batch that `split` divides over the job's replicas.
  DistributedIterator(io::Iterator iterator, std::vector<Device> devices, bool split_batches,
                      BatchSplit split = {});
  DistributedIterator(DistributedIterator&&) noexcept;
  DistributedIterator& operator=(DistributedIterator&&) noexcept;
  ~DistributedIterator();

  // The next step's inputs (element r feeds replica r), or nullopt at the end of the data.
  // Splitting a global batch of B examples over N replicas (of every worker) gives the
  // first B % N replicas one example more than the others (their weights in
  // apply_gradients keep the average exact); a batch smaller than N is an
  // InvalidArgumentError. From a function, each replica takes the next element; a step
  // that cannot be filled ends the data. Copies to a GPU are asynchronous: they stay
  // alive until the next call.
  std::optional<PerReplica<io::Element>> next();
  // Inputs for a step with no examples: those of the first step next() gave, with no rows
  // (a worker whose input has ended steps so beside workers whose input goes on, as
  // tf.distribute's get_next_as_optional lets it). Nullopt before next() gave one.
  std::optional<PerReplica<io::Element>> no_rows() const;
  io::IteratorState save();
  // See io::Iterator::prepare_save.
  void prepare_save();
  void restore(const io::IteratorState& state);

 private:
  std::optional<PerReplica<io::Element>> take_next();
  struct State;
  std::unique_ptr<State> state_;
};

class DistributedDataset {
 public:
  DistributedDataset(io::Dataset dataset, std::vector<Device> devices, bool split_batches,
                     BatchSplit split = {})
      : dataset_(std::move(dataset)),
        devices_(std::move(devices)),
        split_(split_batches),
        batch_split_(split) {}
  DistributedIterator make_iterator() const;

 private:
  io::Dataset dataset_;
  std::vector<Device> devices_;
  bool split_;
  BatchSplit batch_split_;
};

}  // namespace cadre
