// `cadre_bench ps`: one variable pulled and pushed (an SGD update applied on the ps) between
// the chief and a ps task on loopback, through ParameterServerStrategy, from 4 KiB to 64 MiB
// (or --bytes):
//
//   cadre_launch --chief=1 --ps=1 -- cadre_bench ps
//
// On the chief, one JSON line per size: {"bytes":N,"pulls_per_sec":..,"pull_mb_per_sec":..,
// "pushes_per_sec":..,"push_mb_per_sec":..}; the ps task serves until the launcher stops it.
#include "tools/cadre_bench/ps_bench.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "cadre/strategies/cluster_spec.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "core/base/strings.h"
#include "strategies/ps/ps_server.h"
#include "strategies/strategy_extended.h"
#include "tools/cadre_bench/timing.h"

DECLARE_int64(bytes);
DECLARE_int32(repeats);

namespace cadre::bench {
namespace {

ClusterConfig cluster_from_environment(const char* subcommand) {
  const char* text = std::getenv("TF_CONFIG");
  if (text == nullptr || *text == '\0') {
    throw InvalidArgumentError(str_cat(subcommand,
                                       " needs TF_CONFIG with ps tasks, e.g. cadre_launch "
                                       "--chief=1 --ps=1 -- cadre_bench ",
                                       subcommand));
  }
  ClusterConfig cluster = parse_tf_config(text);
  cluster.security = ClusterSecurity::from_environment();
  return cluster;
}

// Calls per second of `once`, the median of --repeats rounds of about 0.3 s.
double rate(const std::function<void()>& once) {
  once();
  auto probe = Clock::now();
  once();
  int reps = std::max(1, static_cast<int>(0.3 / std::max(1e-6, seconds_since(probe))));
  std::vector<double> rates;
  for (int r = 0; r < FLAGS_repeats; ++r) {
    auto start = Clock::now();
    for (int i = 0; i < reps; ++i) once();
    rates.push_back(reps / seconds_since(start));
  }
  return median(rates);
}

}  // namespace

bool serve_if_ps() {
  const char* text = std::getenv("TF_CONFIG");
  if (text == nullptr || *text == '\0') return false;
  ClusterConfig cluster = parse_tf_config(text);
  cluster.security = ClusterSecurity::from_environment();
  if (cluster.task.type != "ps") return false;
  ps::ServerOptions options;
  options.task = cluster.task.to_string();
  options.max_message_bytes = int64_t{1} << 30;
  options.security = cluster.security;
  ps::ParameterServer::start(cluster.address(cluster.task), options)->wait();
  return true;
}

int run_ps() {
  if (serve_if_ps()) return 0;
  ClusterConfig cluster = cluster_from_environment("ps");
  ParameterServerOptions options;
  options.max_message_bytes = int64_t{1} << 30;
  options.placement.min_slice_bytes = int64_t{1} << 40;  // one whole variable
  auto strategy = ParameterServerStrategy::create(cluster, {Device::cpu(0)}, options);
  std::vector<int64_t> sizes;
  if (FLAGS_bytes > 0) {
    sizes.push_back(FLAGS_bytes);
  } else {
    for (int64_t b = 4096; b <= (int64_t{64} << 20); b *= 4) sizes.push_back(b);
  }
  auto sgd = nn::optimizers::sgd(1e-3);
  bool step_set = false;
  for (int64_t bytes : sizes) {
    std::unique_ptr<DistributedVariables> variables = strategy->create_variables(0);
    if (!step_set) strategy->extended().broadcast_from_chief(0);
    step_set = true;
    nn::Variable* variable = nullptr;
    {
      nn::VariableStoreScope scope(variables->primary());
      variable =
          &nn::get_variable(str_cat("v", bytes), Shape{bytes / 4}, nn::initializers::zeros());
    }
    Tensor gradient = Tensor::full(Shape{bytes / 4}, 1.0);
    const StrategyExtended& extended = strategy->extended();
    double pulls = rate([&] { extended.before_run(*variables); });
    double pushes = rate([&] { extended.update_shared(*variables, *sgd, {gradient}, {variable}); });
    double mb = static_cast<double>(bytes) / (1 << 20);
    std::printf(
        "{\"bytes\":%lld,\"pulls_per_sec\":%.1f,\"pull_mb_per_sec\":%.1f,\"pushes_per_sec\":%.1f,"
        "\"push_mb_per_sec\":%.1f}\n",
        static_cast<long long>(bytes), pulls, pulls * mb, pushes, pushes * mb);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace cadre::bench
