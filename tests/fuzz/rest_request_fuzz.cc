// The REST API's request path up to the model: the HTTP/1.1 request parser, then the JSON
// of a predict body decoded against two signatures (one input, and two named ones), and
// the response encoder over what was decoded.
#include <cstdint>
#include <string>

#include "cadre/base/errors.h"
#include "serving/http_request.h"
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
  return 0;
}
