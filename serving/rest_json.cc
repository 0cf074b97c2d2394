#include "serving/rest_json.h"

#include <rapidjson/error/en.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::serving_internal {

namespace {

using rapidjson::Value;

// Rejects nesting past `max_depth` (ServingOptions::max_json_depth) before the body is parsed.
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

// The SAX events of a parse, passed on to `Handler` (the Document being built), with every
// number converted here from its text (RapidJSON's kParseNumbersAsStringsFlag): integers by
// from_chars, the rest as strtod rounds them. RapidJSON 1.1.0's own conversion is wrong for
// some inputs: in full precision a zero with more than 22 decimals came out 3.5e-46, and
// 0.0000001844674407370955161570000232 came out 1.29e-26 (its significand overflowed to
// zero: found by the rest_request fuzzer, whose UBSan saw clz(0)); without it, up to an ulp
// off (2.2250738585072011e-308).
template <typename Handler>
class ExactNumbers {
 public:
  explicit ExactNumbers(Handler& next) : next_(next) {}

  bool RawNumber(const char* text, rapidjson::SizeType length, bool) {
    std::string_view number(text, length);
    if (number == "NaN") return next_.Double(std::numeric_limits<double>::quiet_NaN());
    if (number == "Infinity" || number == "-Infinity") {
      return next_.Double(number[0] == '-' ? -std::numeric_limits<double>::infinity()
                                           : std::numeric_limits<double>::infinity());
    }
    const char* end = text + length;
    if (number.find_first_of(".eE") == std::string_view::npos) {
      if (number[0] == '-') {
        int64_t value = 0;
        if (std::from_chars(text, end, value).ptr == end) return next_.Int64(value);
      } else {
        uint64_t value = 0;
        if (std::from_chars(text, end, value).ptr == end) return next_.Uint64(value);
      }
    }
    double value = 0;
    auto [stop, error] = std::from_chars(text, end, value);
    if (error == std::errc::result_out_of_range) {
      // Too small is zero (or the nearest subnormal), as strtod reads it; too large is an error.
      value = std::strtod(std::string(number).c_str(), nullptr);
      if (std::isinf(value)) {
        out_of_range_ = std::string(number);
        return false;
      }
      return next_.Double(value);
    }
    if (stop != end || error != std::errc()) return false;  // the reader checked the grammar
    return next_.Double(value);
  }
  const std::string& out_of_range() const { return out_of_range_; }

  bool Null() { return next_.Null(); }
  bool Bool(bool value) { return next_.Bool(value); }
  bool Int(int value) { return next_.Int(value); }
  bool Uint(unsigned value) { return next_.Uint(value); }
  bool Int64(int64_t value) { return next_.Int64(value); }
  bool Uint64(uint64_t value) { return next_.Uint64(value); }
  bool Double(double value) { return next_.Double(value); }
  bool String(const char* text, rapidjson::SizeType length, bool copy) {
    return next_.String(text, length, copy);
  }
  bool StartObject() { return next_.StartObject(); }
  bool Key(const char* text, rapidjson::SizeType length, bool copy) {
    return next_.Key(text, length, copy);
  }
  bool EndObject(rapidjson::SizeType members) { return next_.EndObject(members); }
  bool StartArray() { return next_.StartArray(); }
  bool EndArray(rapidjson::SizeType elements) { return next_.EndArray(elements); }

 private:
  Handler& next_;
  std::string out_of_range_;
};

const char* kind_name(const Value& value) {
  if (value.IsNumber()) return "a number";
  if (value.IsBool()) return "a boolean";
  if (value.IsString()) return "a string";
  if (value.IsArray()) return "a list";
  if (value.IsObject()) return "an object";
  return "null";
}

// The member `name` of an object, or null.
const Value* member(const Value& object, const std::string& name) {
  auto found = object.FindMember(rapidjson::StringRef(name.data(), name.size()));
  return found == object.MemberEnd() ? nullptr : &found->value;
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
    if (value.IsNumber() && dtype != DType::kBool) {
      double number = value.GetDouble();
      if (!is_floating(dtype) && !fits_integer(number, dtype)) {
        throw InvalidArgumentError(
            str_cat(where, ": ", number, " is not an integer that ", dtype_name(dtype), " holds"));
      }
      out->push_back(number);
      return;
    }
    if (value.IsBool() && dtype == DType::kBool) {
      out->push_back(value.GetBool() ? 1 : 0);
      return;
    }
    throw InvalidArgumentError(str_cat(where, ": expected ",
                                       dtype == DType::kBool ? "a boolean" : "a number", " (",
                                       dtype_name(dtype), "), got ", kind_name(value)));
  }
  if (!value.IsArray() || static_cast<int64_t>(value.Size()) != shape[axis]) {
    std::string got =
        value.IsArray() ? str_cat("a list of ", value.Size()) : std::string(kind_name(value));
    throw InvalidArgumentError(
        str_cat(where, ": expected a list of ", shape[axis], " values, got ", got));
  }
  for (const Value& item : value.GetArray()) {
    flatten(item, shape, axis + 1, dtype, where, out);
  }
}

Tensor to_tensor(const std::vector<double>& values, std::vector<int64_t> dims, DType dtype) {
  return Tensor::from_vector(values, Shape(dims)).cast(dtype);
}

io::Features decode_rows(const Value& instances, const TensorSpecs& specs) {
  if (!instances.IsArray() || instances.Empty()) {
    throw InvalidArgumentError("\"instances\" must be a non-empty list, one entry per example");
  }
  int64_t batch = instances.Size();
  io::Features features;
  for (const auto& [name, spec] : specs) {
    std::vector<double> values;
    for (int64_t i = 0; i < batch; ++i) {
      const Value& row = instances[static_cast<rapidjson::SizeType>(i)];
      std::string where = str_cat("input '", name, "' of instances[", i, "]");
      const Value* item = &row;
      if (row.IsObject()) {
        item = member(row, name);
        if (!item)
          throw InvalidArgumentError(str_cat("instances[", i, "] has no input '", name, "'"));
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
    if (inputs.IsObject()) {
      item = member(inputs, name);
      if (!item) throw InvalidArgumentError(str_cat("\"inputs\" has no input '", name, "'"));
    } else if (specs.size() > 1) {
      throw InvalidArgumentError(
          str_cat("\"inputs\" must be an object naming the ", specs.size(), " inputs"));
    }
    if (!item->IsArray() || item->Empty()) {
      throw InvalidArgumentError(
          str_cat("input '", name, "' must be a non-empty list, the batch first"));
    }
    int64_t rows = item->Size();
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

std::shared_ptr<rapidjson::Document> parse_json_object(std::string_view body, int max_depth) {
  check_depth(body, max_depth);
  // In situ: the parse reads a copy of the body that the document keeps (its strings point
  // into it), and hands each number's text over without copying it (the numbers as strings
  // cost 25% more time per body when RapidJSON copied them twice). Numbers as text,
  // converted exactly by ExactNumbers. Iterative: no recursion, whatever the nesting. NaN and
  // Infinity: as encode_predictions writes them (TensorFlow Serving takes them too).
  struct Parsed {
    std::string text;
    rapidjson::Document document;
  };
  // The in-situ stream ends at a NUL byte, which JSON never holds outside strings (escaped
  // as \u0000 inside them).
  if (body.find('\0') != std::string_view::npos) {
    throw InvalidArgumentError(
        str_cat("the body is not valid JSON: a NUL byte at byte ", body.find('\0')));
  }
  auto parsed = std::make_shared<Parsed>();
  // Padded: RapidJSON's UTF-8 validation takes a truncated sequence's continuation bytes
  // without looking for the end (the fuzzer read past a bare terminator); a sequence is at
  // most 4 bytes, so it stops inside the padding, which fails the validation.
  parsed->text.assign(body.data(), body.size());
  parsed->text.append(8, '\0');
  std::shared_ptr<rapidjson::Document> document(parsed, &parsed->document);
  constexpr unsigned kFlags = rapidjson::kParseInsituFlag | rapidjson::kParseNumbersAsStringsFlag |
                              rapidjson::kParseIterativeFlag | rapidjson::kParseNanAndInfFlag |
                              rapidjson::kParseValidateEncodingFlag;
  rapidjson::ParseResult result;
  std::string out_of_range;
  auto generate = [&](rapidjson::Document& handler) {
    ExactNumbers<rapidjson::Document> numbers(handler);
    rapidjson::InsituStringStream stream(parsed->text.data());
    rapidjson::Reader reader;
    result = reader.Parse<kFlags>(stream, numbers);
    out_of_range = numbers.out_of_range();
    return !result.IsError();
  };
  document->Populate(generate);
  if (!out_of_range.empty()) {
    throw InvalidArgumentError(str_cat("the number ", out_of_range.substr(0, 40),
                                       " is out of a double's range (at byte ", result.Offset(),
                                       ")"));
  }
  if (result.IsError()) {
    throw InvalidArgumentError(
        str_cat("the body is not valid JSON: ", rapidjson::GetParseError_En(result.Code()),
                " (at byte ", result.Offset(), ")"));
  }
  if (!document->IsObject()) throw InvalidArgumentError("the body must be a JSON object");
  return document;
}

const rapidjson::Value* json_member(const rapidjson::Value& object, const std::string& name) {
  return member(object, name);
}

PredictBody parse_predict_body(std::string_view body, int max_depth) {
  std::shared_ptr<rapidjson::Document> document = parse_json_object(body, max_depth);
  const Value* instances = member(*document, "instances");
  const Value* inputs = member(*document, "inputs");
  if (!instances == !inputs) {
    throw InvalidArgumentError(
        "the body must have exactly one of \"instances\" (rows) and \"inputs\" (columns)");
  }
  PredictBody parsed;
  parsed.row_format = instances != nullptr;
  parsed.data = instances ? instances : inputs;
  if (const Value* signature = member(*document, "signature_name")) {
    if (!signature->IsString()) throw InvalidArgumentError("\"signature_name\" must be a string");
    parsed.signature_name.assign(signature->GetString(), signature->GetStringLength());
  }
  parsed.document = std::move(document);
  return parsed;
}

io::Features decode_inputs(const PredictBody& body, const TensorSpecs& specs) {
  return body.row_format ? decode_rows(*body.data, specs) : decode_columns(*body.data, specs);
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
