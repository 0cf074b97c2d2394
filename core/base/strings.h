// Small string helpers for building error messages (GCC 12 has no <format>).
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace cadre {

template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
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
