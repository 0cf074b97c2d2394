// The program the cross-worker collective tests run once per task (TF_CONFIG from the
// environment): joins MultiWorkerMirroredStrategy with the local devices HELPER_DEVICES
// (default cpu:0), and reduces and gathers values that name their replica across the job:
// replica g (worker-major) holds [g+1, 10(g+1)] with weight g+1, and g+1 rows of g. Prints
// one JSON line into OUTPUT: {"worker":W,"sum":[..],"mean":[..],"gathered":[first column..]}.
//
//   cross_worker_helper OUTPUT
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "cadre/estimator/run_config.h"
#include "cadre/ops/array.h"
#include "cadre/strategies/multi_worker_mirrored_strategy.h"

namespace {

std::string list(const cadre::Tensor& t, int64_t stride) {
  cadre::Tensor host = cadre::contiguous(t);
  std::string out = "[";
  for (int64_t i = 0; i < host.numel(); i += stride) {
    if (i > 0) out += ",";
    out += std::to_string(host.data<float>()[i]);
  }
  return out + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: cross_worker_helper OUTPUT\n";
    return 2;
  }
  try {
    cadre::RunConfig config = cadre::RunConfig::from_environment();
    const char* devices = std::getenv("HELPER_DEVICES");
    auto strategy = cadre::MultiWorkerMirroredStrategy::create(
        *config.cluster, cadre::parse_devices(devices && *devices ? devices : "cpu:0"));
    const int worker = strategy->input_context().input_pipeline_id;
    const int local = static_cast<int>(strategy->devices().size());
    cadre::PerReplica<cadre::Tensor> values, rows;
    std::vector<double> weights;
    for (int r = 0; r < local; ++r) {
      float g = static_cast<float>(worker * local + r);
      values.push_back(cadre::Tensor::from_vector<float>({g + 1, 10 * (g + 1)}));
      weights.push_back(g + 1);
      rows.push_back(
          cadre::Tensor::from_vector<float>(std::vector<float>(static_cast<size_t>(2 * (g + 1)), g),
                                            cadre::Shape{static_cast<int64_t>(g + 1), 2}));
    }
    cadre::Tensor sum = strategy->reduce(cadre::ReduceOp::kSum, values);
    cadre::Tensor mean = strategy->reduce(cadre::ReduceOp::kMean, values, weights);
    cadre::Tensor gathered = strategy->gather(rows, 0);
    std::ofstream(argv[1]) << "{\"worker\":" << worker << ",\"sum\":" << list(sum, 1)
                           << ",\"mean\":" << list(mean, 1) << ",\"gathered\":" << list(gathered, 2)
                           << "}\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "cross_worker_helper: " << e.what() << "\n";
    return 1;
  }
}
