// nn::OptimizerConfig in the parameter-server protocol.
#pragma once

#include "core/nn/optimizer_config.h"
#include "strategies/ps/ps.pb.h"

namespace cadre::ps {

// The clipping options stay behind: workers clip before they push.
void to_proto(const nn::OptimizerConfig& config, OptimizerSpec* out);
nn::OptimizerConfig from_proto(const OptimizerSpec& spec);

}  // namespace cadre::ps
