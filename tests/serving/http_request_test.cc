// The REST API's parsers on their own: HTTP/1.1 requests within their bounds, and the JSON
// of TensorFlow Serving's predict requests and responses.
#include "serving/http_request.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cadre/base/errors.h"
#include "serving/rest_json.h"

namespace cadre::serving_internal {
namespace {

using State = HttpParse::State;

TEST(HttpRequestTest, ARequestIsCompleteWhenItsBodyIs) {
  HttpLimits limits;
  std::string text =
      "POST /v1/models/m:predict HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nabcdGET";
  for (size_t cut = 0; cut < text.size() - 3; ++cut) {
    EXPECT_EQ(parse_http_request(std::string_view(text).substr(0, cut), limits).state,
              State::kIncomplete);
  }
  HttpParse parse = parse_http_request(text, limits);
  ASSERT_EQ(parse.state, State::kComplete);
  EXPECT_EQ(parse.request.method, "POST");
  EXPECT_EQ(parse.request.target, "/v1/models/m:predict");
  EXPECT_EQ(parse.request.body, "abcd");
  EXPECT_EQ(*parse.request.header("host"), "a");
  EXPECT_TRUE(parse.request.keep_alive);
  EXPECT_EQ(parse.consumed, text.size() - 3);  // the next request's bytes stay
}

TEST(HttpRequestTest, BoundsAndMistakesGetTheirStatus) {
  HttpLimits limits;
  limits.max_head_bytes = 256;
  limits.max_headers = 4;
  limits.max_body_bytes = 100;
  auto status = [&](const std::string& text) {
    HttpParse parse = parse_http_request(text, limits);
    return parse.state == State::kError ? parse.status : 0;
  };
  EXPECT_EQ(status(std::string(300, 'a')), 431);
  EXPECT_EQ(status("GET / HTTP/1.1\r\n" + std::string(5, 'x') + "\r\n\r\n"), 400);
  EXPECT_EQ(status("GET / HTTP/1.1\r\na: 1\r\nb: 1\r\nc: 1\r\nd: 1\r\ne: 1\r\n\r\n"), 431);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n"), 413);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"), 400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), 501);
  EXPECT_EQ(status("GET /a HTTP/2.0\r\n\r\n"), 400);
  EXPECT_EQ(status("GET a HTTP/1.1\r\n\r\n"), 400);
  HttpParse expect = parse_http_request(
      "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", limits);
  EXPECT_TRUE(expect.expects_continue);
  HttpParse close = parse_http_request("GET / HTTP/1.0\r\n\r\n", limits);
  EXPECT_FALSE(close.request.keep_alive);
}

TEST(RestJsonTest, RowsAndColumnsDecodeToTheSameBatch) {
  TensorSpecs specs{{"x", {DType::kFloat32, {2}}}, {"n", {DType::kInt64, {}}}};
  auto rows =
      parse_predict_body(R"({"instances": [{"x": [1, 2], "n": 3}, {"x": [4.5, 5], "n": 6}]})", 32);
  auto columns = parse_predict_body(R"({"inputs": {"x": [[1, 2], [4.5, 5]], "n": [3, 6]}})", 32);
  for (const auto& body : {rows, columns}) {
    io::Features features = decode_inputs(body, specs);
    EXPECT_EQ(features.at("x").to_vector<float>(), (std::vector<float>{1, 2, 4.5, 5}));
    EXPECT_EQ(features.at("n").dtype(), DType::kInt64);
    EXPECT_EQ(features.at("n").to_vector<int64_t>(), (std::vector<int64_t>{3, 6}));
  }
  TensorSpecs one{{"x", {DType::kFloat32, {2}}}};
  EXPECT_EQ(
      decode_inputs(parse_predict_body(R"({"instances": [[1, 2]]})", 32), one).at("x").shape(),
      (Shape{1, 2}));
  EXPECT_THROW(
      decode_inputs(parse_predict_body(R"({"instances": [{"x": [1, 2], "n": 1.5}]})", 32), specs),
      InvalidArgumentError);
  EXPECT_THROW(  // past int64's range: refused, not converted
      decode_inputs(parse_predict_body(R"({"instances": [{"x": [1, 2], "n": 1e19}]})", 32), specs),
      InvalidArgumentError);
  EXPECT_THROW(
      decode_inputs(parse_predict_body(R"({"inputs": {"x": [[1, 2]], "n": [1, 2]}})", 32), specs),
      InvalidArgumentError);
  EXPECT_THROW(parse_predict_body("[[[[1]]]]", 3), InvalidArgumentError);
  EXPECT_THROW(parse_predict_body(R"({"instances": [], "inputs": []})", 32), InvalidArgumentError);
}

// What a float64 client sends comes back as the nearest float32 (the parse is exact, as
// strtod's); NaN and Infinity, which encode_predictions writes, are read; what is not JSON
// (bad UTF-8 included) is refused, saying where.
TEST(RestJsonTest, NumbersParseExactlyAndNonFiniteValuesRoundTrip) {
  TensorSpecs specs{{"x", {DType::kFloat64, {3}}}};
  auto body = parse_predict_body(
      R"({"instances": [[0.1, 2.2250738585072011e-308, 0.30000000000000004]]})", 32);
  EXPECT_EQ(decode_inputs(body, specs).at("x").to_vector<double>(),
            (std::vector<double>{0.1, 2.2250738585072011e-308, 0.30000000000000004}));
  // Numbers RapidJSON 1.1.0 converted wrongly (found by the rest_request fuzzer): a zero with
  // more than 22 decimals (3.5e-46), a significand that overflowed (1.29e-26); and numbers
  // past a double's range. Converted here as strtod converts them; in a string, left alone.
  body = parse_predict_body(
      R"({"instances": [[0.00000000000000000000000000, 0.0000001844674407370955161570000232, )"
      R"(-1e-400]], "signature_name": "0.00000000000000000000000000"})",
      32);
  std::vector<double> hard = decode_inputs(body, specs).at("x").to_vector<double>();
  EXPECT_EQ(hard, (std::vector<double>{0.0, 1.844674407370955161570000232e-7, -0.0}));
  EXPECT_TRUE(std::signbit(hard[2]));
  EXPECT_EQ(body.signature_name, "0.00000000000000000000000000");
  for (const char* invalid : {R"({"instances": [[0.]]})", R"({"instances": [[0.0e]]})",
                              R"({"instances": [[00.0]]})", R"({"instances": [[1e999]]})"}) {
    EXPECT_THROW(parse_predict_body(invalid, 32), InvalidArgumentError) << invalid;
  }
  body = parse_predict_body(R"({"instances": [[NaN, Infinity, -Infinity]]})", 32);
  std::vector<double> values = decode_inputs(body, specs).at("x").to_vector<double>();
  EXPECT_TRUE(std::isnan(values[0]));
  EXPECT_EQ(values[1], std::numeric_limits<double>::infinity());
  EXPECT_EQ(values[2], -std::numeric_limits<double>::infinity());
  try {
    parse_predict_body("{\"instances\": [[1, 2]], \"signature_name\": \"\xff\"}", 32);
    ADD_FAILURE() << "bad UTF-8 was taken";
  } catch (const InvalidArgumentError& error) {
    EXPECT_NE(std::string(error.what()).find("not valid JSON"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("at byte"), std::string::npos) << error.what();
  }
}

TEST(RestJsonTest, ResponsesHaveTensorFlowServingsShapes) {
  Tensor classes = Tensor::from_vector(std::vector<int64_t>{2, 0});
  Tensor scores = Tensor::from_vector(std::vector<float>{0.5f, 0.25f, 1, 2}, Shape{2, 2});
  EXPECT_EQ(encode_predictions({{"class", classes}}, true), R"({"predictions":[2,0]})");
  EXPECT_EQ(encode_predictions({{"class", classes}, {"s", scores}}, true),
            R"({"predictions":[{"class":2,"s":[0.5,0.25]},{"class":0,"s":[1,2]}]})");
  EXPECT_EQ(encode_predictions({{"s", scores}}, false), R"({"outputs":[[0.5,0.25],[1,2]]})");
  EXPECT_EQ(encode_predictions({{"class", classes}, {"s", scores}}, false),
            R"({"outputs":{"class":[2,0],"s":[[0.5,0.25],[1,2]]}})");
  EXPECT_EQ(json_quote("a\"b\\\n"), R"("a\"b\\\u000a")");
}

}  // namespace
}  // namespace cadre::serving_internal
