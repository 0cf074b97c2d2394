// Everything of cadre::nn: variables, layers, losses, optimizers, schedules, metrics.
#pragma once

#include "cadre/nn/clipping.h"
#include "cadre/nn/cross_replica.h"
#include "cadre/nn/initializers.h"
#include "cadre/nn/layers.h"
#include "cadre/nn/losses.h"
#include "cadre/nn/metrics.h"
#include "cadre/nn/optimizer.h"
#include "cadre/nn/optimizers.h"
#include "cadre/nn/schedules.h"
#include "cadre/nn/variable.h"
#include "cadre/nn/variable_store.h"
