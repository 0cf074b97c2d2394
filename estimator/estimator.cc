#include "cadre/estimator/estimator.h"

#include <glog/logging.h>

#include <random>

#include "cadre/base/errors.h"
#include "core/base/logging.h"
#include "core/base/strings.h"
#include "estimator/eval_writers.h"

namespace cadre {

namespace {

uint64_t choose_seed(const RunConfig& config) {
  if (config.tf_random_seed) return *config.tf_random_seed;
  std::random_device device;
  uint64_t seed = (static_cast<uint64_t>(device()) << 32) | device();
  LOG(INFO) << "RunConfig.tf_random_seed is unset; using seed " << seed
            << " (set it to repeat this run)";
  return seed;
}

}  // namespace

Estimator::Estimator(ModelFn model_fn, RunConfig config, Params params,
                     std::optional<WarmStartSettings> warm_start_from)
    : model_fn_(std::move(model_fn)),
      config_(std::move(config)),
      params_(std::move(params)),
      warm_start_(std::move(warm_start_from)) {
  ensure_logging();
  if (!model_fn_) throw InvalidArgumentError("Estimator: model_fn is empty");
  config_.validate();
  seed_ = choose_seed(config_);
  eval_writers_ = std::make_shared<EvalWriters>();
}

Estimator::~Estimator() = default;

std::string eval_dir_name(const std::string& name) {
  return name.empty() ? "eval" : "eval_" + name;
}

}  // namespace cadre
