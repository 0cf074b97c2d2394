// A copy-on-write snapshot of one tensor that a ps task holds (a variable's rows, or one of
// its optimizer slots), as a checkpoint part streams it: marking it costs nothing, the part's
// writer reads it a block of rows at a time, and a writer of the tensor first keeps aside the
// old values of the rows it is about to overwrite that the part has not read yet. So the part
// is the tensor's value at the mark, while the task holds only its own share, the rows kept
// aside, and the part writer's block.
//
// Not synchronised: every call, and every write of the tensor, must hold the same lock (a ps
// task's Entry::mutex, which serialises updates and reads of a variable and its slots).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "cadre/tensor/tensor.h"

namespace cadre::ps {

class SavedTensor {
 public:
  // `live`: the tensor's own memory (a contiguous host tensor of rank 1 or more), which
  // writers overwrite in place after calling keep_rows() or keep_all().
  explicit SavedTensor(Tensor live);
  SavedTensor(const SavedTensor&) = delete;
  SavedTensor& operator=(const SavedTensor&) = delete;

  // Before rows `ids` (int64 [n], within the tensor; repeats allowed) are overwritten.
  void keep_rows(const Tensor& ids);
  // Before any row may be overwritten (a dense update, an assignment).
  void keep_all();

  // Copies rows [begin, end) as of the mark to `destination` (end - begin rows, contiguous)
  // and lets go of what was kept of them. Reads go in order: `begin` is where the last read
  // ended (0 first), so rows before it no longer need keeping. InternalError otherwise.
  void read(int64_t begin, int64_t end, void* destination);

  int64_t rows() const { return rows_; }
  // The bytes kept aside now, and at most so far.
  size_t kept_bytes() const;
  size_t peak_kept_bytes() const { return peak_kept_bytes_; }

 private:
  char* live_row(int64_t row) const;

  Tensor live_;
  int64_t rows_ = 0;
  size_t row_bytes_ = 0;
  int64_t read_ = 0;  // rows [0, read_) are read: writes there need not keep anything
  // Old values of single rows at or after read_ (sparse updates touch few rows).
  std::map<int64_t, std::unique_ptr<char[]>> kept_rows_;
  // After keep_all(): the old values of rows [tail_from_, rows_), one block.
  int64_t tail_from_ = -1;
  std::vector<char> tail_;
  size_t peak_kept_bytes_ = 0;
};

}  // namespace cadre::ps
