// What the NCCL collectives share (built with CUDA only): NCCL's and CUDA's failures as
// Cadre's typed errors, the current device for a scope, and checks of devices and dtypes.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string_view>

#include "cadre/tensor/device.h"
#include "cadre/tensor/dtype.h"

namespace cadre::nccl {

// Throws the typed error for a failed NCCL call, naming the call and NCCL's own account
// (InvalidArgumentError for invalid arguments or usage, UnavailableError for a system or
// remote failure, InternalError otherwise). ncclInProgress is not a failure.
void check_nccl(ncclResult_t result, std::string_view call, ncclComm_t comm = nullptr);
// Throws InternalError naming the call when `status` is a failure.
void check_cuda(cudaError_t status, std::string_view call);
// Throws InvalidArgumentError naming `what` unless `device` is a GPU of this machine.
void check_gpu(const Device& device, const char* what);
// NCCL's type for `dtype`; throws for one NCCL cannot reduce.
ncclDataType_t nccl_type(DType dtype);

// Makes `device` current for the scope.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device);
  ~CurrentDevice();
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace cadre::nccl
