// Auto-sharding: rewriting one input pipeline so that each worker of a job reads a disjoint
// part of the input, as tf.distribute does to the datasets it distributes. The policy comes
// from the pipeline's options (Dataset::with_options; AUTO when none is set).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cadre/base/errors.h"
#include "cadre/io/dataset.h"

namespace cadre::io {

struct ShardedDataset {
  Dataset dataset;
  // What this worker reads, for its start-up log: "FILE: 2 of 4 files (a.tfrecord,
  // c.tfrecord)" or "DATA: elements 1, 3, 5, ... of the 'batch' stage".
  std::string plan;
};

// `dataset` as worker `worker_index` of `num_workers` reads it. FILE rewrites the
// file-reading sources (tfrecord_dataset, csv_dataset, list_files) to the worker's files;
// DATA adds a shard(num_workers, worker_index) at the end of the pipeline, below any
// trailing map and prefetch stages (which pass elements one for one, so the result is the
// same, with less work). Throws InvalidArgumentError for a bad worker index, and for FILE
// when no stage reads files or one reads fewer files than there are workers.
ShardedDataset auto_shard(const Dataset& dataset, int64_t num_workers, int64_t worker_index);

// FILE alone: each file-reading source keeps its files i with i % num_shards == index.
// nullopt, with the reason in *problem, when no stage reads files or one reads fewer files
// than there are shards.
std::optional<ShardedDataset> shard_by_files(const Dataset& dataset, int64_t num_shards,
                                             int64_t index, std::string* problem);

}  // namespace cadre::io
