#include "cadre/io/iterator_state.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "io/element_codec.h"

namespace cadre::io {

StateWriter StateWriter::child(std::string_view name) const {
  return StateWriter(*state_, str_cat(prefix_, name, "/"));
}

void StateWriter::write_int(std::string_view key, int64_t value) {
  (*state_)[str_cat(prefix_, key)] = Tensor::scalar<int64_t>(value);
}

void StateWriter::write_string(std::string_view key, std::string_view value) {
  (*state_)[str_cat(prefix_, key)] = bytes_tensor(value);
}

void StateWriter::write_elements(std::string_view key, const std::vector<Element>& elements) {
  write_string(key, encode_elements(elements));
}

void StateWriter::write_all(const IteratorState& state) {
  for (const auto& [key, value] : state) (*state_)[str_cat(prefix_, key)] = value;
}

void StateWriter::adopt(IteratorState&& state) {
  state_->merge(state);
  for (auto& [key, value] : state) (*state_)[key] = std::move(value);  // keys written before
  state.clear();
}

StateReader StateReader::child(std::string_view name) const {
  return StateReader(*state_, str_cat(prefix_, name, "/"));
}

std::string StateReader::full_key(std::string_view key) const { return str_cat(prefix_, key); }

bool StateReader::contains(std::string_view key) const { return state_->count(full_key(key)) > 0; }

const Tensor& StateReader::get(std::string_view key) const {
  auto it = state_->find(full_key(key));
  if (it == state_->end()) {
    throw InvalidArgumentError(str_cat("iterator state has no entry '", full_key(key),
                                       "': was it saved from this same input pipeline?"));
  }
  return it->second;
}

int64_t StateReader::read_int(std::string_view key) const {
  const Tensor& t = get(key);
  if (t.numel() != 1 || !is_integral(t.dtype())) {
    throw InvalidArgumentError(str_cat("iterator state entry '", full_key(key),
                                       "' should be an integer scalar, not ", t.dtype(), " ",
                                       t.shape()));
  }
  return t.item<int64_t>();
}

std::string StateReader::read_string(std::string_view key) const {
  const Tensor& t = get(key);
  if (t.dtype() != DType::kUInt8 || t.rank() != 1) {
    throw InvalidArgumentError(str_cat("iterator state entry '", full_key(key),
                                       "' should be a uint8 byte string, not ", t.dtype(), " ",
                                       t.shape()));
  }
  return tensor_bytes(t);
}

std::vector<Element> StateReader::read_elements(std::string_view key) const {
  return decode_elements(read_string(key), str_cat("iterator state entry '", full_key(key), "'"));
}

}  // namespace cadre::io
