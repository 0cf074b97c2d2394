#pragma once

namespace cadre::bench {
// `cadre_bench ps`: pulls and pushes between a worker and the ps tasks of TF_CONFIG's
// cluster.
int run_ps();
// The ps tasks of a benchmark's cluster: serves until stopped. Returns false (doing
// nothing) when this process is not a ps task.
bool serve_if_ps();
}  // namespace cadre::bench
