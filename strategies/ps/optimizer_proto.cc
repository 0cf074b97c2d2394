#include "strategies/ps/optimizer_proto.h"

namespace cadre::ps {

void to_proto(const nn::OptimizerConfig& config, OptimizerSpec* out) {
  out->set_kind(config.kind);
  for (const auto& [name, value] : config.numbers) (*out->mutable_numbers())[name] = value;
  if (!config.schedule) return;
  ScheduleSpec* schedule = out->mutable_schedule();
  schedule->set_kind(config.schedule->kind);
  for (const auto& [name, value] : config.schedule->numbers) {
    (*schedule->mutable_numbers())[name] = value;
  }
  for (const auto& [name, values] : config.schedule->lists) {
    DoubleList& list = (*schedule->mutable_lists())[name];
    for (double v : values) list.add_values(v);
  }
}

nn::OptimizerConfig from_proto(const OptimizerSpec& spec) {
  nn::OptimizerConfig config;
  config.kind = spec.kind();
  config.numbers.insert(spec.numbers().begin(), spec.numbers().end());
  if (spec.has_schedule()) {
    nn::ScheduleConfig& schedule = config.schedule.emplace();
    schedule.kind = spec.schedule().kind();
    schedule.numbers.insert(spec.schedule().numbers().begin(), spec.schedule().numbers().end());
    for (const auto& [name, list] : spec.schedule().lists()) {
      schedule.lists[name] = std::vector<double>(list.values().begin(), list.values().end());
    }
  }
  return config;
}

}  // namespace cadre::ps
