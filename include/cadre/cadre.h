// Cadre: Estimator-style distributed training in C++. Include this one header; everything
// under include/cadre is the public API, and nothing else is installed.
#pragma once

#include "cadre/version.h"

// Errors, files, tensors and devices.
#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "cadre/runtime/precision.h"
#include "cadre/runtime/profiler.h"
#include "cadre/runtime/threading.h"
#include "cadre/tensor/device.h"
#include "cadre/tensor/dtype.h"
#include "cadre/tensor/shape.h"
#include "cadre/tensor/tensor.h"

// Operations, gradients and random numbers.
#include "cadre/autodiff/gradient.h"
#include "cadre/autodiff/tape.h"
#include "cadre/ops/activation.h"
#include "cadre/ops/array.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/linalg.h"
#include "cadre/ops/math.h"
#include "cadre/ops/nn.h"
#include "cadre/ops/random.h"
#include "cadre/ops/reduce.h"
#include "cadre/random/generator.h"

// Layers, losses, metrics, optimizers and variables.
#include "cadre/nn/nn.h"

// Input pipelines and the files they read and write.
#include "cadre/io/categorical.h"
#include "cadre/io/csv.h"
#include "cadre/io/dataset.h"
#include "cadre/io/dataset_options.h"
#include "cadre/io/element.h"
#include "cadre/io/event_file.h"
#include "cadre/io/example.h"
#include "cadre/io/idx.h"
#include "cadre/io/input_context.h"
#include "cadre/io/input_fn.h"
#include "cadre/io/iterator_state.h"
#include "cadre/io/mnist.h"
#include "cadre/io/summary_writer.h"
#include "cadre/io/tfrecord.h"

// Feature columns.
#include "cadre/feature_column/feature_column.h"

// Checkpoints.
#include "cadre/checkpoint/contents.h"
#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/restore.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/checkpoint/variables.h"
#include "cadre/checkpoint/watcher.h"
#include "cadre/checkpoint/writer.h"

// Distribution strategies and clusters.
#include "cadre/strategies/central_storage_strategy.h"
#include "cadre/strategies/cluster_security.h"
#include "cadre/strategies/cluster_spec.h"
#include "cadre/strategies/cross_device_ops.h"
#include "cadre/strategies/distributed_dataset.h"
#include "cadre/strategies/distributed_variables.h"
#include "cadre/strategies/mirrored_strategy.h"
#include "cadre/strategies/multi_worker_mirrored_strategy.h"
#include "cadre/strategies/multi_worker_options.h"
#include "cadre/strategies/one_device_strategy.h"
#include "cadre/strategies/parameter_server_options.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "cadre/strategies/per_replica.h"
#include "cadre/strategies/replica_context.h"
#include "cadre/strategies/strategy.h"
#include "cadre/strategies/strategy_from_flags.h"

// The Estimator.
#include "cadre/estimator/basic_hooks.h"
#include "cadre/estimator/canned.h"
#include "cadre/estimator/checkpoint_saver_hook.h"
#include "cadre/estimator/early_stopping.h"
#include "cadre/estimator/estimator.h"
#include "cadre/estimator/eval_result.h"
#include "cadre/estimator/exporters.h"
#include "cadre/estimator/hooks.h"
#include "cadre/estimator/model_fn.h"
#include "cadre/estimator/predictor.h"
#include "cadre/estimator/profiler_hook.h"
#include "cadre/estimator/run_config.h"
#include "cadre/estimator/train_and_evaluate.h"

// The Keras-style Model API over the Estimator.
#include "cadre/keras/callbacks.h"
#include "cadre/keras/layers.h"
#include "cadre/keras/losses.h"
#include "cadre/keras/metrics.h"
#include "cadre/keras/model.h"

// Serving exported models over TensorFlow Serving's REST and gRPC APIs.
#include "cadre/serving/model_server.h"
