#pragma once

namespace cadre::bench {

// `cadre_bench input --batch_size=B`: elements per second delivered by the Fashion-MNIST
// train input pipeline (decode, scale to [0, 1], shuffle 10k, batch B, prefetch) with the
// scaling at load, per element and per batch; then two experiments: a CPU-heavy map with 1
// and 2 parallel calls, and an MLP training loop fed by a map costing about one training
// step, without and with prefetch. The last line is one JSON object with every figure,
// "elements_per_sec" last.
int run_input();

}  // namespace cadre::bench
