// Origins in iterator state (saved_elements.cc): a checkpoint's bytes decide which
// elements a restored pipeline fetches again, through every stage that fetches (batch,
// map, interleave, sources). The first byte picks the entry replaced by the rest. With its
// high bit set, the rest (up to 8 bytes, little-endian) is instead the number of rows a
// shuffle of rows draws again on restore (shuffle.cc). With 0x40 set instead, the bytes
// change an entry of an input read as virtual shards (io/virtual_shards.h), whose state a
// job of another number of workers restores (data[1] picks the entry; the rest is its value,
// a number or bytes by data[1]'s high bit).
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "cadre/base/errors.h"
#include "cadre/io/dataset.h"
#include "cadre/ops/array.h"
#include "io/virtual_shards.h"

namespace {

using cadre::io::Dataset;
using cadre::io::Element;

Dataset pipeline() {
  return Dataset::range(6)
      .interleave(
          [](const Element& e) { return Dataset::range(e.value().item<int64_t>() * 10, 60); }, 2)
      .map([](Element e) { return e; }, 2)
      .shuffle(8, 1)
      .repeat(2)
      .batch(3)
      .prefetch(2);
}

Dataset rows() {
  return Dataset::from_tensor_slices(cadre::range(0, 60, 1, cadre::DType::kInt64))
      .shuffle(8, 1)
      .repeat(2)
      .batch(3);
}

void restore_and_draw(Dataset (*make)(), const cadre::io::IteratorState& state) {
  try {
    cadre::io::Iterator restored = make().make_iterator();
    restored.restore(state);
    for (int i = 0; i < 8 && restored.next(); ++i) {
    }
  } catch (const cadre::Error&) {
  }
}

void replay_count(const uint8_t* data, size_t size) {
  cadre::io::Iterator original = rows().make_iterator();
  for (int i = 0; i < 4; ++i) original.next();
  cadre::io::IteratorState state = original.save();
  uint64_t count = 0;
  for (size_t i = 0; i < size && i < 8; ++i) count |= uint64_t{data[i]} << (8 * i);
  for (auto& [name, tensor] : state) {
    if (name.ends_with("replay")) {
      tensor = cadre::Tensor::scalar<int64_t>(static_cast<int64_t>(count));
    }
  }
  restore_and_draw(&rows, state);
}

Dataset numbers() { return Dataset::range(64).shard(8, 2).shuffle(8, 1).repeat(2).batch(2); }

Dataset two_shards() { return cadre::io::read_virtual_shards(numbers(), 8, 2, 4).dataset; }

// As a worker that steps alone reads them: each shard to its end.
Dataset two_shards_to_their_ends() {
  return cadre::io::read_virtual_shards(numbers(), 8, 2, 4, /*part_rows=*/false,
                                        /*to_every_end=*/true)
      .dataset;
}

void resized_shards(const uint8_t* data, size_t size) {
  if (size < 2) return;
  cadre::io::Iterator original =
      cadre::io::read_virtual_shards(numbers(), 8, 2, 5).dataset.make_iterator();
  for (int i = 0; i < 3; ++i) original.next();
  cadre::io::IteratorState state = original.save();
  auto entry = state.begin();
  std::advance(entry, (data[0] & 0x7f) % state.size());
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 0x80) {
    entry->second = cadre::io::bytes_tensor(rest);
  } else {
    int64_t value = 0;
    for (size_t i = 0; i < rest.size() && i < 8; ++i) {
      value |= static_cast<int64_t>(static_cast<uint8_t>(rest[i])) << (8 * i);
    }
    entry->second = cadre::Tensor::scalar<int64_t>(value);
  }
  try {
    cadre::io::saved_virtual_shards(state);
  } catch (const cadre::Error&) {
  }
  restore_and_draw(&two_shards, state);
  restore_and_draw(&two_shards_to_their_ends, state);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 0x40) {
    resized_shards(data + 1, size - 1);
    return 0;
  }
  if (data[0] & 0x80) {
    replay_count(data + 1, size - 1);
    return 0;
  }
  cadre::io::Iterator original = pipeline().make_iterator();
  for (int i = 0; i < 4; ++i) original.next();
  cadre::io::IteratorState state = original.save();
  std::string key;
  int which = data[0] % 3;
  for (const auto& [name, tensor] : state) {
    if (name.size() >= 8 && name.compare(name.size() - 8, 8, "_origins") == 0 && which-- == 0) {
      key = name;
    }
  }
  if (key.empty()) return 0;
  state[key] =
      cadre::io::bytes_tensor(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  restore_and_draw(&pipeline, state);
  return 0;
}
