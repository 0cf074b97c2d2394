#include "cadre/strategies/strategy_from_flags.h"

#include "cadre/base/errors.h"
#include "cadre/strategies/central_storage_strategy.h"
#include "cadre/strategies/mirrored_strategy.h"
#include "cadre/strategies/multi_worker_mirrored_strategy.h"
#include "cadre/strategies/one_device_strategy.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "core/base/strings.h"

namespace cadre {

std::shared_ptr<Strategy> strategy_from_flags(const std::string& name, const std::string& devices,
                                              const ClusterConfig* cluster,
                                              const ParameterServerOptions& ps_options,
                                              const MultiWorkerOptions& multi_worker_options) {
  constexpr char kNames[] =
      "one_device, mirrored, central_storage, multi_worker_mirrored or parameter_server";
  if (cluster && cluster->task.type == "client" && name == "multi_worker_mirrored") {
    // Coordinator mode: the client trains nothing itself; it hosts the workers' rendezvous
    // and evaluates on one device.
    return OneDeviceStrategy::create(parse_devices(devices).front());
  }
  if (name == "one_device") return OneDeviceStrategy::create(parse_devices(devices).front());
  if (name == "mirrored") return MirroredStrategy::create(parse_devices(devices));
  if (name == "central_storage") return CentralStorageStrategy::create(parse_devices(devices));
  if (name == "multi_worker_mirrored") {
    if (!cluster) {
      throw InvalidArgumentError(
          "strategy multi_worker_mirrored needs a cluster: set TF_CONFIG (or run under "
          "cadre_launch or Slurm)");
    }
    return MultiWorkerMirroredStrategy::create(*cluster, parse_devices(devices),
                                               multi_worker_options);
  }
  if (name == "parameter_server") {
    // Without a cluster, TensorFlow's local parameter-server mode: variables on the CPU,
    // computation on the local devices, which is central storage.
    if (!cluster) return CentralStorageStrategy::create(parse_devices(devices));
    return ParameterServerStrategy::create(*cluster, parse_devices(devices), ps_options);
  }
  throw InvalidArgumentError(str_cat("unknown strategy '", name, "'; expected ", kNames));
}

}  // namespace cadre
