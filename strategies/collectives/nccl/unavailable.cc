// NCCL in a build without CUDA: nothing is available, and every factory says so.
#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/collectives/nccl/collective.h"
#include "strategies/collectives/nccl/local_group.h"

namespace cadre {
namespace {

[[noreturn]] void unavailable(const char* what) {
  throw UnimplementedError(str_cat(what,
                                   ": NCCL comes with the CUDA backend, and Cadre was built "
                                   "without CUDA (configure with -DCADRE_CUDA=ON)"));
}

}  // namespace

bool nccl_available() { return false; }

std::string nccl_unique_id() { unavailable("nccl_unique_id"); }

std::unique_ptr<GpuCollective> nccl_collective(const std::string&, int, int, Device, NcclOptions) {
  unavailable("nccl_collective");
}

std::unique_ptr<GpuCollective> nccl_collective(Store&, int, int, Device, NcclOptions,
                                               const std::string&) {
  unavailable("nccl_collective");
}

std::unique_ptr<LocalNcclGroup> local_nccl_group(const std::vector<Device>&) {
  unavailable("local_nccl_group");
}

}  // namespace cadre
