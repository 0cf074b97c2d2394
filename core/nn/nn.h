// Everything of cadre::nn: variables, layers, losses, optimizers, schedules, metrics.
#pragma once

#include "core/nn/clipping.h"
#include "core/nn/cross_replica.h"
#include "core/nn/initializers.h"
#include "core/nn/layers.h"
#include "core/nn/losses.h"
#include "core/nn/metrics.h"
#include "core/nn/optimizer.h"
#include "core/nn/optimizers.h"
#include "core/nn/schedules.h"
#include "core/nn/variable.h"
#include "core/nn/variable_store.h"
