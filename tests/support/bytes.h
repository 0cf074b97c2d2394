// Byte strings written out by value, for tests of binary formats.
#pragma once

#include <initializer_list>
#include <string>

namespace cadre::testing {

// The string of these byte values (0-255).
inline std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

}  // namespace cadre::testing
