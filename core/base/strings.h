// Small string helpers for building error messages (GCC 12 has no <format>).
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

namespace cadre {

template <typename... Args>
std::string str_cat(const Args&... args) {
  if constexpr ((std::is_convertible_v<const Args&, std::string_view> && ...)) {
    // Only text: appended directly. A stream costs a locale's set-up per call, and keys
    // of iterator states and checkpoints are built this way on the training thread.
    std::string out;
    out.reserve((std::string_view(args).size() + ... + 0));
    (out.append(std::string_view(args)), ...);
    return out;
  } else {
    std::ostringstream out;
    (out << ... << args);
    return out.str();
  }
}

// "a, b, c" from any range whose elements stream with <<.
template <typename Range>
std::string join(const Range& items, std::string_view separator = ", ") {
  std::ostringstream out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out << separator;
    out << item;
    first = false;
  }
  return out.str();
}

}  // namespace cadre
