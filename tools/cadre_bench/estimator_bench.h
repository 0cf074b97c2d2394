#pragma once

namespace cadre::bench {

// `cadre_bench estimator --model=mlp|cnn --batch_size=B --threads=T --save_every=N
// [--api=estimator|keras]`: trains the Fashion-MNIST model through Estimator::train itself,
// or (--api=keras) the same layers as a keras::Sequential through Model::fit, one epoch of
// --train_steps steps on the same input_fn (examples/fashion_mnist's
// input pipeline: shuffle 10,000, batch, scale, prefetch), checkpointing every N steps
// (0: only at the end, outside the timing), and prints the step rate, how long the steps
// that saved took beyond a normal step, and the size of the last checkpoint by part.
int run_estimator();

}  // namespace cadre::bench
