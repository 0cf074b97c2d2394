// NCCL communicators over the GPUs of this process (built with CUDA only; unavailable.cc
// otherwise).
#include "strategies/collectives/nccl/local_group.h"

#include <nccl.h>

#include <set>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "core/tensor/cuda/device_runtime.h"
#include "strategies/collectives/nccl/status.h"

namespace cadre {
namespace {

using nccl::check_gpu;
using nccl::check_nccl;
using nccl::nccl_type;

class NcclGroup : public LocalNcclGroup {
 public:
  explicit NcclGroup(std::vector<Device> devices) : devices_(std::move(devices)) {
    std::vector<int> ids;
    for (const Device& d : devices_) ids.push_back(d.index);
    comms_.resize(devices_.size());
    check_nccl(ncclCommInitAll(comms_.data(), static_cast<int>(ids.size()), ids.data()),
               "ncclCommInitAll");
  }
  ~NcclGroup() override {
    for (ncclComm_t comm : comms_) ncclCommDestroy(comm);
  }

  const std::vector<Device>& devices() const override { return devices_; }

  void all_reduce_sum(const std::vector<Tensor>& buffers) override {
    if (buffers.size() != devices_.size()) {
      throw InternalError(str_cat("NCCL all-reduce over ", devices_.size(), " devices got ",
                                  buffers.size(), " buffers"));
    }
    for (size_t r = 0; r < buffers.size(); ++r) {
      const Tensor& b = buffers[r];
      if (b.device() != devices_[r] || !b.is_contiguous() || b.shape() != buffers[0].shape() ||
          b.dtype() != buffers[0].dtype()) {
        throw InternalError(str_cat("NCCL all-reduce: buffer ", r, " (", b.dtype(), b.shape(),
                                    " on ", b.device(), ") does not match"));
      }
    }
    if (buffers[0].numel() == 0) return;
    ncclDataType_t type = nccl_type(buffers[0].dtype());
    auto count = static_cast<size_t>(buffers[0].numel());
    // One thread drives every device of the group: the calls must be grouped.
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (size_t r = 0; r < buffers.size(); ++r) {
      cudaStream_t stream = backend::cuda::runtime(devices_[r].index).compute();
      ncclResult_t result = ncclAllReduce(buffers[r].raw_data(), buffers[r].raw_data(), count, type,
                                          ncclSum, comms_[r], stream);
      if (result != ncclSuccess) {
        ncclGroupEnd();
        check_nccl(result, "ncclAllReduce", comms_[r]);
      }
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  }

 private:
  std::vector<Device> devices_;
  std::vector<ncclComm_t> comms_;
};

}  // namespace

std::unique_ptr<LocalNcclGroup> local_nccl_group(const std::vector<Device>& devices) {
  if (devices.empty()) throw InvalidArgumentError("local_nccl_group: no devices");
  std::set<int> seen;
  for (const Device& d : devices) {
    check_gpu(d, "local_nccl_group");
    if (!seen.insert(d.index).second) {
      throw InvalidArgumentError(str_cat("local_nccl_group: ", d, " appears twice"));
    }
  }
  return std::make_unique<NcclGroup>(devices);
}

}  // namespace cadre
