#include "checkpoint/background_saver.h"

#include <glog/logging.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "checkpoint/host_snapshot.h"
#include "core/nn/deferred_copy.h"
#include "core/runtime/background_thread.h"

namespace cadre::checkpoint {
namespace {

// Writing brings the lines into this core's cache and the shared one; the save's copy then
// finds them there instead of in memory.
void touch(const CheckpointData& snapshot) {
  auto touch_one = [](const Tensor& memory) {
    if (memory.device().is_cpu() && memory.is_contiguous()) {
      std::memset(memory.raw_data(), 0, memory.nbytes());
    }
  };
  for (const auto& [name, value] : snapshot.variables) touch_one(value);
  for (const auto& [name, parts] : snapshot.partitioned_variables) {
    for (const Tensor& part : parts) touch_one(part);
  }
}

// The pages of `snapshot`'s host tensors, in the order a copy of it goes (host_copy_of), in
// pieces of at most nn::DeferredCopy::kPieceBytes; only whole pages within a tensor, since
// memory around it may be another's.
std::vector<std::pair<char*, size_t>> pages_of(const CheckpointData& snapshot) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  std::vector<std::pair<char*, size_t>> pieces;
  auto add = [&](const Tensor& memory) {
    if (!memory.defined() || !memory.device().is_cpu() || !memory.is_contiguous()) return;
    uintptr_t begin = reinterpret_cast<uintptr_t>(memory.raw_data());
    uintptr_t end = (begin + memory.nbytes()) / page * page;
    for (begin = (begin + page - 1) / page * page; begin < end;
         begin += nn::DeferredCopy::kPieceBytes) {
      size_t bytes = std::min<uintptr_t>(end - begin, nn::DeferredCopy::kPieceBytes);
      pieces.emplace_back(reinterpret_cast<char*>(begin), bytes);
    }
  };
  for (const auto& [name, value] : snapshot.variables) add(value);
  for (const auto& [name, parts] : snapshot.partitioned_variables) {
    for (const Tensor& part : parts) add(part);
  }
  for (const auto& [name, value] : snapshot.iterator_state) add(value);
  return pieces;
}

// Faults in [data, data + bytes) writable without writing it (Linux 5.14 and later), so that
// a copy into it may run meanwhile. False where the kernel cannot.
bool populate(char* data, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  return madvise(data, bytes, MADV_POPULATE_WRITE) == 0;
#else
  (void)data;
  (void)bytes;
  return false;
#endif
}

}  // namespace

// The writer is a background thread (see make_background_thread), by default at nice +10.
// Under the default policy, even at nice +10, the kernel (EEVDF, 6.x) let it preempt the
// training thread on a busy core and run the whole write (2.5 ms of a 2-thread MLP's step)
// there. Now it waits for the end of a time slice and then takes the CPU in short turns,
// about a tenth of a busy core, enough to write a save long before the next one.
BackgroundSaver::BackgroundSaver(std::function<void(const CheckpointData&)> write,
                                 int writer_niceness)
    : write_(std::move(write)), writer_niceness_(writer_niceness) {}

BackgroundSaver::~BackgroundSaver() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  writer_changed_.notify_all();
  copy_requested_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (copier_.joinable()) copier_.join();
}

// One thread writes every save (a thread per save would cost its creation on the training
// thread each time).
void BackgroundSaver::start_threads(bool with_copier) {
  if (!writer_.joinable()) writer_ = std::thread([this] { write_loop(); });
  if (with_copier && !copier_.joinable()) copier_ = std::thread([this] { copy_loop(); });
}

void BackgroundSaver::write_loop() {
  make_background_thread("cadre-ckpt-wr", writer_niceness_);
  MutexLock lock(mutex_);
  while (true) {
    // A queued save whose copy is still being made waits for the copier.
    writer_changed_.wait(mutex_, [&]() CADRE_REQUIRES(mutex_) {
      return stopping_ || (queued_ != nullptr && copy_ == nullptr) || to_warm_ != nullptr ||
             to_fault_in_ != nullptr;
    });
    if (to_fault_in_ != nullptr && !stopping_) {
      std::shared_ptr<const CheckpointData> snapshot = std::move(to_fault_in_);
      to_fault_in_ = nullptr;
      faulting_in_ = true;
      lock.unlock();
      fault_in(*snapshot);
      lock.lock();
      faulting_in_ = false;
      writer_changed_.notify_all();
      continue;
    }
    if (to_warm_ != nullptr && !stopping_) {
      std::shared_ptr<const CheckpointData> snapshot = std::move(to_warm_);
      to_warm_ = nullptr;
      warming_ = true;
      lock.unlock();
      touch(*snapshot);
      lock.lock();
      warming_ = false;
      writer_changed_.notify_all();
      continue;
    }
    if (queued_ == nullptr) return;  // stopping, nothing left to write
    std::shared_ptr<const CheckpointData> data = queued_;
    std::exception_ptr failure = std::move(copy_failure_);
    copy_failure_ = nullptr;
    lock.unlock();
    try {
      if (!failure) write_(*data);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    queued_ = nullptr;
    if (failure) failure_ = failure;
    writer_changed_.notify_all();
  }
}

// A background thread too, but at the caller's niceness, unlike the writer: the caller's
// next write of a variable waits for whatever part of the copy this thread has started,
// and gives up its core while it waits. Woken on a busy core, the copier no longer
// preempts the caller (a context switch, and its cache); the caller's next write then
// takes over the copy unless an idle core ran it first. It also lets go of the snapshot
// before, so that the caller does not spend its time freeing it.
void BackgroundSaver::copy_loop() {
  make_background_thread("cadre-ckpt-cp", 0);
  MutexLock lock(mutex_);
  while (true) {
    copy_requested_.wait(mutex_, [&]() CADRE_REQUIRES(mutex_) {
      return stopping_ || (copy_ != nullptr && !copy_started_);
    });
    if (copy_ == nullptr || copy_started_) return;  // stopping
    copy_started_ = true;
    std::shared_ptr<nn::DeferredCopy> copy = copy_;
    std::shared_ptr<const CheckpointData> retired = std::move(retired_);
    retired_ = nullptr;
    lock.unlock();
    copy->run();
    retired.reset();
    lock.lock();
    copy_failure_ = copy->error();
    copy_ = nullptr;  // let go of the variables' buffers; the writer may go on
    writer_changed_.notify_all();
  }
}

void BackgroundSaver::save_copy_of(const CheckpointData& data) {
  // The previous save is done: its snapshot's memory is free to copy into, unless the
  // writer is still warming it. The writer runs at a low priority and may not even have
  // started: this thread does not wait for it (it would wait for a whole time slice of the
  // busy cores) but takes it back, or copies into new memory.
  bool reuse = true;
  {
    MutexLock lock(mutex_);
    to_warm_ = nullptr;
    reuse = !warming_;
  }
  auto copy =
      std::make_shared<const CheckpointData>(copy_to_host(data, reuse ? snapshot_.get() : nullptr));
  snapshot_ = copy;
  {
    MutexLock lock(mutex_);
    queued_ = copy;
  }
  start_threads(/*with_copier=*/false);
  writer_changed_.notify_all();
}

// Finding the last snapshot's memory to copy into (the writer is done with it) is left to
// the copying thread, as is freeing that snapshot (the copier's): this thread only collects
// the tensors.
void BackgroundSaver::save_deferred(CheckpointData data) {
  start_threads(/*with_copier=*/true);
  auto snapshot = std::make_shared<CheckpointData>(std::move(data));
  // The last snapshot stays alive until the copier has run the copy.
  std::shared_ptr<nn::DeferredCopy> copy = host_copy_of(*snapshot, snapshot_.get());
  nn::defer_copy(copy);
  {
    MutexLock lock(mutex_);
    copy_ = copy;
    copy_started_ = false;
    queued_ = snapshot;
    retired_ = std::move(snapshot_);
  }
  snapshot_ = std::move(snapshot);
  // Only the copier: a wake-up costs the caller a system call (and a hypervisor exit in a
  // virtual machine); the copier wakes the writer when the copy is done.
  copy_requested_.notify_one();
}

void BackgroundSaver::warm_next_snapshot() {
  if (snapshot_ == nullptr) return;
  {
    MutexLock lock(mutex_);
    if (queued_ != nullptr || warming_) return;
    to_warm_ = snapshot_;
  }
  writer_changed_.notify_all();
}

// Stops at the first save: faulting in beside its copy, it took the copier's CPU on a busy
// machine, and the updates waited longer for the pieces the copier was at (a 2 GiB MLP on 2
// vCPUs: 61 and 233 ms after the first save against 38 ms not prepared). Its copy goes from
// the first piece on, and an update claims the pieces it has not reached, the last ones:
// faulting in from the end spares the training thread first.
void BackgroundSaver::fault_in(const CheckpointData& snapshot) {
  std::vector<std::pair<char*, size_t>> pieces = pages_of(snapshot);
  for (auto piece = pieces.rbegin(); piece != pieces.rend(); ++piece) {
    {
      MutexLock lock(mutex_);
      if (stopping_ || queued_ != nullptr) return;
    }
    if (!populate(piece->first, piece->second)) {
      LOG(WARNING) << "cannot fault in a checkpoint's snapshot memory ahead (madvise: "
                   << std::strerror(errno) << "): its first copy faults it in";
      return;
    }
  }
}

void BackgroundSaver::prepare_snapshot(const CheckpointData& like) {
  if (snapshot_ != nullptr) return;
  // Only allocated here: the pages are the writer's to fault in.
  auto memory = std::make_shared<CheckpointData>();
  auto empty_like = [](const Tensor& t) {
    return Tensor::empty(t.shape(), t.dtype(), Device::cpu());
  };
  try {
    for (const auto& [name, value] : like.variables) memory->variables[name] = empty_like(value);
    for (const auto& [name, parts] : like.partitioned_variables) {
      for (const Tensor& part : parts) {
        memory->partitioned_variables[name].push_back(empty_like(part));
      }
    }
    for (const auto& [name, value] : like.iterator_state) {
      memory->iterator_state[name] = empty_like(value);
    }
  } catch (const std::exception& e) {
    // The save allocates what it needs itself: only it may fail for its memory.
    LOG(WARNING) << "no memory prepared for the first checkpoint's snapshot: " << e.what();
    return;
  }
  snapshot_ = memory;
  fault_in_ahead(std::move(memory));
}

void BackgroundSaver::fault_in_ahead(std::shared_ptr<const CheckpointData> memory) {
  {
    MutexLock lock(mutex_);
    to_fault_in_ = std::move(memory);
  }
  start_threads(/*with_copier=*/false);
  writer_changed_.notify_all();
}

void BackgroundSaver::save_live(CheckpointData data) {
  auto live = std::make_shared<const CheckpointData>(std::move(data));
  {
    MutexLock lock(mutex_);
    queued_ = std::move(live);
  }
  start_threads(/*with_copier=*/false);
  writer_changed_.notify_all();
}

void BackgroundSaver::wait_prepared() {
  MutexLock lock(mutex_);
  writer_changed_.wait(
      mutex_, [&]() CADRE_REQUIRES(mutex_) { return to_fault_in_ == nullptr && !faulting_in_; });
}

void BackgroundSaver::wait() {
  MutexLock lock(mutex_);
  writer_changed_.wait(mutex_, [&]() CADRE_REQUIRES(mutex_) { return queued_ == nullptr; });
  if (failure_) {
    std::exception_ptr failure = failure_;
    failure_ = nullptr;
    std::rethrow_exception(failure);
  }
}

}  // namespace cadre::checkpoint
