#include "io/element_codec.h"

#include <cstring>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::io {
namespace {

constexpr char kMagic[4] = {'C', 'D', 'E', '1'};

template <typename T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86-64 and aarch64 are little-endian
  out.append(bytes, sizeof(T));
}

class Cursor {
 public:
  Cursor(std::string_view bytes, size_t& offset, std::string_view what)
      : bytes_(bytes), offset_(offset), what_(what) {}

  const char* take(size_t n, std::string_view field) {
    if (bytes_.size() - offset_ < n) {
      throw DataLossError(str_cat("encoded elements in ", what_, " are truncated at byte offset ",
                                  offset_, ": ", field, " needs ", n, " bytes, ",
                                  bytes_.size() - offset_, " remain"));
    }
    const char* p = bytes_.data() + offset_;
    offset_ += n;
    return p;
  }
  template <typename T>
  T get(std::string_view field) {
    T value;
    std::memcpy(&value, take(sizeof(T), field), sizeof(T));
    return value;
  }
  [[noreturn]] void fail(std::string_view problem) const {
    throw DataLossError(str_cat("encoded elements in ", what_, " are damaged at byte offset ",
                                offset_, ": ", problem));
  }

 private:
  std::string_view bytes_;
  size_t& offset_;
  std::string_view what_;
};

void encode_tensor(const Tensor& tensor, std::string& out) {
  Tensor host = tensor.device().is_cpu() ? tensor.contiguous() : tensor.to(Device::cpu(0));
  put<uint8_t>(out, static_cast<uint8_t>(host.dtype()));
  put<uint8_t>(out, static_cast<uint8_t>(host.rank()));
  for (int64_t d : host.shape()) put<int64_t>(out, d);
  put<uint64_t>(out, host.nbytes());
  if (host.nbytes() > 0) out.append(static_cast<const char*>(host.raw_data()), host.nbytes());
}

Tensor decode_tensor(Cursor& in) {
  auto dtype_code = in.get<uint8_t>("dtype");
  if (dtype_code > static_cast<uint8_t>(DType::kFloat16)) in.fail("unknown dtype code");
  auto dtype = static_cast<DType>(dtype_code);
  int rank = in.get<uint8_t>("rank");
  if (rank > Shape::kMaxRank) in.fail(str_cat("rank ", rank, " exceeds ", Shape::kMaxRank));
  Shape shape;
  for (int d = 0; d < rank; ++d) {
    int64_t size = in.get<int64_t>("dimension");
    if (size < 0) in.fail("negative dimension");
    shape.push_back(size);
  }
  auto nbytes = in.get<uint64_t>("byte count");
  if (nbytes != static_cast<uint64_t>(shape.num_elements()) * dtype_size(dtype)) {
    in.fail(str_cat("byte count ", nbytes, " does not match shape ", shape, " of ", dtype));
  }
  const char* data = in.take(nbytes, "tensor data");
  return Tensor::from_bytes(data, shape, dtype);
}

}  // namespace

void encode_element(const Element& element, std::string& out) {
  put<uint32_t>(out, static_cast<uint32_t>(element.features.size()));
  for (const auto& [name, tensor] : element.features) {
    put<uint32_t>(out, static_cast<uint32_t>(name.size()));
    out.append(name);
    encode_tensor(tensor, out);
  }
  put<uint8_t>(out, element.has_labels() ? 1 : 0);
  if (element.has_labels()) encode_tensor(element.labels, out);
}

Element decode_element(std::string_view bytes, size_t& offset, std::string_view what) {
  Cursor in(bytes, offset, what);
  Element element;
  auto count = in.get<uint32_t>("feature count");
  for (uint32_t i = 0; i < count; ++i) {
    auto length = in.get<uint32_t>("name length");
    std::string name(in.take(length, "feature name"), length);
    element.features.set(std::move(name), decode_tensor(in));
  }
  if (in.get<uint8_t>("label flag") != 0) element.labels = decode_tensor(in);
  return element;
}

std::string encode_elements(const std::vector<Element>& elements) {
  std::string out(kMagic, sizeof(kMagic));
  put<uint64_t>(out, elements.size());
  for (const Element& e : elements) encode_element(e, out);
  return out;
}

std::vector<Element> decode_elements(std::string_view bytes, std::string_view what) {
  size_t offset = 0;
  Cursor in(bytes, offset, what);
  if (std::memcmp(in.take(sizeof(kMagic), "magic"), kMagic, sizeof(kMagic)) != 0) {
    offset = 0;
    in.fail("not an element encoding (bad magic)");
  }
  auto count = in.get<uint64_t>("element count");
  std::vector<Element> out;
  for (uint64_t i = 0; i < count; ++i) out.push_back(decode_element(bytes, offset, what));
  if (offset != bytes.size()) in.fail("trailing bytes after the last element");
  return out;
}

}  // namespace cadre::io
