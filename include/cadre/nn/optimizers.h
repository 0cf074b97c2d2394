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

// FTRL-Proximal with tf.keras's Ftrl defaults and update (slots accumulator, starting at
// initial_accumulator_value, and linear); l2 acts as l2 + beta / (2 lr). TensorFlow's
// canned linear estimators train with it.
struct FtrlOptions {
  double learning_rate_power = -0.5;
  double initial_accumulator_value = 0.1;
  double l1 = 0;  // l1_regularization_strength
  double l2 = 0;  // l2_regularization_strength
  double l2_shrinkage = 0;
  double beta = 0;
};
std::shared_ptr<Optimizer> ftrl(LearningRate learning_rate = 0.001, FtrlOptions ftrl = {},
                                OptimizerOptions options = {});

}  // namespace cadre::nn::optimizers
