// Options a pipeline carries for the code that runs it (Dataset::with_options), as
// tf.data.Options.
#pragma once

#include <string_view>

namespace cadre::io {

// How a pipeline's input is divided among the workers of a job (tf.data's
// AutoShardPolicy). kAuto: leave a pipeline that already shards by the worker count alone,
// else FILE when every file-reading stage reads at least one file per worker, else DATA.
// kFile: each worker reads its own files (file i goes to worker i % workers). kData: every
// worker reads all the input and keeps elements worker, worker + workers, ... of the
// pipeline's output. kOff: every worker reads all of it.
enum class AutoShardPolicy { kAuto, kFile, kData, kOff };

struct DatasetOptions {
  AutoShardPolicy auto_shard_policy = AutoShardPolicy::kAuto;
};

}  // namespace cadre::io
