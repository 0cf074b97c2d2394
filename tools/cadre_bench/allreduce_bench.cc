// cadre_bench allreduce: float32 sum all-reduce across the training tasks of TF_CONFIG's
// cluster (one process per task, e.g. under cadre_launch), over the same coordination
// service and collective that MultiWorkerMirroredStrategy uses (shared memory on one host,
// or Gloo's TCP mesh with --transport=gloo). --tensors=K splits --bytes into K tensors
// which are packed into one buffer per call, as the strategy packs gradients (the packing
// copies are timed too; one tensor is reduced in place); --unfused reduces them one call
// each, as a peer without buckets does. Without --bytes it sweeps 4 KiB to 256 MiB. On the
// chief, one JSON line per size:
// {"bytes":N,"tensors":K,"transport":..,"time_ms":..,"algbw_gbps":..,"busbw_gbps":..}.
#include "tools/cadre_bench/allreduce_bench.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/cluster/worker_group.h"
#include "tools/cadre_bench/timing.h"

DEFINE_int64(bytes, 0, "bytes reduced per call (0: sweep 4 KiB .. 256 MiB)");
DEFINE_int32(tensors, 1, "tensors the bytes are split into");
DEFINE_bool(unfused, false, "one all-reduce per tensor instead of one packed buffer");
DEFINE_int32(repeats, 5, "timed rounds; the median is reported");
DEFINE_string(transport, "auto",
              "auto (shared memory when every process is on this host, else Gloo) or gloo");

namespace cadre::bench {

int run_allreduce() {
  const char* text = std::getenv("TF_CONFIG");
  if (text == nullptr || *text == '\0') {
    throw InvalidArgumentError(
        "allreduce needs TF_CONFIG (one process per task), e.g. "
        "cadre_launch --chief=1 --workers=1 -- cadre_bench allreduce --bytes=16777216");
  }
  if (FLAGS_tensors <= 0 || FLAGS_bytes < 0 || FLAGS_repeats <= 0) {
    throw InvalidArgumentError("--tensors and --repeats must be positive, --bytes >= 0");
  }
  ClusterConfig cluster = parse_tf_config(text);
  cluster.security = ClusterSecurity::from_environment();
  MultiWorkerOptions options;
  options.registration_timeout_seconds = 120;
  if (FLAGS_transport != "auto" && FLAGS_transport != "gloo") {
    throw InvalidArgumentError(str_cat("--transport=", FLAGS_transport, ": expected auto or gloo"));
  }
  options.shared_memory = FLAGS_transport == "auto";
  std::unique_ptr<WorkerGroup> group = join_worker_group(cluster, options);
  ProcessCollective& collective = *group->collective;
  const int n = collective.size();
  std::vector<int64_t> sizes;
  if (FLAGS_bytes > 0) {
    sizes.push_back(FLAGS_bytes);
  } else {
    for (int64_t b = 4096; b <= (int64_t{256} << 20); b *= 4) sizes.push_back(b);
  }
  for (int64_t bytes : sizes) {
    const size_t k = static_cast<size_t>(FLAGS_tensors);
    const size_t per = std::max<size_t>(1, static_cast<size_t>(bytes) / 4 / k);
    std::vector<std::vector<float>> tensors(k, std::vector<float>(per, 1.0f));
    std::vector<float> bucket(per * k);
    auto once = [&] {
      if (FLAGS_unfused || k == 1) {  // one tensor needs no packing
        for (auto& t : tensors) collective.sum(t.data(), t.size());
        return;
      }
      for (size_t i = 0; i < k; ++i) std::memcpy(&bucket[i * per], tensors[i].data(), per * 4);
      collective.sum(bucket.data(), bucket.size());
      for (size_t i = 0; i < k; ++i) std::memcpy(tensors[i].data(), &bucket[i * per], per * 4);
    };
    once();
    once();
    auto probe = std::chrono::steady_clock::now();
    once();
    double single = std::max(1e-6, seconds_since(probe));
    // Every rank must run the same number of calls: the chief decides and broadcasts it.
    double reps_d = std::max(1.0, std::min(50.0, 0.2 / single));
    collective.broadcast(&reps_d, sizeof reps_d, 0);
    int reps = static_cast<int>(reps_d);
    std::vector<double> times;
    for (int r = 0; r < FLAGS_repeats; ++r) {
      double zero = 0;
      collective.sum(&zero, 1);  // a barrier
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) once();
      double t = seconds_since(start) / reps;
      // The slowest rank's time, as the peer reports it.
      std::vector<double> all(static_cast<size_t>(n), 0.0);
      all[static_cast<size_t>(collective.rank())] = t;
      collective.sum(all.data(), all.size());
      times.push_back(*std::max_element(all.begin(), all.end()));
    }
    std::sort(times.begin(), times.end());
    double t = times[times.size() / 2];
    double algbw = static_cast<double>(bytes) / t / 1e9;
    if (collective.rank() == 0) {
      std::printf(
          "{\"bytes\":%lld,\"tensors\":%d,\"fused\":%s,\"procs\":%d,\"transport\":\"%s\","
          "\"time_ms\":%.4f,"
          "\"algbw_gbps\":%.4f,\"busbw_gbps\":%.4f}\n",
          static_cast<long long>(bytes), FLAGS_tensors, FLAGS_unfused ? "false" : "true", n,
          collective.transport(), t * 1e3, algbw, algbw * 2 * (n - 1) / n);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace cadre::bench
