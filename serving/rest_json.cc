#include "serving/rest_json.h"

#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <cstdio>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::serving_internal {

namespace {

using google::protobuf::Value;

// Rejects nesting past `max_depth` before protobuf's parser (which recurses) sees the body.
void check_depth(std::string_view body, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        throw InvalidArgumentError(
            str_cat("the JSON body is nested deeper than ", max_depth, " levels"));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

const char* kind_name(const Value& value) {
  switch (value.kind_case()) {
    case Value::kNumberValue:
      return "a number";
    case Value::kBoolValue:
      return "a boolean";
    case Value::kStringValue:
      return "a string";
    case Value::kListValue:
      return "a list";
    case Value::kStructValue:
      return "an object";
    default:
      return "null";
  }
}

// Whether `number` is an integer in `dtype`'s range (converting one outside it is undefined).
bool fits_integer(double number, DType dtype) {
  double low = dtype == DType::kUInt8   ? 0
               : dtype == DType::kInt32 ? -2147483648.0
                                        : -9223372036854775808.0;
  double high = dtype == DType::kUInt8   ? 256
                : dtype == DType::kInt32 ? 2147483648.0
                                         : 9223372036854775808.0;
  return number == std::floor(number) && number >= low && number < high;
}

// Appends the values of one example (or of a whole batched input, shape[0] the batch) in
// row-major order, checking the nesting against `shape`.
void flatten(const Value& value, const std::vector<int64_t>& shape, size_t axis, DType dtype,
             const std::string& where, std::vector<double>* out) {
  if (axis == shape.size()) {
    if (value.kind_case() == Value::kNumberValue && dtype != DType::kBool) {
      double number = value.number_value();
      if (!is_floating(dtype) && !fits_integer(number, dtype)) {
        throw InvalidArgumentError(
            str_cat(where, ": ", number, " is not an integer that ", dtype_name(dtype), " holds"));
      }
      out->push_back(number);
      return;
    }
    if (value.kind_case() == Value::kBoolValue && dtype == DType::kBool) {
      out->push_back(value.bool_value() ? 1 : 0);
      return;
    }
    throw InvalidArgumentError(str_cat(where, ": expected ",
                                       dtype == DType::kBool ? "a boolean" : "a number", " (",
                                       dtype_name(dtype), "), got ", kind_name(value)));
  }
  if (value.kind_case() != Value::kListValue || value.list_value().values_size() != shape[axis]) {
    std::string got = value.kind_case() == Value::kListValue
                          ? str_cat("a list of ", value.list_value().values_size())
                          : std::string(kind_name(value));
    throw InvalidArgumentError(
        str_cat(where, ": expected a list of ", shape[axis], " values, got ", got));
  }
  for (const Value& item : value.list_value().values()) {
    flatten(item, shape, axis + 1, dtype, where, out);
  }
}

Tensor to_tensor(const std::vector<double>& values, std::vector<int64_t> dims, DType dtype) {
  return Tensor::from_vector(values, Shape(dims)).cast(dtype);
}

io::Features decode_rows(const Value& instances, const TensorSpecs& specs) {
  if (instances.kind_case() != Value::kListValue || instances.list_value().values_size() == 0) {
    throw InvalidArgumentError("\"instances\" must be a non-empty list, one entry per example");
  }
  int64_t batch = instances.list_value().values_size();
  io::Features features;
  for (const auto& [name, spec] : specs) {
    std::vector<double> values;
    for (int64_t i = 0; i < batch; ++i) {
      const Value& row = instances.list_value().values(i);
      std::string where = str_cat("input '", name, "' of instances[", i, "]");
      const Value* item = &row;
      if (row.kind_case() == Value::kStructValue) {
        auto found = row.struct_value().fields().find(name);
        if (found == row.struct_value().fields().end()) {
          throw InvalidArgumentError(str_cat("instances[", i, "] has no input '", name, "'"));
        }
        item = &found->second;
      } else if (specs.size() > 1) {
        throw InvalidArgumentError(str_cat("instances[", i, "] must be an object naming the ",
                                           specs.size(), " inputs of the signature"));
      }
      flatten(*item, spec.shape, 0, spec.dtype, where, &values);
    }
    std::vector<int64_t> dims{batch};
    dims.insert(dims.end(), spec.shape.begin(), spec.shape.end());
    features.set(name, to_tensor(values, dims, spec.dtype));
  }
  return features;
}

io::Features decode_columns(const Value& inputs, const TensorSpecs& specs) {
  io::Features features;
  int64_t batch = -1;
  for (const auto& [name, spec] : specs) {
    const Value* item = &inputs;
    if (inputs.kind_case() == Value::kStructValue) {
      auto found = inputs.struct_value().fields().find(name);
      if (found == inputs.struct_value().fields().end()) {
        throw InvalidArgumentError(str_cat("\"inputs\" has no input '", name, "'"));
      }
      item = &found->second;
    } else if (specs.size() > 1) {
      throw InvalidArgumentError(
          str_cat("\"inputs\" must be an object naming the ", specs.size(), " inputs"));
    }
    if (item->kind_case() != Value::kListValue || item->list_value().values_size() == 0) {
      throw InvalidArgumentError(
          str_cat("input '", name, "' must be a non-empty list, the batch first"));
    }
    int64_t rows = item->list_value().values_size();
    if (batch >= 0 && rows != batch) {
      throw InvalidArgumentError(
          str_cat("input '", name, "' has a batch of ", rows, " where the others have ", batch));
    }
    batch = rows;
    std::vector<int64_t> dims{rows};
    dims.insert(dims.end(), spec.shape.begin(), spec.shape.end());
    std::vector<double> values;
    flatten(*item, dims, 0, spec.dtype, str_cat("input '", name, "'"), &values);
    features.set(name, to_tensor(values, dims, spec.dtype));
  }
  return features;
}

void append_number(std::string* out, double value, int digits) {
  if (std::isnan(value)) {
    *out += "NaN";
  } else if (std::isinf(value)) {
    *out += value > 0 ? "Infinity" : "-Infinity";
  } else {
    char text[40];
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    *out += text;
  }
}

// Writes elements [offset, offset + the product of dims[axis:]) as nested lists.
void append_nested(std::string* out, const std::vector<double>& values, DType dtype,
                   const std::vector<int64_t>& dims, size_t axis, int64_t* offset) {
  if (axis == dims.size()) {
    double value = values[(*offset)++];
    if (dtype == DType::kBool) {
      *out += value != 0 ? "true" : "false";
    } else {
      append_number(out, value, dtype == DType::kFloat64 ? 17 : is_floating(dtype) ? 9 : 20);
    }
    return;
  }
  *out += '[';
  for (int64_t i = 0; i < dims[axis]; ++i) {
    if (i > 0) *out += ',';
    append_nested(out, values, dtype, dims, axis + 1, offset);
  }
  *out += ']';
}

}  // namespace

PredictBody parse_predict_body(std::string_view body, int max_depth) {
  check_depth(body, max_depth);
  Value root;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(body.data(), body.size()), &root);
  if (!status.ok()) {
    throw InvalidArgumentError(str_cat("the body is not valid JSON: ", status.message()));
  }
  if (root.kind_case() != Value::kStructValue) {
    throw InvalidArgumentError("the body must be a JSON object");
  }
  const auto& fields = root.struct_value().fields();
  PredictBody parsed;
  auto instances = fields.find("instances");
  auto inputs = fields.find("inputs");
  if ((instances == fields.end()) == (inputs == fields.end())) {
    throw InvalidArgumentError(
        "the body must have exactly one of \"instances\" (rows) and \"inputs\" (columns)");
  }
  parsed.row_format = instances != fields.end();
  parsed.data = parsed.row_format ? instances->second : inputs->second;
  auto signature = fields.find("signature_name");
  if (signature != fields.end()) {
    if (signature->second.kind_case() != Value::kStringValue) {
      throw InvalidArgumentError("\"signature_name\" must be a string");
    }
    parsed.signature_name = signature->second.string_value();
  }
  return parsed;
}

io::Features decode_inputs(const PredictBody& body, const TensorSpecs& specs) {
  return body.row_format ? decode_rows(body.data, specs) : decode_columns(body.data, specs);
}

std::string encode_predictions(const std::map<std::string, Tensor>& outputs, bool row_format) {
  std::map<std::string, std::vector<double>> values;
  for (const auto& [name, tensor] : outputs) values[name] = tensor.to_vector<double>();
  std::string out = row_format ? "{\"predictions\":" : "{\"outputs\":";
  bool single = outputs.size() == 1;
  if (row_format) {
    int64_t batch = outputs.empty() ? 0 : outputs.begin()->second.dim(0);
    out += '[';
    for (int64_t row = 0; row < batch; ++row) {
      if (row > 0) out += ',';
      if (!single) out += '{';
      bool first = true;
      for (const auto& [name, tensor] : outputs) {
        if (!single) out += str_cat(first ? "" : ",", json_quote(name), ":");
        first = false;
        std::vector<int64_t> dims(tensor.shape().dims().begin() + 1, tensor.shape().dims().end());
        int64_t offset = row * tensor.numel() / batch;
        append_nested(&out, values[name], tensor.dtype(), dims, 0, &offset);
      }
      if (!single) out += '}';
    }
    out += ']';
  } else {
    if (!single) out += '{';
    bool first = true;
    for (const auto& [name, tensor] : outputs) {
      if (!single) out += str_cat(first ? "" : ",", json_quote(name), ":");
      first = false;
      int64_t offset = 0;
      std::vector<int64_t> dims(tensor.shape().dims().begin(), tensor.shape().dims().end());
      append_nested(&out, values[name], tensor.dtype(), dims, 0, &offset);
    }
    if (!single) out += '}';
  }
  return out + "}";
}

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", u);
      out += escape;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace cadre::serving_internal
