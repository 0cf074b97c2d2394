// The .index file of a TensorFlow checkpoint: its table (blocks, checksums, handles, prefix-
// compressed keys) and the bundle entries in it. Random bytes rarely pass a block's CRC, so
// half the inputs are first laid out as a valid table of entries (the input split at '\n'
// into key, value, key, value, ...), which takes the fuzzer past the checksums into the
// entries' protos and their checks.
#include <cstdint>
#include <string>
#include <string_view>

#include "cadre/base/errors.h"
#include "checkpoint/tf_bundle.h"
#include "checkpoint/tf_table.h"

namespace {

std::string as_table(std::string_view input) {
  cadre::checkpoint::internal::TableEntries entries;
  std::string key;
  bool have_key = false;
  while (!input.empty()) {
    size_t end = input.find('\n');
    std::string field(input.substr(0, end));
    input.remove_prefix(end == std::string_view::npos ? input.size() : end + 1);
    if (!have_key) {
      key = std::move(field);
      have_key = true;
      continue;
    }
    if (entries.empty() || entries.back().first < key) entries.emplace_back(key, std::move(field));
    have_key = false;
  }
  return cadre::checkpoint::internal::build_table(entries, /*block_bytes=*/64);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  try {
    if (!input.empty() && input.front() == 'T') {
      cadre::checkpoint::internal::parse_tf_bundle_index(as_table(input.substr(1)), "fuzz.index");
    } else {
      cadre::checkpoint::internal::parse_tf_bundle_index(input, "fuzz.index");
    }
  } catch (const cadre::Error&) {
  }
  return 0;
}
