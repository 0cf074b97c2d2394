#pragma once

namespace cadre::bench {

// `cadre_bench train`: steps of the Fashion-MNIST MLP or CNN (shuffled batch gathered from
// memory, forward, backward, Adam), timed in windows after a warm-up; prints the median.
int run_train();

}  // namespace cadre::bench
