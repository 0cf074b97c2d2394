#include "serving/batcher.h"

#include <algorithm>

#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/runtime/threading.h"
#include "core/base/strings.h"

namespace cadre::serving_internal {

namespace {

bool same_inputs(const io::Features& a, const io::Features& b) { return a.names() == b.names(); }

// The divisor of the process's thread budget (what ReplicaThreadScope takes) that leaves a
// forward pass about `threads` threads; 0: the whole budget.
int budget_divisor(int threads) {
  return threads > 0 ? std::max(1, intra_op_threads_budget() / threads) : 1;
}

}  // namespace

class Batcher::Admission {
 public:
  Admission(Batcher& batcher, int64_t rows) : batcher_(batcher), rows_(rows) {
    MutexLock lock(batcher_.mutex_);
    if (batcher_.stopping_) throw UnavailableError("the server is stopping");
    if (batcher_.admitted_ + rows_ > batcher_.max_queued_examples_) {
      throw ResourceExhaustedError(str_cat("the server is overloaded: ", batcher_.admitted_,
                                           " examples are queued or running (at most ",
                                           batcher_.max_queued_examples_, "); retry later"));
    }
    batcher_.admitted_ += rows_;
  }
  ~Admission() {
    MutexLock lock(batcher_.mutex_);
    batcher_.admitted_ -= rows_;
  }

 private:
  Batcher& batcher_;
  int64_t rows_;
};

Batcher::Arrival::Arrival(Batcher& batcher) : batcher_(&batcher) {
  MutexLock lock(batcher_->mutex_);
  ++batcher_->arriving_;
}

Batcher::Arrival::~Arrival() {
  if (!batcher_) return;
  {
    MutexLock lock(batcher_->mutex_);
    --batcher_->arriving_;
  }
  batcher_->changed_.notify_all();
}

Batcher::Batcher(const BatchingOptions& options, int64_t max_queued_examples, int intra_op_threads)
    : options_(options),
      max_queued_examples_(max_queued_examples),
      intra_op_threads_(intra_op_threads) {
  if (options_.enabled) worker_ = std::thread([this] { loop(); });
}

Batcher::~Batcher() { stop(); }

void Batcher::stop() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::map<std::string, Tensor> Batcher::run(Arrival arrival, std::shared_ptr<LoadedVersion> version,
                                           const std::string& signature, io::Features inputs) {
  int64_t rows = inputs.begin()->second.dim(0);
  Admission admission(*this, rows);
  if (!options_.enabled) {
    ReplicaThreadScope threads(budget_divisor(intra_op_threads_));
    return version->predict(inputs, signature);
  }
  auto task = std::make_shared<Task>();
  task->version = std::move(version);
  task->signature = signature;
  task->inputs = std::move(inputs);
  task->rows = rows;
  task->enqueued = std::chrono::steady_clock::now();
  std::future<std::map<std::string, Tensor>> result = task->result.get_future();
  {
    MutexLock lock(mutex_);
    // Checked again here: the batching thread may have ended since the admission.
    if (stopping_) throw UnavailableError("the server is stopping");
    queue_.push_back(task);
    // Queued with the count lowered at once, so the batching thread never sees it twice.
    arrival.batcher_ = nullptr;
    --arriving_;
  }
  changed_.notify_all();
  return result.get();
}

int64_t Batcher::ready_rows() const {
  const Task& first = *queue_.front();
  int64_t rows = 0;
  for (const auto& task : queue_) {
    if (task->version == first.version && task->signature == first.signature) rows += task->rows;
  }
  return rows;
}

std::vector<std::shared_ptr<Batcher::Task>> Batcher::take_batch() {
  std::vector<std::shared_ptr<Task>> batch{queue_.front()};
  queue_.pop_front();
  int64_t rows = batch[0]->rows;
  for (auto it = queue_.begin(); it != queue_.end() && rows < options_.max_batch_size;) {
    const Task& task = **it;
    if (task.version == batch[0]->version && task.signature == batch[0]->signature &&
        same_inputs(task.inputs, batch[0]->inputs) && rows + task.rows <= options_.max_batch_size) {
      rows += task.rows;
      batch.push_back(*it);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  return batch;
}

void Batcher::loop() {
  for (;;) {
    std::vector<std::shared_ptr<Task>> batch;
    {
      MutexLock lock(mutex_);
      changed_.wait(mutex_,
                    [this]() CADRE_REQUIRES(mutex_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto deadline =
          queue_.front()->enqueued + std::chrono::microseconds(options_.batch_timeout_micros);
      changed_.wait_until(mutex_, deadline, [this]() CADRE_REQUIRES(mutex_) {
        return stopping_ || arriving_ == 0 || ready_rows() >= options_.max_batch_size;
      });
      batch = take_batch();
    }
    execute(batch);
  }
}

void Batcher::execute(const std::vector<std::shared_ptr<Task>>& batch) {
  ReplicaThreadScope threads(budget_divisor(intra_op_threads_));
  try {
    io::Features inputs;
    if (batch.size() == 1) {
      inputs = batch[0]->inputs;
    } else {
      for (const std::string& name : batch[0]->inputs.names()) {
        std::vector<Tensor> parts;
        for (const auto& task : batch) parts.push_back(task->inputs.at(name));
        inputs.set(name, concat(parts, 0));
      }
    }
    std::map<std::string, Tensor> outputs = batch[0]->version->predict(inputs, batch[0]->signature);
    int64_t start = 0;
    for (const auto& task : batch) {
      std::map<std::string, Tensor> mine;
      for (const auto& [name, tensor] : outputs) {
        if (tensor.rank() == 0 || tensor.dim(0) != inputs.begin()->second.dim(0)) {
          throw InternalError(str_cat("output '", name, "' is not batched like the inputs"));
        }
        mine[name] = tensor.slice(0, start, start + task->rows).contiguous();
      }
      start += task->rows;
      task->result.set_value(std::move(mine));
    }
  } catch (...) {
    for (const auto& task : batch) {
      try {
        task->result.set_exception(std::current_exception());
      } catch (const std::future_error&) {
        // This task already has its rows.
      }
    }
  }
}

}  // namespace cadre::serving_internal
