// Tensor: a typed, shaped, strided view of a reference-counted device buffer.
//
// Copying a Tensor copies the handle, not the data: both handles see the same elements.
// Views (reshape of a contiguous tensor, transpose, slice, broadcast_to) share the buffer;
// everything else allocates. Operations on tensors are free functions (cadre/ops/...); the
// methods here that build new tensors are differentiable and record on an active
// GradientTape like the free functions do.
//
// The class spans three of core's layers, each defining what it can: the tensor layer the
// handle, creation and metadata; the kernels layer the methods that fill, write or read
// values; the ops layer the differentiable transformations (core/tensor/tensor.cc names the
// files). Cadre's libraries link all three (cadre_core); no lower layer calls an upper one's.
//
// A Tensor is not synchronised: one thread may write it while others only read other
// tensors, or many threads may read it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cadre/tensor/buffer.h"
#include "cadre/tensor/device.h"
#include "cadre/tensor/dtype.h"
#include "cadre/tensor/shape.h"

namespace cadre {

using Strides = std::array<int64_t, Shape::kMaxRank>;

class Tensor {
 public:
  // An undefined tensor: no buffer; defined() is false. Used for "no gradient" and
  // "not given".
  Tensor() = default;

  // --- creation (on `device`, default_device() when not named) ---
  static Tensor empty(const Shape& shape, DType dtype = DType::kFloat32);
  static Tensor empty(const Shape& shape, DType dtype, Device device);
  // Contents written by `fill` when first read (see Buffer); with a null fill, empty().
  static Tensor empty_deferred(const Shape& shape, DType dtype, Device device,
                               std::shared_ptr<const BufferFill> fill);
  static Tensor zeros(const Shape& shape, DType dtype = DType::kFloat32);
  static Tensor zeros(const Shape& shape, DType dtype, Device device);
  static Tensor ones(const Shape& shape, DType dtype = DType::kFloat32);
  static Tensor ones(const Shape& shape, DType dtype, Device device);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::kFloat32);
  static Tensor full(const Shape& shape, double value, DType dtype, Device device);
  // Copies `values` (whose size must equal shape.num_elements()) into a new tensor.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, Shape{static_cast<int64_t>(values.size())});
  }
  template <typename T>
  static Tensor scalar(T value) {
    return from_vector(std::vector<T>{value}, Shape{});
  }
  // Copies host memory holding shape.num_elements() elements of `dtype` into a new tensor
  // on default_device().
  static Tensor from_bytes(const void* data, const Shape& shape, DType dtype);
  // A view of memory owned elsewhere (e.g. a memory-mapped file); `release` runs when the
  // last tensor viewing it dies.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device,
                          std::function<void()> release);
  // A view of `buffer` with explicit strides and offset (in elements). The caller
  // guarantees that every element addressed lies inside the buffer.
  static Tensor view_of(std::shared_ptr<Buffer> buffer, const Shape& shape, const Strides& strides,
                        int64_t offset, DType dtype);

  // --- metadata ---
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  int rank() const { return impl().shape.rank(); }
  int64_t dim(int axis) const { return impl().shape.dim(axis); }
  int64_t numel() const { return impl().shape.num_elements(); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().buffer->device(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  const Strides& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  bool is_contiguous() const;
  // Identifies this tensor (not its buffer) for the gradient tape; unique in the process.
  uint64_t id() const { return impl().id; }
  const std::shared_ptr<Buffer>& buffer() const { return impl().buffer; }
  bool shares_buffer_with(const Tensor& other) const;

  // --- element access ---
  // Pointer to the first element of this view. data<T>() checks that T matches dtype().
  void* raw_data() const;
  template <typename T>
  T* data() const {
    check_dtype_for_access(dtype_of<T>);
    return static_cast<T*>(raw_data());
  }
  // The single element of a one-element tensor, converted to T (copied from the device).
  template <typename T>
  T item() const;
  // Every element in row-major order, converted to T (copied from the device).
  template <typename T>
  std::vector<T> to_vector() const;

  // --- differentiable transformations (recorded on an active GradientTape) ---
  // `dims` may hold one -1, inferred from the element count. A view when contiguous.
  Tensor reshape(const std::vector<int64_t>& dims) const;
  Tensor transpose(const std::vector<int>& permutation) const;  // a view
  Tensor t() const;                                             // 2-D transpose, a view
  // Elements [start, end) of `axis` with `step` > 0; negative start/end count from the end.
  Tensor slice(int axis, int64_t start, int64_t end, int64_t step = 1) const;  // a view
  Tensor expand_dims(int axis) const;
  Tensor squeeze(int axis) const;
  Tensor broadcast_to(const Shape& shape) const;  // a view with zero strides
  Tensor contiguous() const;  // this tensor when already contiguous, else a copy
  Tensor clone() const;       // always a copy
  Tensor to(Device device) const;
  Tensor cast(DType dtype) const;

  // Overwrites this tensor's elements with `source`'s (same shape; any device; converted
  // to this dtype). Not recorded on the tape: use it for variables and buffers.
  void assign(const Tensor& source);

  std::string to_string(int64_t max_elements = 64) const;

 private:
  struct Impl {
    std::shared_ptr<Buffer> buffer;
    Shape shape;
    Strides strides{};
    int64_t offset = 0;  // elements
    DType dtype = DType::kFloat32;
    uint64_t id = 0;
  };

  explicit Tensor(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  const Impl& impl() const;
  void check_dtype_for_access(DType requested) const;
  Tensor to_host_contiguous() const;
  // Throw InvalidArgumentError naming the shape.
  [[noreturn]] static void throw_cannot_fill(size_t values, const Shape& shape);
  [[noreturn]] void throw_not_scalar() const;

  std::shared_ptr<Impl> impl_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

// --- templates ---

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != shape.num_elements()) {
    throw_cannot_fill(values.size(), shape);
  }
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    return from_bytes(bytes.data(), shape, DType::kBool);
  } else {
    return from_bytes(values.data(), shape, dtype_of<T>);
  }
}

template <typename T>
T Tensor::item() const {
  if (numel() != 1) {
    throw_not_scalar();
  }
  return to_vector<T>()[0];
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = to_host_contiguous();
  std::vector<T> out(static_cast<size_t>(host.numel()));
  visit_dtype(host.dtype(), "to_vector", [&]<typename S>() {
    const S* src = static_cast<const S*>(host.raw_data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(src[i]);
  });
  return out;
}

}  // namespace cadre
