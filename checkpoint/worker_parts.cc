#include "checkpoint/worker_parts.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/writer.h"
#include "checkpoint/background_saver.h"
#include "core/nn/deferred_copy.h"

namespace cadre::checkpoint {
namespace {

// A variable and its slots, which a worker writes together, the same rows of each.
struct Unit {
  std::vector<std::string> tensors;  // the variable first
  int64_t bytes = 0;
  // Rows each tensor has (all alike); 0: not splittable by rows (a scalar, or slots shaped
  // otherwise than their variable).
  int64_t rows = 0;
};

int64_t tensor_bytes(const Tensor& tensor) {
  return tensor.numel() * static_cast<int64_t>(dtype_size(tensor.dtype()));
}

std::vector<Unit> units_of(const CheckpointData& data) {
  std::map<std::string, Unit> by_variable;
  auto variable_of = [&](const std::string& name) {
    auto slot = data.slot_of.find(name);
    return slot != data.slot_of.end() && data.variables.count(slot->second) ? slot->second : name;
  };
  for (const auto& [name, tensor] : data.variables) {
    Unit& unit = by_variable[variable_of(name)];
    unit.bytes += tensor_bytes(tensor);
    if (name == variable_of(name)) {
      unit.tensors.insert(unit.tensors.begin(), name);
    } else {
      unit.tensors.push_back(name);
    }
  }
  std::vector<Unit> units;
  for (auto& [variable, unit] : by_variable) {
    const Tensor& value = data.variables.at(variable);
    unit.rows = value.shape().rank() > 0 ? value.dim(0) : 0;
    for (const std::string& name : unit.tensors) {
      const Tensor& t = data.variables.at(name);
      if (t.shape().rank() == 0 || t.dim(0) != unit.rows) unit.rows = 0;
    }
    units.push_back(std::move(unit));
  }
  return units;
}

PartSlice slice_of(const CheckpointData& data, const std::string& name, int64_t first_row,
                   int64_t rows) {
  const Tensor& value = data.variables.at(name);
  auto slot = data.slot_of.find(name);
  return {name,          slot == data.slot_of.end() ? "" : slot->second,
          value.dtype(), value.shape(),
          first_row,     value.shape().rank() == 0 ? 1 : rows};
}

// Where a part's time went, to tell a slow snapshot (the copy competes with training for the
// cores, and claiming updates wait for it) or a late writer from a slow file write
// (docs/BENCHMARKS.md, #46).
void log_part_times(const std::string& file_name, std::chrono::steady_clock::time_point handed_over,
                    std::chrono::steady_clock::time_point started, uint64_t bytes, bool through) {
  auto seconds = [](auto d) { return std::chrono::duration<double>(d).count(); };
  double writing = seconds(std::chrono::steady_clock::now() - started);
  LOG(INFO) << file_name << ": " << (through ? "writing through began " : "snapshot made ")
            << seconds(started - handed_over)
            << " s after the handover, then the file written and synced in " << writing << " s ("
            << static_cast<double>(bytes) / std::max(writing, 1e-9) / 1e6 << " MB/s)";
}

}  // namespace

std::vector<std::vector<PartSlice>> split_among_workers(const CheckpointData& data, int workers,
                                                        int64_t split_by_rows_bytes) {
  CHECK_GT(workers, 0);
  std::vector<std::vector<PartSlice>> shares(static_cast<size_t>(workers));
  std::vector<int64_t> load(static_cast<size_t>(workers), 0);
  std::vector<Unit> whole;
  for (Unit& unit : units_of(data)) {
    if (unit.bytes < split_by_rows_bytes || unit.rows < workers) {
      whole.push_back(std::move(unit));
      continue;
    }
    for (int w = 0; w < workers; ++w) {
      int64_t first = unit.rows * w / workers, end = unit.rows * (w + 1) / workers;
      for (const std::string& name : unit.tensors) {
        shares[static_cast<size_t>(w)].push_back(slice_of(data, name, first, end - first));
      }
      load[static_cast<size_t>(w)] += unit.bytes * (end - first) / unit.rows;
    }
  }
  // Largest first onto the least loaded worker: within the largest whole unit of even.
  std::stable_sort(whole.begin(), whole.end(),
                   [](const Unit& a, const Unit& b) { return a.bytes > b.bytes; });
  for (const Unit& unit : whole) {
    size_t w = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    for (const std::string& name : unit.tensors) {
      const Tensor& value = data.variables.at(name);
      shares[w].push_back(slice_of(data, name, 0, value.shape().rank() > 0 ? value.dim(0) : 1));
    }
    load[w] += unit.bytes;
  }
  return shares;
}

CheckpointData part_data(const CheckpointData& data, const std::vector<PartSlice>& share) {
  CheckpointData part;
  part.global_step = data.global_step;
  for (const PartSlice& slice : share) {
    const Tensor& value = data.variables.at(slice.name);
    std::string name = part_dataset_name(slice.name, slice.first_row);
    bool whole = value.shape().rank() == 0 || (slice.first_row == 0 && slice.rows == value.dim(0));
    part.variables[name] =
        whole ? value : value.slice(0, slice.first_row, slice.first_row + slice.rows);
    if (!slice.slot_of.empty()) {
      part.slot_of[name] = part_dataset_name(slice.slot_of, slice.first_row);
    }
  }
  return part;
}

WorkerPartWriter::WorkerPartWriter()
    : saver_(std::make_unique<BackgroundSaver>(
          [this](const CheckpointData& data) {
            WrittenPart written;
            std::exception_ptr error;
            auto started = std::chrono::steady_clock::now();
            const bool through = target_.through != nullptr;
            try {
              written =
                  write_part_file(target_.model_dir, target_.file_name, data, {}, target_.in_place);
            } catch (...) {
              error = std::current_exception();
            }
            if (through) {
              // Blocks never written (the write failed) must not hold updates back.
              target_.through->give_up_unwritten(
                  error ? error
                        : std::make_exception_ptr(InternalError("a block was never written")));
              target_.through = nullptr;
              target_.in_place.clear();
            }
            if (!error) {
              log_part_times(target_.file_name, target_.handed_over, started, written.bytes,
                             through);
            }
            target_.done(written, error);
          },
          // At the training's niceness, not a single-file save's +10: the chief's commit waits
          // for every part, and the next save for this one, and at +10 a worker's writer gets a
          // tenth of a core while both workers train on the same cores (docs/BENCHMARKS.md,
          // MultiWorkerMirrored scale: parts 1.5-1.8x faster at 0).
          /*writer_niceness=*/0)) {}

WorkerPartWriter::~WorkerPartWriter() { wait(); }

void WorkerPartWriter::write(const std::string& model_dir, const std::string& file_name,
                             CheckpointData part, Done done) {
  wait();
  target_ = {model_dir, file_name, std::move(done), std::chrono::steady_clock::now(), nullptr, {}};
  if (write_through(part)) {
    saver_->save_live(std::move(part));
  } else {
    saver_->save_deferred(std::move(part));
  }
}

bool WorkerPartWriter::write_through(CheckpointData& part) {
  if (!part.partitioned_variables.empty() || !part.iterator_state.empty()) return false;
  for (const auto& [name, value] : part.variables) {
    if (!value.device().is_cpu() || !value.is_contiguous()) return false;
  }
  std::vector<Tensor*> rows;
  std::vector<const std::string*> names;
  size_t bytes = 0;
  for (auto& [name, value] : part.variables) {
    if (value.shape().rank() == 0) {
      // A step counter: a copy now costs less than a block of its own.
      Tensor copy = Tensor::empty(value.shape(), value.dtype(), Device::cpu());
      copy.assign(value);
      value = copy;
      continue;
    }
    rows.push_back(&value);
    names.push_back(&name);
    bytes += value.nbytes();
  }
  if (bytes == 0) return true;
  if (pool_ == nullptr) pool_ = std::make_shared<nn::PiecePool>(kPoolPieces);
  auto copy =
      std::make_shared<nn::DeferredCopy>(std::move(rows), pool_, WriteOptions{}.block_bytes);
  for (size_t i = 0; i < names.size(); ++i) {
    target_.in_place[*names[i]] = [copy, i](int64_t begin, int64_t,
                                            const std::function<void(const void*)>& write) {
      copy->write_piece(copy->piece_at(i, begin), write);
    };
  }
  target_.through = copy;
  nn::defer_copy(std::move(copy));
  return true;
}

void WorkerPartWriter::prepare(const CheckpointData& part) {
  for (const auto& [name, value] : part.variables) {
    if (!value.device().is_cpu() || !value.is_contiguous()) {
      saver_->prepare_snapshot(part);
      return;
    }
  }
  if (pool_ != nullptr) return;
  pool_ = std::make_shared<nn::PiecePool>(kPoolPieces);
  auto memory = std::make_shared<CheckpointData>();
  memory->variables["pool"] = pool_->memory();
  saver_->fault_in_ahead(std::move(memory));
}

void WorkerPartWriter::wait() {
  try {
    saver_->wait();
  } catch (...) {
    // The snapshot failed (the writer reports its own failures through `done`), so the part
    // was never written: its reader hears it now.
    if (target_.done) target_.done({}, std::current_exception());
  }
}

}  // namespace cadre::checkpoint
