// Gradient clipping.
#pragma once

#include <vector>

#include "cadre/autodiff/gradient.h"

namespace cadre::nn {

// sqrt of the sum of squares of every element of every defined gradient (sparse ones by
// their values), in double precision.
double global_norm(const std::vector<Gradient>& gradients);
// Scales every gradient by clip_norm / max(global_norm, clip_norm), as
// tf.clip_by_global_norm does; returns the norm before clipping.
double clip_by_global_norm(std::vector<Gradient>& gradients, double clip_norm);

}  // namespace cadre::nn
