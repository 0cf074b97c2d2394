#include "cadre/io/example.h"

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstring>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "io/proto/example.pb.h"

namespace cadre::io {
namespace {

std::string_view type_name(FeatureType type) {
  switch (type) {
    case FeatureType::kBytes:
      return "bytes";
    case FeatureType::kFloat:
      return "float";
    case FeatureType::kInt64:
      return "int64";
  }
  return "?";
}

std::string_view kind_name(const proto::Feature& f) {
  switch (f.kind_case()) {
    case proto::Feature::kBytesList:
      return "bytes";
    case proto::Feature::kFloatList:
      return "float";
    case proto::Feature::kInt64List:
      return "int64";
    default:
      return "empty";
  }
}

// Checks the feature's list type; an empty Feature (no list) counts as an empty list of
// any type, as TensorFlow reads it.
void check_type(const std::string& name, const proto::Feature& f, FeatureType type) {
  bool ok = f.kind_case() == proto::Feature::KIND_NOT_SET ||
            (type == FeatureType::kBytes && f.has_bytes_list()) ||
            (type == FeatureType::kFloat && f.has_float_list()) ||
            (type == FeatureType::kInt64 && f.has_int64_list());
  if (!ok) {
    throw InvalidArgumentError(str_cat("Example feature '", name, "' holds a ", kind_name(f),
                                       " list where the spec expects ", type_name(type)));
  }
}

// The numeric values of a feature as a tensor of `shape` (1-D of their count when shape is
// null).
Tensor numeric_values(const proto::Feature& f, FeatureType type, const Shape* shape) {
  auto make = [&](const auto& list, DType dtype) {
    Shape s = shape ? *shape : Shape{static_cast<int64_t>(list.size())};
    return Tensor::from_bytes(list.data(), s, dtype);
  };
  if (type == FeatureType::kFloat) return make(f.float_list().value(), DType::kFloat32);
  return make(f.int64_list().value(), DType::kInt64);
}

int64_t value_count(const proto::Feature& f) {
  switch (f.kind_case()) {
    case proto::Feature::kBytesList:
      return f.bytes_list().value_size();
    case proto::Feature::kFloatList:
      return f.float_list().value_size();
    case proto::Feature::kInt64List:
      return f.int64_list().value_size();
    default:
      return 0;
  }
}

Tensor parse_fixed(const std::string& name, const proto::Feature& f, const FixedLenFeature& spec) {
  check_type(name, f, spec.type);
  int64_t expected = spec.type == FeatureType::kBytes ? 1 : spec.shape.num_elements();
  if (value_count(f) != expected) {
    throw InvalidArgumentError(str_cat("Example feature '", name, "' has ", value_count(f), " ",
                                       type_name(spec.type), " values where the spec's shape ",
                                       spec.shape, " needs ", expected));
  }
  if (spec.type == FeatureType::kBytes) return bytes_tensor(f.bytes_list().value(0));
  return numeric_values(f, spec.type, &spec.shape);
}

Tensor parse_var(const std::string& name, const proto::Feature& f, const VarLenFeature& spec) {
  check_type(name, f, spec.type);
  if (f.kind_case() == proto::Feature::KIND_NOT_SET) {
    return Tensor::empty({0}, spec.type == FeatureType::kFloat ? DType::kFloat32 : DType::kInt64,
                         Device::cpu(0));
  }
  return numeric_values(f, spec.type, nullptr);
}

void validate(const FeatureSpec& spec) {
  for (const auto& [name, entry] : spec) {
    if (const auto* fixed = std::get_if<FixedLenFeature>(&entry)) {
      if (fixed->type == FeatureType::kBytes && fixed->shape.rank() != 0) {
        throw InvalidArgumentError(str_cat("feature spec '", name, "': a bytes feature holds one ",
                                           "string (shape []), not shape ", fixed->shape));
      }
      if (fixed->default_value.defined() && fixed->type != FeatureType::kBytes &&
          fixed->default_value.shape() != fixed->shape) {
        throw InvalidArgumentError(str_cat("feature spec '", name, "': default value of shape ",
                                           fixed->default_value.shape(), " for shape ",
                                           fixed->shape));
      }
    }
  }
}

}  // namespace

Features parse_example(std::string_view serialized, const FeatureSpec& spec) {
  validate(spec);
  google::protobuf::Arena arena;
  auto* example = google::protobuf::Arena::CreateMessage<proto::Example>(&arena);
  if (!example->ParseFromArray(serialized.data(), static_cast<int>(serialized.size()))) {
    throw InvalidArgumentError(
        str_cat("cannot parse ", serialized.size(), " bytes as a tf.train.Example"));
  }
  const auto& map = example->features().feature();
  Features out;
  for (const auto& [name, entry] : spec) {
    auto found = map.find(name);
    if (const auto* fixed = std::get_if<FixedLenFeature>(&entry)) {
      if (found != map.end()) {
        out.set(name, parse_fixed(name, found->second, *fixed));
      } else if (fixed->default_value.defined()) {
        out.set(name, fixed->default_value);
      } else {
        throw InvalidArgumentError(str_cat("Example lacks the required feature '", name, "' (",
                                           type_name(fixed->type), ", shape ", fixed->shape, ")"));
      }
    } else {
      static const proto::Feature kEmpty;
      const proto::Feature& f = found != map.end() ? found->second : kEmpty;
      const VarLenFeature& var = std::get<VarLenFeature>(entry);
      if (var.type == FeatureType::kBytes) {
        check_type(name, f, var.type);
        set_string_list(out, name, {f.bytes_list().value().begin(), f.bytes_list().value().end()});
      } else {
        out.set(name, parse_var(name, f, var));
      }
    }
  }
  return out;
}

Dataset::MapFn example_parser(FeatureSpec spec, std::string label_key) {
  validate(spec);
  if (!label_key.empty() && !spec.count(label_key)) {
    throw InvalidArgumentError(
        str_cat("example_parser: the label key '", label_key, "' is not in the feature spec"));
  }
  return [spec = std::move(spec), label_key = std::move(label_key)](Element e) {
    Features features = parse_example(tensor_bytes(e.value()), spec);
    Element out(std::move(features));
    if (!label_key.empty()) {
      out.labels = out.features.at(label_key);
      out.features.erase(label_key);
    }
    return out;
  };
}

Tensor decode_raw(const Tensor& bytes, DType dtype) {
  if (bytes.dtype() != DType::kUInt8 || bytes.rank() != 1) {
    throw InvalidArgumentError(str_cat("decode_raw: expected a uint8 [n] byte string, got ",
                                       bytes.dtype(), " ", bytes.shape()));
  }
  size_t size = dtype_size(dtype);
  if (bytes.numel() % static_cast<int64_t>(size) != 0) {
    throw InvalidArgumentError(str_cat("decode_raw: ", bytes.numel(), " bytes are not a whole ",
                                       "number of ", dtype, " elements"));
  }
  std::string raw = tensor_bytes(bytes);
  return Tensor::from_bytes(raw.data(), Shape{bytes.numel() / static_cast<int64_t>(size)}, dtype);
}

ExampleBuilder& ExampleBuilder::add_int64s(const std::string& name, std::vector<int64_t> values) {
  features_[name] = std::move(values);
  return *this;
}

ExampleBuilder& ExampleBuilder::add_floats(const std::string& name, std::vector<float> values) {
  features_[name] = std::move(values);
  return *this;
}

ExampleBuilder& ExampleBuilder::add_bytes(const std::string& name,
                                          std::vector<std::string> values) {
  features_[name] = std::move(values);
  return *this;
}

std::string ExampleBuilder::serialize() const {
  proto::Example example;
  auto* map = example.mutable_features()->mutable_feature();
  for (const auto& [name, values] : features_) {
    proto::Feature& f = (*map)[name];
    if (const auto* b = std::get_if<std::vector<std::string>>(&values)) {
      f.mutable_bytes_list();  // set even when empty, so the type survives
      for (const std::string& s : *b) f.mutable_bytes_list()->add_value(s);
    } else if (const auto* fl = std::get_if<std::vector<float>>(&values)) {
      f.mutable_float_list()->mutable_value()->Add(fl->begin(), fl->end());
    } else {
      const auto& ints = std::get<std::vector<int64_t>>(values);
      f.mutable_int64_list()->mutable_value()->Add(ints.begin(), ints.end());
    }
  }
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);  // map entries sorted by key
    example.SerializeToCodedStream(&coded);
  }
  return out;
}

}  // namespace cadre::io
