// Small string helpers for building error messages (GCC 12 has no <format>), and the one
// parser of numbers read back from the framework's own text files.
#pragma once

#include <charconv>
#include <cstdlib>
#include <optional>
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

// What parse_double makes of a number beyond a double's range ("1e400", "1e-400").
enum class OutOfRange {
  kReject,    // nullopt
  kSaturate,  // what strtod gives: +-infinity, or +-0
};

// The double that all of `text` spells, independent of the locale: decimal or scientific
// notation ("-1.5", "1.7e+09"), "inf", "infinity" or "nan" in any case. Nullopt for anything
// else: empty text, surrounding space, a leading '+', hexadecimal, trailing characters.
inline std::optional<double> parse_double(std::string_view text,
                                          OutOfRange out_of_range = OutOfRange::kReject) {
  const char* end = text.data() + text.size();
  double value = 0;
  auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || stop != end) return std::nullopt;
  if (error == std::errc()) return value;
  if (error == std::errc::result_out_of_range && out_of_range == OutOfRange::kSaturate) {
    return std::strtod(std::string(text).c_str(), nullptr);
  }
  return std::nullopt;
}

}  // namespace cadre
