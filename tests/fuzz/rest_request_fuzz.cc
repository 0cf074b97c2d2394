// The REST API's request path up to the model: the HTTP/1.1 request parser, then the JSON
// of a predict body decoded against two signatures (one input, and two named ones), and
// the response encoder over what was decoded; and the same body as a classify or regress
// one (tf.Examples and a context) turned into those signatures' inputs, with the
// classification and regression answers encoded from them.
#include <cstdint>
#include <string>

#include "cadre/base/errors.h"
#include "serving/example_inputs.h"
#include "serving/http_request.h"
#include "serving/rest_examples.h"
#include "serving/rest_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cadre::serving_internal;
  HttpLimits limits;
  limits.max_head_bytes = 4096;
  limits.max_headers = 32;
  limits.max_body_bytes = 1 << 16;
  HttpParse parse =
      parse_http_request(std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (parse.state != HttpParse::State::kComplete) return 0;
  const TensorSpecs one{{"x", {cadre::DType::kFloat32, {2}}}};
  const TensorSpecs two{{"x", {cadre::DType::kFloat32, {2, 1}}}, {"n", {cadre::DType::kInt64, {}}}};
  try {
    PredictBody body = parse_predict_body(parse.request.body, 16);
    for (const TensorSpecs* specs : {&one, &two}) {
      try {
        cadre::io::Features inputs = decode_inputs(body, *specs);
        std::map<std::string, cadre::Tensor> outputs(inputs.begin(), inputs.end());
        encode_predictions(outputs, body.row_format);
      } catch (const cadre::InvalidArgumentError&) {
      }
    }
  } catch (const cadre::InvalidArgumentError&) {
  }
  const TensorSpecs value{{"v", {cadre::DType::kFloat32, {1}}}};
  try {
    ExamplesBody body = parse_examples_body(parse.request.body, 16);
    try {
      cadre::io::Features inputs = examples_to_inputs(body.batch, one);
      std::map<std::string, cadre::Tensor> outputs(inputs.begin(), inputs.end());
      encode_classifications(
          classifications(outputs, cadre::ExportOutput::classification("x", {"a", "b"})));
    } catch (const cadre::InvalidArgumentError&) {
    }
    for (const TensorSpecs* specs : {&two, &value}) {
      try {
        cadre::io::Features inputs = examples_to_inputs(body.batch, *specs);
        if (specs == &value) {
          std::map<std::string, cadre::Tensor> outputs(inputs.begin(), inputs.end());
          encode_regressions(regressions(outputs, cadre::ExportOutput::regression("v")));
        }
      } catch (const cadre::InvalidArgumentError&) {
      }
    }
  } catch (const cadre::InvalidArgumentError&) {
  }
  return 0;
}
