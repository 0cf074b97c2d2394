// tf.train.Example protocol buffers parsed by a spec with every kind of feature.
#include <cstdint>
#include <string_view>

#include "cadre/base/errors.h"
#include "cadre/io/example.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cadre::io;
  static const FeatureSpec spec = {
      {"image", FixedLenFeature(FeatureType::kFloat, cadre::Shape{2, 2})},
      {"label",
       FixedLenFeature(FeatureType::kInt64, cadre::Shape{}, cadre::Tensor::scalar<int64_t>(-1))},
      {"name", FixedLenFeature(FeatureType::kBytes, cadre::Shape{})},
      {"ids", VarLenFeature{FeatureType::kInt64}},
      {"weights", VarLenFeature{FeatureType::kFloat}},
      {"tags", VarLenFeature{FeatureType::kBytes}},
  };
  try {
    parse_example(std::string_view(reinterpret_cast<const char*>(data), size), spec);
  } catch (const cadre::Error&) {
  }
  return 0;
}
