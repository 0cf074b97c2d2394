#include "estimator/progress_text.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

namespace cadre::estimator_internal {

std::string human_count(double value) {
  char text[32];
  if (value >= 1e6) {
    std::snprintf(text, sizeof text, "%.2fM", value / 1e6);
  } else if (value >= 1e3) {
    std::snprintf(text, sizeof text, "%.1fk", value / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%.0f", value);
  }
  return text;
}

std::optional<std::string> eta_text(double seconds) {
  constexpr double kMinute = 60, kHour = 3600, kDay = 86400, kYear = 365.25 * kDay;
  if (!std::isfinite(seconds) || seconds > 100 * kYear) return std::nullopt;
  if (seconds < 0) seconds = 0;
  // Whole seconds, truncated (the line has always said "ETA 0s" in the last second).
  const auto whole = static_cast<int64_t>(seconds);
  char text[32];
  if (seconds < kMinute) {
    std::snprintf(text, sizeof text, "%llds", static_cast<long long>(whole));
  } else if (seconds < kHour) {
    std::snprintf(text, sizeof text, "%lldm%02llds", static_cast<long long>(whole / 60),
                  static_cast<long long>(whole % 60));
  } else if (seconds < kDay) {
    std::snprintf(text, sizeof text, "%lldh%02lldm", static_cast<long long>(whole / 3600),
                  static_cast<long long>(whole % 3600 / 60));
  } else if (seconds < kYear) {
    std::snprintf(text, sizeof text, "%.1fd", seconds / kDay);
  } else {
    std::snprintf(text, sizeof text, "%.1fy", seconds / kYear);
  }
  return std::string(text);
}

}  // namespace cadre::estimator_internal
