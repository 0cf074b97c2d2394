// Copies of variables taken after the fact: a checkpoint hands the copy of the variables
// to a background thread and training goes on at once. Until the copy is done, a thread
// about to write a variable (an optimizer's update, Variable::assign) calls
// finish_deferred_copies() and takes over whatever is not copied yet, so the copy always
// holds the values of the moment it was deferred. An update that reads what it writes
// claims those copies instead (claim_deferred_copies) and makes them in its own pass.
//
// Internal: checkpoints and optimizers use it. Users see only finish_deferred_copies()
// (cadre/nn/variable.h), for code that writes a variable's buffer itself.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "cadre/base/mutex.h"
#include "cadre/nn/variable.h"
#include "cadre/tensor/tensor.h"
#include "core/kernels/copy_out.h"

namespace cadre::nn {

class ClaimedCopies;

// Buffers of DeferredCopy::kPieceBytes that a write-through copy (below) lends, one per
// piece that a writer of variables must overwrite before the checkpoint's writer got to it,
// and takes back once that piece is written: the memory a save holds beyond the variables
// stays this pool's size whatever the model's. Thread-safe.
class PiecePool {
 public:
  // `pieces` buffers, allocated (not yet faulted in: memory()) here.
  explicit PiecePool(size_t pieces);
  PiecePool(const PiecePool&) = delete;
  PiecePool& operator=(const PiecePool&) = delete;

  // The buffers' memory, one host tensor, to fault in ahead off the training thread.
  const Tensor& memory() const { return memory_; }
  // A free buffer, or null when every one is lent.
  char* try_get();
  void put(char* buffer);

 private:
  Tensor memory_;
  Mutex mutex_;
  std::vector<char*> free_ CADRE_GUARDED_BY(mutex_);
};

// Replaces tensors by host copies of their values. The tensors are slots in a structure
// nobody else touches until the copy is done: they name the sources when the copy is
// deferred, and each becomes its contiguous host copy. A contiguous host tensor is copied in
// pieces (kPieceBytes), each made by whichever thread takes it first, so that a writer that
// claims what is left of a large tensor waits at most for the piece another thread is at.
class DeferredCopy {
 public:
  static constexpr size_t kPieceBytes = size_t{4} << 20;

  // `memory_for(i)`: host memory to copy tensor i into when it has the tensor's shape and
  // dtype (an earlier copy nobody uses any more: no allocation, no page faults), else an
  // undefined tensor; called once, by whichever thread first copies a piece of tensor i.
  // Without it, or when it does not fit, the copy goes to new memory.
  explicit DeferredCopy(std::vector<Tensor*> tensors,
                        std::function<Tensor(size_t)> memory_for = nullptr);
  // A write-through copy, which keeps no copy of its own: a writer (a checkpoint part's)
  // hands each piece to the file straight from the tensor's memory (write_piece), and a
  // thread about to overwrite a piece the writer has not taken yet copies it into a buffer
  // of `pool` (an update in its own pass, as a claimed copy), or, with none free, waits for
  // the writer to take it. The tensors, which stay as they are, are contiguous host tensors
  // of rank 1 or more; each is in pieces of whole rows, `block_bytes` of rows at most (one
  // row at least), as a checkpoint writer's blocks.
  DeferredCopy(std::vector<Tensor*> tensors, std::shared_ptr<PiecePool> pool, size_t block_bytes);
  DeferredCopy(const DeferredCopy&) = delete;
  DeferredCopy& operator=(const DeferredCopy&) = delete;

  // Write-through: the piece of tensor `tensor` that starts at row `row` (a block's first).
  // Throws InternalError where no piece starts there.
  size_t piece_at(size_t tensor, int64_t row) const;
  // Write-through: hands piece `p`'s bytes as of the deferral to `write`, on this thread:
  // from the tensor when no other thread took the piece (which then waits for this call),
  // else from the buffer that thread copied it into, once copied. Throws what `write` throws
  // and, for a piece whose copy failed, that failure. Once per piece.
  void write_piece(size_t p, const std::function<void(const void*)>& write);
  // Write-through, once the writer is done (or failed): the pieces it never took fail with
  // `why`, and their copies' buffers go back to the pool. Waits for copies in progress.
  void give_up_unwritten(std::exception_ptr why);

  // Copies the pieces no other thread has started, then waits for those others are at.
  // Any thread may call it, any number of times; the first error of a copy is kept for
  // error(), never thrown here (a writer of variables must not fail for a checkpoint).
  // Write-through: copies what the pool's free buffers take, then waits for the writer.
  void run() { pool_ != nullptr ? run_through() : run_except(0); }
  std::exception_ptr error() const;

 private:
  friend class ClaimedCopies;
  friend ClaimedCopies claim_deferred_copies(std::span<const Tensor> targets);

  // The memory of a contiguous host tensor when deferred (null for others), which is how a
  // claim finds the pieces it overwrites.
  struct Source {
    const char* data = nullptr;
    size_t bytes = 0;
  };
  // Bytes [begin, end) of tensor `tensor`; a tensor without a Source is one piece, whole.
  struct Piece {
    size_t tensor;
    size_t begin, end;
  };
  // Tensor i's host copy, made once (memory_for's, or new memory), and how many of its
  // pieces are still to finish; the slot becomes the copy when the last one does.
  struct Destination {
    std::once_flag made;
    Tensor host;
    std::exception_ptr error;  // making `host` failed
    size_t left = 0;
    bool failed = false;
  };

  // run(), but waits only until all pieces but the `claimed` ones the caller took are done.
  void run_except(size_t claimed);
  // Write-through: takes each piece it can get a buffer for and copies it there, then
  // waits until every piece is done (the writer takes the others).
  void run_through();
  // Write-through: whether piece p may be overwritten (copied, or written by the writer),
  // and waiting until it may.
  bool piece_done(size_t p) const;
  void wait_done(size_t p);
  // Whether this thread is the one to copy piece p (no other has taken it).
  bool take(size_t p) { return !taken_[p].exchange(true, std::memory_order_acq_rel); }
  // Tensor i's host copy; throws what making it threw.
  Tensor& destination(size_t i);
  void copy(size_t p);
  // Piece p is copied, or failed; the last piece of a tensor replaces its slot by the copy
  // (unless a piece failed), the last of all unpublishes the copy.
  void finished(size_t p, std::exception_ptr failed);

  std::vector<Tensor*> tensors_;
  std::function<Tensor(size_t)> memory_for_;
  std::vector<Source> sources_;
  std::vector<Piece> pieces_;
  std::unique_ptr<std::atomic<bool>[]> taken_;
  std::unique_ptr<Destination[]> destinations_;
  // Write-through only: the pool, each piece's buffer (null: none; set by the thread that
  // took the piece, before it is done) and whether it is done.
  std::shared_ptr<PiecePool> pool_;
  std::unique_ptr<char*[]> buffers_;
  mutable Mutex mutex_;
  CondVar finished_;
  size_t done_ CADRE_GUARDED_BY(mutex_) = 0;
  std::vector<char> piece_done_ CADRE_GUARDED_BY(mutex_);
  std::exception_ptr error_ CADRE_GUARDED_BY(mutex_);
};

// A copy that a writer makes of what it is about to overwrite (core/kernels/copy_out.h).
using kernels::CopyOut;

// The copies a writer has taken over from deferred copies (claim_deferred_copies).
class ClaimedCopies {
 public:
  ClaimedCopies() = default;
  ClaimedCopies(ClaimedCopies&& other) noexcept;
  ClaimedCopies& operator=(ClaimedCopies&&) = delete;
  // Copies never reported done fail their deferred copy (its error()), so that a checkpoint
  // never holds values of unknown age.
  ~ClaimedCopies();

  std::span<const CopyOut> copies() const { return copies_; }
  // Every CopyOut is made: the deferred copies are complete for these tensors.
  void done();

 private:
  friend ClaimedCopies claim_deferred_copies(std::span<const Tensor> targets);
  struct Claim {
    std::shared_ptr<DeferredCopy> copy;
    size_t piece;
  };
  // Records the claim of `piece` of `copy`, whose copy is `out`.
  void add(std::shared_ptr<DeferredCopy> copy, size_t piece, const CopyOut& out);
  // Makes every CopyOut now and reports them done: before the caller waits for a piece,
  // so that no writer waits for it in turn.
  void make_now();
  // Reports every claim made (done()) or failed, and lets go of them.
  void release(bool made);

  std::vector<Claim> claims_;
  std::vector<CopyOut> copies_;
  std::chrono::steady_clock::time_point start_;
};

// Makes writes of variables finish `copy` first, until it is done.
void defer_copy(std::shared_ptr<DeferredCopy> copy);

// Whether a deferred copy is still in progress: one atomic load.
bool deferred_copies_pending();

// finish_deferred_copies(), which runs every deferred copy still in progress, is public
// (cadre/nn/variable.h): code that writes a variable's buffer in place calls it first.

// finish_deferred_copies() for a writer that copies out what it overwrites: the pieces of
// copies that lie within those `targets` (contiguous host tensors it is about to write
// whole), whole tensors or row ranges of them, and that no thread has started are left to
// the caller, as CopyOuts (adjacent pieces as one); every other deferred copy is finished
// first. A write-through copy is not finished: of its pieces, only those within the targets
// matter, each left to the caller while the pool lends a buffer for it, else waited for (the
// caller's CopyOuts then made at once, so that the writer never waits for them in turn). The
// caller makes each CopyOut before it writes the bytes it reads, then calls done(). One
// atomic load when no copy is pending.
ClaimedCopies claim_deferred_copies(std::span<const Tensor> targets);

// The time threads of this process have spent in finish_deferred_copies() with a copy
// still in progress, and in claim_deferred_copies() up to done() with a claim (the whole of
// the claiming update: an upper bound on what its copies cost it): what deferring left for
// training to wait for.
double deferred_copy_wait_seconds();

// The part of it that writers spent before they could write: in finish_deferred_copies(), and
// in claim_deferred_copies() until it returns (waiting for pieces other threads had started,
// copying those no one claims). An update that makes claimed copies in its own pass is not
// blocked by them; their cost is inside its pass.
double deferred_copy_blocked_seconds();

}  // namespace cadre::nn
