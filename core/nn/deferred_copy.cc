#include "core/nn/deferred_copy.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include "cadre/base/errors.h"
#include "core/kernels/transfer.h"

namespace cadre::nn {
namespace {

// The copies not finished yet. The count lets every write of a variable check for them
// with one load.
struct Pending {
  std::atomic<int> count{0};
  std::atomic<int64_t> waited_nanoseconds{0};
  std::atomic<int64_t> blocked_nanoseconds{0};
  Mutex mutex;
  std::vector<std::shared_ptr<DeferredCopy>> copies CADRE_GUARDED_BY(mutex);
};

Pending& pending() {
  static Pending* p = new Pending;  // never destroyed: writers may run during exit
  return *p;
}

void unpublish(const DeferredCopy* copy) {
  Pending& p = pending();
  MutexLock lock(p.mutex);
  auto it = std::find_if(p.copies.begin(), p.copies.end(),
                         [&](const std::shared_ptr<DeferredCopy>& c) { return c.get() == copy; });
  if (it == p.copies.end()) return;
  p.copies.erase(it);
  p.count.fetch_sub(1, std::memory_order_release);
}

// Counts the time since `start` in `counter`: time writers of variables spent on deferred
// copies.
void count_since(std::atomic<int64_t>& counter, std::chrono::steady_clock::time_point start) {
  counter.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count(),
      std::memory_order_relaxed);
}

void count_wait(std::chrono::steady_clock::time_point start) {
  count_since(pending().waited_nanoseconds, start);
}

// The memory a writer is about to overwrite (its contiguous host targets), and what of it a
// claim has taken so far: a piece is claimed only within one target, whole elements of it,
// and once, so that a second checkpoint's copy of the same bytes is made before the writer.
class WrittenMemory {
 public:
  explicit WrittenMemory(std::span<const Tensor> targets) {
    for (const Tensor& t : targets) {
      if (!t.defined() || !t.device().is_cpu()) continue;
      if (!t.is_contiguous()) {
        bounded_ = false;
        continue;
      }
      const char* begin = static_cast<const char*>(t.raw_data());
      targets_.push_back(
          {begin, begin + t.nbytes(), static_cast<ptrdiff_t>(dtype_size(t.dtype()))});
    }
    std::sort(targets_.begin(), targets_.end(),
              [](const Target& a, const Target& b) { return a.begin < b.begin; });
    for (const Target& t : targets_) {
      ends_.push_back(ends_.empty() ? t.end : std::max(ends_.back(), t.end));
    }
  }

  // Whether every byte the caller writes lies in a contiguous host target (else, in host
  // memory, it may write any byte).
  bool bounded() const { return bounded_; }

  // Whether [begin, end) is the caller's to copy out; if so, it is taken.
  bool claim(const char* begin, const char* end) {
    if (begin == end) return false;
    auto after = std::upper_bound(targets_.begin(), targets_.end(), begin,
                                  [](const char* b, const Target& t) { return b < t.begin; });
    if (after == targets_.begin()) return false;
    const Target& t = *std::prev(after);
    if (end > t.end || (begin - t.begin) % t.element != 0 || (end - begin) % t.element != 0) {
      return false;
    }
    auto next = claimed_.upper_bound(begin);
    if (next != claimed_.end() && next->first < end) return false;
    if (next != claimed_.begin() && std::prev(next)->second > begin) return false;
    claimed_.emplace(begin, end);
    return true;
  }

  // Whether a contiguous target covers any byte of [begin, end) (targets may nest or overlap).
  bool overlaps(const char* begin, const char* end) const {
    auto after = std::upper_bound(targets_.begin(), targets_.end(), begin,
                                  [](const char* b, const Target& t) { return b < t.begin; });
    if (after != targets_.end() && after->begin < end) return true;
    return after != targets_.begin() &&
           ends_[static_cast<size_t>(after - targets_.begin()) - 1] > begin;
  }

 private:
  struct Target {
    const char* begin;
    const char* end;
    ptrdiff_t element;
  };
  std::vector<Target> targets_;
  std::vector<const char*> ends_;  // the furthest end of targets_[0..k]
  bool bounded_ = true;
  std::map<const char*, const char*> claimed_;  // begin -> end
};

}  // namespace

DeferredCopy::DeferredCopy(std::vector<Tensor*> tensors, std::function<Tensor(size_t)> memory_for)
    : tensors_(std::move(tensors)),
      memory_for_(std::move(memory_for)),
      destinations_(new Destination[tensors_.size()]) {
  sources_.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor* t = tensors_[i];
    bool claimable = t->defined() && t->device().is_cpu() && t->is_contiguous();
    sources_.push_back(claimable ? Source{static_cast<const char*>(t->raw_data()), t->nbytes()}
                                 : Source{});
    size_t bytes = sources_.back().data != nullptr ? sources_.back().bytes : 0;
    size_t count = std::max<size_t>(1, (bytes + kPieceBytes - 1) / kPieceBytes);
    for (size_t k = 0; k < count; ++k) {
      pieces_.push_back({i, k * kPieceBytes, std::min(bytes, (k + 1) * kPieceBytes)});
    }
    destinations_[i].left = count;
  }
  taken_.reset(new std::atomic<bool>[pieces_.size()]());
}

Tensor& DeferredCopy::destination(size_t i) {
  Destination& d = destinations_[i];
  std::call_once(d.made, [&] {
    try {
      const Tensor& tensor = *tensors_[i];
      Tensor reuse = memory_for_ ? memory_for_(i) : Tensor();
      if (reuse.defined() && reuse.device().is_cpu() && reuse.is_contiguous() &&
          reuse.shape() == tensor.shape() && reuse.dtype() == tensor.dtype()) {
        d.host = std::move(reuse);
      } else if (tensor.device().is_cpu()) {
        d.host = Tensor::empty(tensor.shape(), tensor.dtype(), Device::cpu());
      } else {
        d.host = empty_pinned(tensor.shape(), tensor.dtype());
      }
    } catch (...) {
      d.error = std::current_exception();
    }
  });
  if (d.error) std::rethrow_exception(d.error);
  return d.host;
}

void DeferredCopy::copy(size_t p) {
  std::exception_ptr failed;
  try {
    const Piece& piece = pieces_[p];
    Tensor& host = destination(piece.tensor);
    const Tensor& tensor = *tensors_[piece.tensor];  // read only while the slot is unreplaced
    const Source& source = sources_[piece.tensor];
    if (source.data != nullptr) {
      std::memcpy(static_cast<char*>(host.raw_data()) + piece.begin, source.data + piece.begin,
                  piece.end - piece.begin);
    } else if (!tensor.device().is_cpu()) {
      to_host_async(tensor.contiguous(), host).wait();
    } else if (tensor.is_contiguous()) {
      std::memcpy(host.raw_data(), tensor.raw_data(), tensor.nbytes());
    } else {
      host.assign(tensor);
    }
  } catch (...) {
    failed = std::current_exception();
  }
  finished(p, failed);
}

void DeferredCopy::finished(size_t p, std::exception_ptr failed) {
  bool last;
  {
    MutexLock lock(mutex_);
    Destination& d = destinations_[pieces_[p].tensor];
    if (failed) {
      d.failed = true;
      if (!error_) error_ = failed;
    }
    if (pool_ != nullptr) {
      piece_done_[p] = 1;
    } else if (--d.left == 0 && !d.failed) {
      // A failed tensor keeps its slot as it was: a checkpoint never holds a copy of unknown
      // age.
      *tensors_[pieces_[p].tensor] = std::move(d.host);
    }
    last = ++done_ == pieces_.size();
    // Not only the last: a claimant waits for all but its own claims.
    finished_.notify_all();
  }
  if (last) unpublish(this);
}

void DeferredCopy::run_except(size_t claimed) {
  for (size_t p = 0; p < pieces_.size(); ++p) {
    if (take(p)) copy(p);
  }
  bool all;
  {
    MutexLock lock(mutex_);
    finished_.wait(mutex_,
                   [&]() CADRE_REQUIRES(mutex_) { return done_ + claimed >= pieces_.size(); });
    all = done_ == pieces_.size();
  }
  // The last finished() unpublishes too, after it lets go of the mutex: unpublished here,
  // the copy is no longer pending when this returns (and a copy of nothing has no last).
  if (all) unpublish(this);
}

std::exception_ptr DeferredCopy::error() const {
  MutexLock lock(mutex_);
  return error_;
}

ClaimedCopies::ClaimedCopies(ClaimedCopies&& other) noexcept
    : claims_(std::move(other.claims_)), copies_(std::move(other.copies_)), start_(other.start_) {
  other.claims_.clear();
  other.copies_.clear();
}

ClaimedCopies::~ClaimedCopies() { release(/*made=*/false); }

void ClaimedCopies::done() { release(/*made=*/true); }

void ClaimedCopies::add(std::shared_ptr<DeferredCopy> copy, size_t piece, const CopyOut& out) {
  // The next piece of the same tensor: one CopyOut, which never spans two tensors (a kernel
  // finds each within the tensor it writes).
  const DeferredCopy::Piece& mine = copy->pieces_[piece];
  if (!claims_.empty() && claims_.back().copy == copy && claims_.back().piece + 1 == piece &&
      copy->pieces_[piece - 1].tensor == mine.tensor &&
      static_cast<char*>(copies_.back().to) + copies_.back().bytes == out.to) {
    copies_.back().bytes += out.bytes;
  } else {
    copies_.push_back(out);
  }
  claims_.push_back({std::move(copy), piece});
}

void ClaimedCopies::release(bool made) {
  if (claims_.empty()) return;
  std::exception_ptr failed;
  if (!made) {
    failed = std::make_exception_ptr(
        InternalError("the update that took over part of a checkpoint's copy did not make it"));
  }
  for (Claim& claim : claims_) claim.copy->finished(claim.piece, failed);
  claims_.clear();
  copies_.clear();
  count_wait(start_);
}

void ClaimedCopies::make_now() {
  for (const CopyOut& out : copies_) out.make();
  for (Claim& claim : claims_) claim.copy->finished(claim.piece, nullptr);
  claims_.clear();
  copies_.clear();
}

void defer_copy(std::shared_ptr<DeferredCopy> copy) {
  Pending& p = pending();
  MutexLock lock(p.mutex);
  p.copies.push_back(std::move(copy));
  p.count.fetch_add(1, std::memory_order_release);
}

bool deferred_copies_pending() { return pending().count.load(std::memory_order_acquire) != 0; }

// A writer that claims nothing: every copy is made before it writes.
void finish_deferred_copies() { claim_deferred_copies({}); }

ClaimedCopies claim_deferred_copies(std::span<const Tensor> targets) {
  ClaimedCopies claimed;
  if (!deferred_copies_pending()) return claimed;
  Pending& p = pending();
  auto start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<DeferredCopy>> copies;
  {
    MutexLock lock(p.mutex);
    copies = p.copies;
  }
  WrittenMemory written(targets);
  std::vector<std::pair<DeferredCopy*, size_t>> waits;  // write-through pieces to wait for
  for (const std::shared_ptr<DeferredCopy>& copy : copies) {
    // A writer that names nothing it writes, or a view it writes, may write anything.
    if (copy->pool_ != nullptr && (targets.empty() || !written.bounded())) {
      claimed.make_now();  // another copy's writer may be waiting for them
      copy->run_through();
      continue;
    }
    for (size_t i = 0; copy->pool_ != nullptr && i < copy->pieces_.size(); ++i) {
      const DeferredCopy::Piece& piece = copy->pieces_[i];
      const char* from = copy->sources_[piece.tensor].data + piece.begin;
      const size_t bytes = piece.end - piece.begin;
      if (!written.overlaps(from, from + bytes)) continue;
      char* buffer = nullptr;
      if (copy->taken_[i].load(std::memory_order_acquire)) {
        if (copy->piece_done(i)) continue;
      } else if (bytes <= DeferredCopy::kPieceBytes && written.claim(from, from + bytes)) {
        buffer = copy->pool_->try_get();
      }
      if (buffer != nullptr && copy->take(i)) {
        copy->buffers_[i] = buffer;
        claimed.add(copy, i, {from, buffer, bytes});
        continue;
      }
      if (buffer != nullptr) copy->pool_->put(buffer);
      waits.emplace_back(copy.get(), i);
    }
    if (copy->pool_ != nullptr) continue;
    size_t mine = 0;
    for (size_t i = 0; i < copy->pieces_.size(); ++i) {
      const DeferredCopy::Piece& piece = copy->pieces_[i];
      const char* from = copy->sources_[piece.tensor].data;
      if (from == nullptr || !written.claim(from + piece.begin, from + piece.end)) continue;
      // One thread copies each piece; one another took is waited for below.
      if (!copy->take(i)) continue;
      try {
        char* to = static_cast<char*>(copy->destination(piece.tensor).raw_data());
        claimed.add(copy, i, {from + piece.begin, to + piece.begin, piece.end - piece.begin});
        ++mine;
      } catch (...) {
        copy->finished(i, std::current_exception());
      }
    }
    copy->run_except(mine);
  }
  if (!waits.empty()) {
    claimed.make_now();
    for (auto& [copy, piece] : waits) copy->wait_done(piece);
  }
  if (claimed.claims_.empty()) count_wait(start);
  count_since(p.blocked_nanoseconds, start);
  claimed.start_ = start;
  return claimed;
}

double deferred_copy_wait_seconds() {
  return static_cast<double>(pending().waited_nanoseconds.load(std::memory_order_relaxed)) * 1e-9;
}

double deferred_copy_blocked_seconds() {
  return static_cast<double>(pending().blocked_nanoseconds.load(std::memory_order_relaxed)) * 1e-9;
}

}  // namespace cadre::nn
