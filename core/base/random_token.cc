#include "core/base/random_token.h"

#include <sys/random.h>

#include <cerrno>
#include <vector>

#include "cadre/base/errors.h"

namespace cadre {

std::string random_token(size_t bytes) {
  std::vector<unsigned char> drawn(bytes);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(drawn.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw UnavailableError("cannot draw random bytes from the kernel (getrandom)");
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes);
  for (unsigned char b : drawn) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

}  // namespace cadre
