// Unguessable tokens: job secrets and names no other process may predict.
#pragma once

#include <cstddef>
#include <string>

namespace cadre {

// `bytes` random bytes from the kernel (getrandom), as lowercase hex. Throws UnavailableError
// when the kernel has none to give.
std::string random_token(size_t bytes = 32);

}  // namespace cadre
