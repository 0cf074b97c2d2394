#include "cadre/strategies/distributed_dataset.h"

#include <algorithm>
#include <optional>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/runtime/profiler.h"
#include "cadre/runtime/threading.h"
#include "core/base/strings.h"
#include "core/kernels/transfer.h"
#include "core/runtime/compute_elsewhere.h"

namespace cadre {

struct DistributedIterator::State {
  io::Iterator iterator;
  std::vector<Device> devices;
  bool split;
  BatchSplit batch_split;
  std::vector<Transfer> transfers;  // copies to GPUs of the last step's inputs
  // The first step's inputs with no rows (no_rows()), kept from when it was delivered.
  std::optional<PerReplica<io::Element>> no_rows;
};

namespace {

// `value` on `device`. A GPU gets it through pinned host memory on its copy stream, which
// its kernels wait for on the device (the host does not); `transfers` keeps the copies
// alive until the iterator's next step.
Tensor stage(const Tensor& value, Device device, std::vector<Transfer>& transfers) {
  if (!device.is_gpu() || !value.device().is_cpu()) return to_device(value, device);
  Tensor pinned = empty_pinned(value.shape(), value.dtype());
  pinned.assign(value);
  AsyncCopy copy = to_device_async(pinned, device);
  transfers.push_back(copy.transfer);
  return copy.tensor;
}

// Rows [begin, end) of every feature and of the labels, on `device`.
io::Element rows_of(const io::Element& element, int64_t begin, int64_t end, Device device,
                    std::vector<Transfer>& transfers) {
  io::Element part;
  for (const auto& [name, value] : element.features) {
    part.features.set(name, stage(value.slice(0, begin, end), device, transfers));
  }
  if (element.labels.defined()) {
    part.labels = stage(element.labels.slice(0, begin, end), device, transfers);
  }
  return part;
}

io::Element on_device(io::Element element, Device device, std::vector<Transfer>& transfers) {
  io::Element moved;
  for (const auto& [name, value] : element.features) {
    moved.features.set(name, stage(value, device, transfers));
  }
  if (element.labels.defined()) moved.labels = stage(element.labels, device, transfers);
  return moved;
}

// `element`'s tensors with no rows: the same names, types, devices and other dimensions.
io::Element without_rows(const io::Element& element) {
  auto empty = [](const Tensor& t) {
    if (t.rank() == 0) return t;
    std::vector<int64_t> dims = t.shape().to_vector();
    dims[0] = 0;
    return Tensor::empty(Shape(dims), t.dtype(), t.device());
  };
  io::Element none;
  for (const auto& [name, value] : element.features) none.features.set(name, empty(value));
  if (element.labels.defined()) none.labels = empty(element.labels);
  return none;
}

int64_t rows_in(const io::Element& element) {
  if (element.labels.defined() && element.labels.rank() > 0) return element.labels.dim(0);
  for (const auto& [name, value] : element.features) {
    if (value.rank() > 0) return value.dim(0);
  }
  throw InvalidArgumentError(
      "distribute_dataset: elements must be batches (a first dimension "
      "to split over the replicas); add .batch(global_batch_size)");
}

}  // namespace

DistributedIterator::DistributedIterator(io::Iterator iterator, std::vector<Device> devices,
                                         bool split_batches, BatchSplit split)
    : state_(std::make_unique<State>(
          State{std::move(iterator), std::move(devices), split_batches, split, {}})) {}

DistributedIterator::DistributedIterator(DistributedIterator&&) noexcept = default;
DistributedIterator& DistributedIterator::operator=(DistributedIterator&&) noexcept = default;
DistributedIterator::~DistributedIterator() = default;

io::IteratorState DistributedIterator::save() { return state_->iterator.save(); }
void DistributedIterator::prepare_save() { state_->iterator.prepare_save(); }

void DistributedIterator::restore(const io::IteratorState& state) {
  state_->iterator.restore(state);
}

std::optional<PerReplica<io::Element>> DistributedIterator::no_rows() const {
  return state_->no_rows;
}

std::optional<PerReplica<io::Element>> DistributedIterator::next() {
  std::optional<PerReplica<io::Element>> out = take_next();
  if (out && !state_->no_rows) {
    PerReplica<io::Element> none;
    for (const io::Element& element : *out) none.push_back(without_rows(element));
    state_->no_rows = std::move(none);
  }
  return out;
}

std::optional<PerReplica<io::Element>> DistributedIterator::take_next() {
  profiler::Scope scope("input", profiler::kPhase);
  State& s = *state_;
  s.transfers.clear();  // the previous step's copies: done, or waited for here
  NoGradScope no_grad;
  const int replicas = static_cast<int>(s.devices.size());
  PerReplica<io::Element> out;
  if (!s.split) {
    for (int r = 0; r < replicas; ++r) {
      std::optional<io::Element> element = s.iterator.next();
      if (!element) break;
      out.push_back(on_device(std::move(*element), s.devices[r], s.transfers));
    }
    if (out.empty()) return std::nullopt;
    return out;
  }
  std::optional<io::Element> batch = s.iterator.next();
  if (!batch) return std::nullopt;
  int64_t rows = rows_in(*batch);
  const int total = s.batch_split.total;
  if (rows < total) {
    throw InvalidArgumentError(str_cat(
        "distribute_dataset: a batch of ", rows, " examples cannot feed ", total,
        " replicas; use a global batch of at least ", total, " (or drop_remainder in batch)"));
  }
  int64_t base = rows / total, extra = rows % total;
  auto start_of = [&](int64_t g) { return g * base + std::min<int64_t>(g, extra); };
  for (int r = 0; r < replicas; ++r) {
    int64_t g = s.batch_split.first + r;
    out.push_back(rows_of(*batch, start_of(g), start_of(g + 1), s.devices[r], s.transfers));
  }
  return out;
}

DistributedIterator DistributedDataset::make_iterator() const {
  // Replicas on GPUs leave the host's compute threads idle: an autotuned prefetch then
  // reads ahead on a thread of its own (its choice is made as the pipeline is built).
  std::optional<ComputeElsewhereScope> elsewhere;
  if (!devices_.empty() &&
      std::all_of(devices_.begin(), devices_.end(), [](const Device& d) { return d.is_gpu(); })) {
    elsewhere.emplace();
  }
  return DistributedIterator(dataset_.make_iterator(), devices_, split_, batch_split_);
}

}  // namespace cadre
