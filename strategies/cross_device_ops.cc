#include "cadre/strategies/cross_device_ops.h"

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/base/mutex.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/runtime/threading.h"
#include "core/base/strings.h"
#include "core/runtime/parallel_for.h"
#include "strategies/collectives/nccl/collective.h"
#include "strategies/collectives/nccl/local_group.h"

namespace cadre {

namespace {

// sum_r scale[r] * values[r] on `device`, in one pass over memory for host float tensors
// (the replicas of logical CPU devices share host memory), else with ops.
Tensor weighted_sum(const std::vector<Tensor>& values, const std::vector<double>& scale,
                    Device device) {
  bool host_float = device.is_cpu();
  for (const Tensor& v : values) {
    host_float = host_float && v.device().is_cpu() && v.is_contiguous() &&
                 v.dtype() == values[0].dtype() &&
                 (v.dtype() == DType::kFloat32 || v.dtype() == DType::kFloat64);
  }
  if (!host_float) {
    Tensor sum = to_device(values[0], device) * scale[0];
    for (size_t r = 1; r < values.size(); ++r) sum = sum + to_device(values[r], device) * scale[r];
    return sum;
  }
  Tensor out = Tensor::empty(values[0].shape(), values[0].dtype(), device);
  visit_dtype(out.dtype(), "weighted_sum", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      std::vector<const T*> in;
      for (const Tensor& v : values) in.push_back(static_cast<const T*>(v.raw_data()));
      T* __restrict dst = static_cast<T*>(out.raw_data());
      parallel_for(0, out.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
        // Pairs of inputs per pass: the common two-replica case reads each input once.
        const T* __restrict a = in[0];
        const T sa = static_cast<T>(scale[0]);
        if (in.size() == 1) {
          for (int64_t i = begin; i < end; ++i) dst[i] = sa * a[i];
          return;
        }
        const T* __restrict b = in[1];
        const T sb = static_cast<T>(scale[1]);
        for (int64_t i = begin; i < end; ++i) dst[i] = sa * a[i] + sb * b[i];
        for (size_t r = 2; r < in.size(); ++r) {
          const T* __restrict src = in[r];
          const T s = static_cast<T>(scale[r]);
          for (int64_t i = begin; i < end; ++i) dst[i] += s * src[i];
        }
      });
    }
  });
  return out;
}

// The packing and the sparse path are shared; subclasses reduce one dense value.
class BucketedOps : public CrossDeviceOps {
 public:
  explicit BucketedOps(size_t bucket_bytes) : bucket_bytes_(bucket_bytes) {}

  PerReplica<std::vector<Gradient>> batch_reduce(ReduceOp op,
                                                 const PerReplica<std::vector<Gradient>>& values,
                                                 const std::vector<double>& weights,
                                                 const std::vector<Device>& destinations) override {
    const size_t replicas = values.size();
    if (replicas == 0 || weights.size() != replicas || destinations.size() != replicas) {
      throw InternalError(str_cat(name(), ": ", replicas, " replicas' values, ", weights.size(),
                                  " weights, ", destinations.size(), " destinations"));
    }
    const size_t count = values[0].size();
    double total = 0;
    for (double w : weights) total += w;
    std::vector<double> scale(replicas);
    for (size_t r = 0; r < replicas; ++r) {
      if (values[r].size() != count) {
        throw InternalError(str_cat(name(), ": replica ", r, " reduces ", values[r].size(),
                                    " values, replica 0 ", count));
      }
      scale[r] = op == ReduceOp::kMean ? weights[r] / total : weights[r];
    }
    NoGradScope no_grad;
    PerReplica<std::vector<Gradient>> out(replicas, std::vector<Gradient>(count));
    std::vector<size_t> bucket;  // indices of the dense values packed together
    size_t bucket_bytes = 0;
    auto flush = [&] {
      if (!bucket.empty()) reduce_bucket(values, bucket, scale, destinations, &out);
      bucket.clear();
      bucket_bytes = 0;
    };
    for (size_t i = 0; i < count; ++i) {
      const Gradient& first = values[0][i];
      for (size_t r = 1; r < replicas; ++r) {
        const Gradient& g = values[r][i];
        if (g.defined() != first.defined() ||
            (g.defined() && (g.shape() != first.shape() || g.dtype() != first.dtype()))) {
          throw InternalError(str_cat(name(), ": value ", i, " differs between replica 0 and ", r));
        }
      }
      if (!first.defined()) continue;
      bool sparse = false;
      for (size_t r = 0; r < replicas; ++r) sparse = sparse || values[r][i].is_sparse();
      if (sparse) {
        reduce_sparse(values, i, scale, destinations, &out);
        continue;
      }
      size_t bytes = static_cast<size_t>(first.shape().num_elements()) * dtype_size(first.dtype());
      if (!bucket.empty() &&
          (values[0][bucket[0]].dtype() != first.dtype() || bucket_bytes + bytes > bucket_bytes_)) {
        flush();
      }
      bucket.push_back(i);
      bucket_bytes += bytes;
    }
    flush();
    return out;
  }

 protected:
  // sum_r scale[r] * values[r], delivered to each destination.
  virtual PerReplica<Tensor> reduce_dense(const PerReplica<Tensor>& values,
                                          const std::vector<double>& scale,
                                          const std::vector<Device>& destinations) = 0;

 private:
  void reduce_bucket(const PerReplica<std::vector<Gradient>>& values,
                     const std::vector<size_t>& bucket, const std::vector<double>& scale,
                     const std::vector<Device>& destinations,
                     PerReplica<std::vector<Gradient>>* out) {
    const size_t replicas = values.size();
    if (bucket.size() == 1) {
      PerReplica<Tensor> one(replicas);
      for (size_t r = 0; r < replicas; ++r) one[r] = values[r][bucket[0]].dense();
      PerReplica<Tensor> reduced = reduce_dense(one, scale, destinations);
      for (size_t r = 0; r < replicas; ++r) (*out)[r][bucket[0]] = reduced[r];
      return;
    }
    PerReplica<Tensor> packed(replicas);
    for (size_t r = 0; r < replicas; ++r) {
      std::vector<Tensor> flat;
      for (size_t i : bucket) flat.push_back(contiguous(values[r][i].dense()).reshape({-1}));
      packed[r] = concat(flat, 0);
    }
    PerReplica<Tensor> reduced = reduce_dense(packed, scale, destinations);
    for (size_t r = 0; r < replicas; ++r) {
      int64_t at = 0;
      for (size_t i : bucket) {
        const Shape& shape = values[0][i].shape();
        int64_t n = shape.num_elements();
        (*out)[r][i] = reduced[r]
                           .slice(0, at, at + n)
                           .reshape(std::vector<int64_t>(shape.begin(), shape.end()));
        at += n;
      }
    }
  }

  void reduce_sparse(const PerReplica<std::vector<Gradient>>& values, size_t i,
                     const std::vector<double>& scale, const std::vector<Device>& destinations,
                     PerReplica<std::vector<Gradient>>* out) {
    const size_t replicas = values.size();
    std::vector<Tensor> indices, rows;
    Shape dense_shape = values[0][i].shape();
    Device home = destinations[0];
    for (size_t r = 0; r < replicas; ++r) {
      const Gradient& g = values[r][i];
      IndexedSlices s = g.is_sparse()
                            ? g.sparse()
                            : IndexedSlices{Tensor(), g.dense(), dense_shape};  // made sparse below
      if (!g.is_sparse()) {
        // A dense contribution to a sparse sum: every row.
        std::vector<int64_t> all(static_cast<size_t>(dense_shape.dim(0)));
        for (size_t k = 0; k < all.size(); ++k) all[k] = static_cast<int64_t>(k);
        s.indices = Tensor::from_vector(all);
      }
      indices.push_back(to_device(s.indices.cast(DType::kInt64), home));
      rows.push_back(to_device(s.values, home) * scale[r]);
    }
    IndexedSlices sum{concat(indices, 0), concat(rows, 0), dense_shape};
    for (size_t r = 0; r < replicas; ++r) {
      (*out)[r][i] = IndexedSlices{to_device(sum.indices, destinations[r]),
                                   to_device(sum.values, destinations[r]), dense_shape};
    }
  }

  size_t bucket_bytes_;
};

class ReductionToOneDevice : public BucketedOps {
 public:
  ReductionToOneDevice(Device reduce_to, size_t bucket_bytes)
      : BucketedOps(bucket_bytes), reduce_to_(reduce_to) {}
  std::string name() const override { return "ReductionToOneDevice"; }

 protected:
  PerReplica<Tensor> reduce_dense(const PerReplica<Tensor>& values,
                                  const std::vector<double>& scale,
                                  const std::vector<Device>& destinations) override {
    Tensor sum = weighted_sum(values, scale, reduce_to_);
    PerReplica<Tensor> out;
    for (const Device& d : destinations) out.push_back(to_device(sum, d));
    return out;
  }

 private:
  Device reduce_to_;
};

class HierarchicalCopyAllReduce : public BucketedOps {
 public:
  explicit HierarchicalCopyAllReduce(size_t bucket_bytes) : BucketedOps(bucket_bytes) {}
  std::string name() const override { return "HierarchicalCopyAllReduce"; }

 protected:
  PerReplica<Tensor> reduce_dense(const PerReplica<Tensor>& values,
                                  const std::vector<double>& scale,
                                  const std::vector<Device>& destinations) override {
    // Level by level: slot r holds the sum of replicas [r, r + stride), scaled at the first
    // level.
    if (values.size() == 1) {
      Tensor scaled = weighted_sum({contiguous(values[0])}, scale, values[0].device());
      return PerReplica<Tensor>(destinations.size(), to_device(scaled, destinations[0]));
    }
    std::vector<Tensor> level(values.begin(), values.end());
    for (size_t stride = 1; stride < values.size(); stride *= 2) {
      for (size_t r = 0; r + stride < values.size(); r += 2 * stride) {
        std::vector<double> pair = stride == 1 ? std::vector<double>{scale[r], scale[r + 1]}
                                               : std::vector<double>{1.0, 1.0};
        level[r] = weighted_sum({level[r], contiguous(level[r + stride])}, pair, level[r].device());
      }
      if (stride == 1 && values.size() % 2 == 1) {
        // The odd replica out joins the next level unpaired: scale it now.
        size_t last = values.size() - 1;
        level[last] = weighted_sum({contiguous(level[last])}, {scale[last]}, level[last].device());
      }
    }
    PerReplica<Tensor> out;
    for (const Device& d : destinations) out.push_back(to_device(level[0], d));
    return out;
  }
};

// NCCL across the local GPUs: each replica's bucket is scaled on its own GPU, then one NCCL
// group call sums the buckets in place on every GPU (ring or tree over NVLink/PCIe, as NCCL
// chooses), leaving each replica its copy of the result without a trip through the host.
class NcclAllReduce : public BucketedOps {
 public:
  explicit NcclAllReduce(size_t bucket_bytes) : BucketedOps(bucket_bytes) {}
  std::string name() const override { return "NcclAllReduce"; }

 protected:
  PerReplica<Tensor> reduce_dense(const PerReplica<Tensor>& values,
                                  const std::vector<double>& scale,
                                  const std::vector<Device>& destinations) override {
    std::vector<Device> devices;
    PerReplica<Tensor> sums(values.size());
    for (size_t r = 0; r < values.size(); ++r) {
      devices.push_back(values[r].device());
      // A fresh buffer per replica: the sum is taken in place.
      sums[r] = scale[r] == 1 ? clone(values[r]) : contiguous(values[r] * scale[r]);
    }
    group_for(devices).all_reduce_sum(sums);
    for (size_t r = 0; r < sums.size(); ++r) sums[r] = to_device(sums[r], destinations[r]);
    return sums;
  }

 private:
  LocalNcclGroup& group_for(const std::vector<Device>& devices) {
    MutexLock lock(mutex_);
    if (group_ == nullptr || group_->devices() != devices) group_ = local_nccl_group(devices);
    return *group_;
  }

  Mutex mutex_;
  std::unique_ptr<LocalNcclGroup> group_ CADRE_GUARDED_BY(mutex_);  // built on first use
};

}  // namespace

std::shared_ptr<CrossDeviceOps> reduction_to_one_device(Device reduce_to, size_t bucket_bytes) {
  check_device(reduce_to);
  return std::make_shared<ReductionToOneDevice>(reduce_to, bucket_bytes);
}

std::shared_ptr<CrossDeviceOps> hierarchical_copy_all_reduce(size_t bucket_bytes) {
  return std::make_shared<HierarchicalCopyAllReduce>(bucket_bytes);
}

std::shared_ptr<CrossDeviceOps> nccl_all_reduce(size_t bucket_bytes) {
  if (!nccl_available()) {
    throw UnimplementedError(
        "NcclAllReduce needs NCCL, which comes with the CUDA backend, and Cadre was built "
        "without CUDA; use hierarchical_copy_all_reduce() or reduction_to_one_device()");
  }
  return std::make_shared<NcclAllReduce>(bucket_bytes);
}

}  // namespace cadre
