#include "estimator/worker_parts.h"

#include <glog/logging.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <utility>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/variables.h"
#include "checkpoint/parts.h"
#include "core/base/strings.h"
#include "core/nn/deferred_copy.h"
#include "strategies/cluster/store.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {
namespace {

// How long the chief waits for a worker's part. A worker that dies, or fails, fails the
// cluster, and the store answers a wait with that failure at once; this bounds only a worker
// alive but stuck.
constexpr double kPartTimeoutSeconds = 3600;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string part_key(const std::string& file_name) { return "checkpoint_part/" + file_name; }

// A worker's report, "<bytes> <crc32c>", or "error <code> <message>".
std::string outcome_text(const checkpoint::WrittenPart& written, const std::exception_ptr& error) {
  if (!error) return str_cat(written.bytes, " ", written.crc32c);
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return str_cat("error ", static_cast<int>(e.code()), " ", e.what());
  } catch (const std::exception& e) {
    return str_cat("error ", static_cast<int>(ErrorCode::kInternal), " ", e.what());
  }
}

std::pair<uint64_t, uint32_t> parse_outcome(const std::string& text, const std::string& file_name) {
  std::istringstream in(text);
  if (text.starts_with("error ")) {
    std::string word;
    int code = static_cast<int>(ErrorCode::kInternal);
    in >> word >> code;
    std::string message;
    std::getline(in, message);
    throw_error(static_cast<ErrorCode>(code), str_cat("checkpoint part ", file_name, ":", message));
  }
  uint64_t bytes = 0;
  uint32_t crc = 0;
  if (!(in >> bytes >> crc)) {
    throw InternalError(str_cat("checkpoint part ", file_name, ": unreadable report '", text, "'"));
  }
  return {bytes, crc};
}

// Every worker's slices of `store` in a save of `step` in `count` parts, and worker `me`'s
// part of it: views of its variables' rows, the same on every worker.
std::vector<std::vector<checkpoint::PartSlice>> worker_shares(const nn::VariableStore& store,
                                                              int64_t step, int count, int me,
                                                              checkpoint::CheckpointData* mine) {
  checkpoint::CheckpointData all;
  all.global_step = step;
  checkpoint::add_variables(store, &all);
  std::vector<std::vector<checkpoint::PartSlice>> shares =
      checkpoint::split_among_workers(all, count, checkpoint::kSplitByRowsBytes);
  *mine = checkpoint::part_data(all, shares[static_cast<size_t>(me)]);
  return shares;
}

}  // namespace

std::unique_ptr<WorkerParts> WorkerParts::create(const StrategyExtended& extended,
                                                 const nn::VariableStore& store,
                                                 std::string model_dir, std::string task) {
  int64_t bytes = 0;
  for (nn::Variable* v : store.variables()) {
    if (!v->spec().slot_of.empty()) continue;
    bytes += v->spec().shape.num_elements() * static_cast<int64_t>(dtype_size(v->spec().dtype));
  }
  int count = extended.worker_checkpoint_parts(bytes);
  if (count == 0 || extended.part_store() == nullptr) return nullptr;
  auto parts =
      std::make_unique<WorkerParts>(extended, count, std::move(model_dir), std::move(task));
  checkpoint::CheckpointData mine;
  worker_shares(store, /*step=*/0, count, extended.worker_index(), &mine);
  parts->writer_.prepare(mine);
  return parts;
}

WorkerParts::WorkerParts(const StrategyExtended& extended, int count, std::string model_dir,
                         std::string task)
    : extended_(extended),
      count_(count),
      model_dir_(std::move(model_dir)),
      task_(std::move(task)) {}

void WorkerParts::start(const nn::VariableStore& store, int64_t step) {
  auto started = std::chrono::steady_clock::now();
  // What the updates since the save before waited for its snapshot, and that with the whole
  // of the updates that made its copies in their own pass (an upper bound on what those cost).
  double blocked = nn::deferred_copy_blocked_seconds(), waited = nn::deferred_copy_wait_seconds();
  if (blocked_at_start_ >= 0) {
    LOG(INFO) << task_ << ": since the save before, updates waited "
              << 1e3 * (blocked - blocked_at_start_) << " ms for its snapshot ("
              << 1e3 * (waited - waited_at_start_) << " ms with the updates that copied it)";
  }
  blocked_at_start_ = blocked;
  waited_at_start_ = waited;
  // The chief's id for the save: a step saved again never overwrites its published parts.
  std::random_device random;
  int64_t drawn = extended_.broadcast_from_chief(static_cast<int64_t>(random() & 0xffffffffu));
  char id[16];
  std::snprintf(id, sizeof(id), "%08x", static_cast<unsigned>(drawn));
  const int me = extended_.worker_index();
  checkpoint::CheckpointData mine;
  std::vector<std::vector<checkpoint::PartSlice>> shares =
      worker_shares(store, step, count_, me, &mine);
  std::vector<std::string> names;
  for (int k = 0; k < count_; ++k) {
    names.push_back(checkpoint::part_file_name("model.ckpt", step, k, count_, id));
  }
  mine.attributes["task"] = task_;
  Store* reports = extended_.part_store();
  const std::string& name = names[static_cast<size_t>(me)];
  writer_.wait();  // the part before: one in flight
  auto handed = std::make_shared<const std::chrono::steady_clock::time_point>(
      std::chrono::steady_clock::now());
  writer_.write(model_dir_, name, std::move(mine),
                [reports, name, handed, task = task_](const checkpoint::WrittenPart& written,
                                                      std::exception_ptr error) {
                  std::string outcome = outcome_text(written, error);
                  if (error) {
                    LOG(ERROR) << task << ": checkpoint part " << name << ": " << outcome;
                  } else {
                    LOG(INFO) << task << ": wrote checkpoint part " << name << " (" << written.bytes
                              << " bytes) in " << seconds_since(*handed) << " s";
                  }
                  try {
                    reports->set(part_key(name), outcome);
                  } catch (const std::exception& e) {
                    LOG(ERROR) << "cannot report " << name << " to the chief: " << e.what();
                  }
                });
  // What this worker's training waits for: the id, the part before and the handover.
  LOG(INFO) << task_ << ": checkpoint part " << name << ": training waited "
            << 1e3 * seconds_since(started) << " ms";
  if (me != 0) return;
  started_.clear();
  started_step_ = step;
  for (int k = 0; k < count_; ++k) {
    checkpoint::CheckpointPart part;
    part.file_name = names[static_cast<size_t>(k)];
    part.slices = std::move(shares[static_cast<size_t>(k)]);
    part.wait = [reports, file = part.file_name] {
      return parse_outcome(reports->get(part_key(file), kPartTimeoutSeconds), file);
    };
    started_.push_back(std::move(part));
  }
}

bool WorkerParts::take(int64_t step, std::vector<checkpoint::CheckpointPart>* parts) {
  if (started_step_ != step || started_.empty()) return false;
  for (checkpoint::CheckpointPart& part : started_) parts->push_back(std::move(part));
  started_.clear();
  started_step_ = -1;
  return true;
}

}  // namespace cadre::estimator_internal
