// The gRPC Predict request the serving tests send: model "toy", its input "x" in float_val.
#pragma once

#include "cadre/tensor/tensor.h"
#include "serving/proto/serving_apis.pb.h"

namespace cadre::testing {

// x: float32 [rows, columns].
inline tensorflow::serving::PredictRequest predict_request(const Tensor& x) {
  tensorflow::serving::PredictRequest request;
  request.mutable_model_spec()->set_name("toy");
  tensorflow::TensorProto& input = (*request.mutable_inputs())["x"];
  input.set_dtype(tensorflow::DT_FLOAT);
  input.mutable_tensor_shape()->add_dim()->set_size(x.dim(0));
  input.mutable_tensor_shape()->add_dim()->set_size(x.dim(1));
  for (float value : x.to_vector<float>()) input.add_float_val(value);
  return request;
}

}  // namespace cadre::testing
