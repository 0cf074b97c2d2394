#pragma once

namespace cadre::bench {
// `cadre_bench allreduce`: Gloo all-reduce across the processes of TF_CONFIG's cluster.
int run_allreduce();
}  // namespace cadre::bench
