#include "strategies/collectives/nccl/status.h"

#include <string>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::nccl {

void check_nccl(ncclResult_t result, std::string_view call, ncclComm_t comm) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  std::string message = str_cat(call, " failed: ", ncclGetErrorString(result));
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0') {
    message = str_cat(message, " (", last, ")");
  }
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      throw InvalidArgumentError(message);
    case ncclRemoteError:
      throw UnavailableError(str_cat(message, "; a peer failed"));
    case ncclSystemError:
      throw UnavailableError(message);
    default:
      throw InternalError(message);
  }
}

void check_cuda(cudaError_t status, std::string_view call) {
  if (status == cudaSuccess) return;
  cudaGetLastError();
  throw InternalError(str_cat(call, " failed: ", cudaGetErrorString(status)));
}

CurrentDevice::CurrentDevice(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

CurrentDevice::~CurrentDevice() { cudaSetDevice(previous_); }

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kUInt8:
      return ncclUint8;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kFloat16:
      return ncclFloat16;
    default:
      break;
  }
  throw_unsupported_dtype("NCCL all-reduce", dtype,
                          "float32, float64, int32, int64, uint8, bfloat16, float16");
}

void check_gpu(const Device& device, const char* what) {
  check_device(device);
  if (!device.is_gpu()) {
    throw InvalidArgumentError(str_cat(what, ": NCCL needs GPU devices, got ", device));
  }
}

}  // namespace cadre::nccl
