// The checks every ClusterConfig passes, however it was read (TF_CONFIG, Slurm).
#pragma once

#include "cadre/strategies/cluster_spec.h"

namespace cadre {

// Throws InvalidArgumentError naming the field and the value of the first mistake (see
// parse_tf_config).
void validate_cluster(const ClusterConfig& config);

}  // namespace cadre
