#include "core/runtime/memory.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace cadre {

namespace {

// A limit file's number; 0 when absent or "max".
uint64_t read_limit(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    return 0;
  }
}

uint64_t compute_limit() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page_size = ::sysconf(_SC_PAGE_SIZE);
  uint64_t limit = pages > 0 && page_size > 0
                       ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                       : UINT64_MAX;
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    uint64_t cgroup = read_limit(path);
    if (cgroup > 0 && cgroup < limit) limit = cgroup;
  }
  return limit;
}

}  // namespace

uint64_t memory_limit_bytes() {
  static const uint64_t limit = compute_limit();
  return limit;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) {
    bytes /= 1024;
    ++unit;
  }
  char text[48];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

}  // namespace cadre
