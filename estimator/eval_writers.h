// The event files an Estimator writes: one per directory for the Estimator's life, each
// opened when first written to. Its evaluations write one per eval directory (TensorFlow
// writes one per evaluator process), flushed after each evaluation so that TensorBoard and
// the evaluator's cursor see it at once; its training runs (on the chief) write model_dir's,
// one for every train() call of the Estimator (TensorFlow's FileWriterCache), flushed when
// each ends.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "cadre/base/env.h"
#include "cadre/base/mutex.h"
#include "cadre/estimator/estimator.h"
#include "cadre/io/summary_writer.h"

namespace cadre {

struct Estimator::EvalWriters {
  // The writer of `dir`, made on first use.
  io::SummaryWriter& writer(const std::string& dir, const std::shared_ptr<Env>& env) {
    MutexLock lock(mutex);
    std::unique_ptr<io::SummaryWriter>& writer = by_dir[dir];
    if (!writer) {
      io::SummaryWriterOptions options;
      options.env = env;
      writer = std::make_unique<io::SummaryWriter>(dir, options);
    }
    return *writer;
  }

  Mutex mutex;
  std::map<std::string, std::unique_ptr<io::SummaryWriter>> by_dir CADRE_GUARDED_BY(mutex);
};

}  // namespace cadre
