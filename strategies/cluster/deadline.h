// gRPC deadlines from the timeouts in seconds that Cadre's options hold.
#pragma once

#include <chrono>

namespace cadre {

// The system-clock time `seconds` from now, as grpc::ClientContext::set_deadline and
// Channel::WaitForConnected take it.
inline std::chrono::system_clock::time_point deadline_after(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(seconds));
}

}  // namespace cadre
