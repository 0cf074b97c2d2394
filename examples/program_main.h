// The main() the example programs share: flags, glog to stderr, and any error as one line
// "<program>: <message>" on stderr with exit status 1 (CONTRACTS.md: no trace, no abort).
#pragma once

#include <functional>

namespace cadre::examples {

int program_main(int argc, char** argv, const char* usage, const std::function<int()>& run);

}  // namespace cadre::examples
