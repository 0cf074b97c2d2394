// Tensor shapes: up to kMaxRank dimensions stored inline, so that building a shape never
// allocates.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace cadre {

class Shape {
 public:
  static constexpr int kMaxRank = 8;

  Shape() = default;  // a scalar: rank 0, one element
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims) : Shape(std::span<const int64_t>(dims)) {}

  int rank() const { return rank_; }
  int64_t num_elements() const;
  // Dimension `axis`; negative counts from the end. Throws InvalidArgumentError when out of range.
  int64_t dim(int axis) const { return dims_[normalize_axis(axis)]; }
  int64_t operator[](int axis) const { return dims_[axis]; }
  void set_dim(int axis, int64_t size) { dims_[normalize_axis(axis)] = size; }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<size_t>(rank_)}; }
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }

  // Maps a possibly negative axis into [0, rank); throws InvalidArgumentError otherwise.
  int normalize_axis(int axis) const;
  void push_back(int64_t size);
  Shape with_dim(int axis, int64_t size) const;
  Shape without_dim(int axis) const;

  // Row-major strides of a contiguous tensor of this shape, in elements.
  std::array<int64_t, kMaxRank> contiguous_strides() const;

  std::string to_string() const;  // "[2, 3]"
  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

std::ostream& operator<<(std::ostream& out, const Shape& shape);

// NumPy broadcasting of two shapes. Throws InvalidArgumentError naming `op` and both shapes
// when they are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace cadre
