#include "cadre/tensor/shape.h"

#include <sstream>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {
namespace {

void check_rank(size_t rank) {
  if (rank > static_cast<size_t>(Shape::kMaxRank)) {
    throw InvalidArgumentError(
        str_cat("shape of rank ", rank, " exceeds the maximum rank ", Shape::kMaxRank));
  }
}

void check_dim(int64_t size) {
  if (size < 0) throw InvalidArgumentError(str_cat("negative dimension ", size, " in a shape"));
}

}  // namespace

Shape::Shape(std::initializer_list<int64_t> dims)
    : Shape(std::span<const int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  check_rank(dims.size());
  for (int64_t size : dims) {
    check_dim(size);
    dims_[rank_++] = size;
  }
}

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    if (__builtin_mul_overflow(n, dims_[i], &n)) {
      throw InvalidArgumentError(
          str_cat("a tensor of shape ", to_string(), " has more elements than an int64 counts"));
    }
  }
  return n;
}

int Shape::normalize_axis(int axis) const {
  int normalized = axis < 0 ? axis + rank_ : axis;
  if (normalized < 0 || normalized >= rank_) {
    throw InvalidArgumentError(
        str_cat("axis ", axis, " is out of range for a tensor of shape ", to_string()));
  }
  return normalized;
}

void Shape::push_back(int64_t size) {
  check_rank(rank_ + 1);
  check_dim(size);
  dims_[rank_++] = size;
}

Shape Shape::with_dim(int axis, int64_t size) const {
  Shape result = *this;
  result.set_dim(axis, size);
  return result;
}

Shape Shape::without_dim(int axis) const {
  int a = normalize_axis(axis);
  Shape result;
  for (int i = 0; i < rank_; ++i) {
    if (i != a) result.dims_[result.rank_++] = dims_[i];
  }
  return result;
}

std::array<int64_t, Shape::kMaxRank> Shape::contiguous_strides() const {
  std::array<int64_t, kMaxRank> strides{};
  int64_t stride = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    strides[i] = stride;
    if (i > 0 && __builtin_mul_overflow(stride, dims_[i], &stride)) num_elements();  // throws
  }
  return strides;
}

std::string Shape::to_string() const { return "[" + join(dims()) + "]"; }

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] != other.dims_[i]) return false;
  }
  return true;
}

std::ostream& operator<<(std::ostream& out, const Shape& shape) { return out << shape.to_string(); }

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  if (a == b) return a;
  int rank = std::max(a.rank(), b.rank());
  std::array<int64_t, Shape::kMaxRank> dims{};
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i;
    int ib = b.rank() - rank + i;
    int64_t da = ia >= 0 ? a[ia] : 1;
    int64_t db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      throw InvalidArgumentError(str_cat(op, ": shapes ", a, " and ", b,
                                         " cannot be broadcast together (dimension ", i,
                                         " of the result: ", da, " against ", db, ")"));
    }
    dims[i] = da == 1 ? db : da;
  }
  return Shape(std::span<const int64_t>(dims.data(), rank));
}

}  // namespace cadre
