// The strategy that a program's --strategy and --devices flags name.
#pragma once

#include <memory>
#include <string>

#include "cadre/strategies/cluster_spec.h"
#include "cadre/strategies/multi_worker_options.h"
#include "cadre/strategies/parameter_server_options.h"
#include "cadre/strategies/strategy.h"

namespace cadre {

// one_device (the first of `devices`), mirrored, central_storage (variables on cpu:0),
// multi_worker_mirrored (joins `cluster`, which it needs), parameter_server (the ps tasks of
// `cluster`; without a cluster, central storage). `devices` as parse_devices reads them. On
// an evaluator task each evaluates on the local devices (the strategies' create() functions
// see to it), and the client of coordinator mode under multi_worker_mirrored gets one_device
// (its workers join each other). Throws InvalidArgumentError listing the names for an
// unknown one or naming what is missing, and what the strategies' create() functions throw.
// `ps_options` are parameter_server's, `multi_worker_options` multi_worker_mirrored's.
std::shared_ptr<Strategy> strategy_from_flags(const std::string& name, const std::string& devices,
                                              const ClusterConfig* cluster = nullptr,
                                              const ParameterServerOptions& ps_options = {},
                                              const MultiWorkerOptions& multi_worker_options = {});

}  // namespace cadre
