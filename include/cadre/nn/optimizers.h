// The optimizers, with tf.keras's update rules and defaults.
#pragma once

#include <memory>

#include "cadre/nn/optimizer.h"

namespace cadre::nn::optimizers {

// v = momentum * v - lr * g; w += v (Nesterov: w += momentum * v - lr * g). Plain SGD
// without momentum updates sparse gradients row by row.
std::shared_ptr<Optimizer> sgd(LearningRate learning_rate = 0.01, double momentum = 0,
                               bool nesterov = false, OptimizerOptions options = {});
// Slots m and v; epsilon added to sqrt(v) after bias correction of the step size.
std::shared_ptr<Optimizer> adam(LearningRate learning_rate = 0.001, double beta1 = 0.9,
                                double beta2 = 0.999, double epsilon = 1e-7,
                                OptimizerOptions options = {});
// Slot accumulator (starting at initial_accumulator_value); sparse gradients update only
// the rows they touch.
std::shared_ptr<Optimizer> adagrad(LearningRate learning_rate = 0.001,
                                   double initial_accumulator_value = 0.1, double epsilon = 1e-7,
                                   OptimizerOptions options = {});
// Slots rms, momentum (when momentum > 0) and mg (when centered).
std::shared_ptr<Optimizer> rmsprop(LearningRate learning_rate = 0.001, double rho = 0.9,
                                   double momentum = 0, double epsilon = 1e-7,
                                   bool centered = false, OptimizerOptions options = {});

}  // namespace cadre::nn::optimizers
