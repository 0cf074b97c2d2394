#include "strategies/sparse_rows.h"

#include "cadre/autodiff/tape.h"
#include "cadre/ops/array.h"
#include "io/element_codec.h"

namespace cadre {

IndexedSlices all_gather_rows(const StrategyExtended& extended, const IndexedSlices& mine) {
  NoGradScope no_grad;
  const Device home = mine.values.device();
  io::Element element;
  element.features.set("indices", to_device(cast(mine.indices, DType::kInt64), Device::cpu(0)));
  element.features.set("values", to_device(mine.values, Device::cpu(0)));
  std::string bytes;
  io::encode_element(element, bytes);
  std::vector<Tensor> indices, values;
  for (const std::string& theirs : extended.all_gather_bytes(std::move(bytes))) {
    size_t offset = 0;
    io::Element e = io::decode_element(theirs, offset, "a worker's gradient rows");
    indices.push_back(e.features.at("indices"));
    values.push_back(e.features.at("values"));
  }
  return IndexedSlices{to_device(concat(indices, 0), home), to_device(concat(values, 0), home),
                       mine.dense_shape};
}

}  // namespace cadre
