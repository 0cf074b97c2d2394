#pragma once

namespace cadre::bench {

// `cadre_bench ckpt --dir=D --mb=N`: saves N MiB of variables as a checkpoint in D (fsync
// and publish included) and restores it; prints save and restore MiB/s (medians of three
// runs) and how long an asynchronous save blocks the caller beside the host copy it makes.
int run_ckpt();

}  // namespace cadre::bench
