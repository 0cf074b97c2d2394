#include "strategies/collectives/gloo/socket_watchdog.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace cadre {

namespace {

// An endpoint's address and port, comparable byte for byte ("" when it has none).
std::string endpoint(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    return std::string(reinterpret_cast<const char*>(&in.sin_addr), sizeof in.sin_addr) +
           std::string(reinterpret_cast<const char*>(&in.sin_port), sizeof in.sin_port);
  }
  if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    return std::string(reinterpret_cast<const char*>(&in6.sin6_addr), sizeof in6.sin6_addr) +
           std::string(reinterpret_cast<const char*>(&in6.sin6_port), sizeof in6.sin6_port);
  }
  return "";
}

// "0100007F:1F90" in /proc/net/tcp (or the 32 hex digits of tcp6): the address's 32-bit
// words as the host prints them, then the port in host order. As endpoint() bytes.
std::string endpoint_from_proc(const std::string& text) {
  size_t colon = text.find(':');
  if (colon == std::string::npos || (colon != 8 && colon != 32)) return "";
  std::string bytes;
  for (size_t at = 0; at < colon; at += 8) {
    uint32_t word = static_cast<uint32_t>(std::strtoul(text.substr(at, 8).c_str(), nullptr, 16));
    bytes.append(reinterpret_cast<const char*>(&word), sizeof word);  // the kernel's own bytes
  }
  uint16_t port = htons(static_cast<uint16_t>(std::strtoul(text.c_str() + colon + 1, nullptr, 16)));
  bytes.append(reinterpret_cast<const char*>(&port), sizeof port);
  return bytes;
}

// Each TCP socket of this network namespace, by inode: its local and remote endpoints.
std::map<std::string, std::pair<std::string, std::string>> tcp_sockets() {
  std::map<std::string, std::pair<std::string, std::string>> sockets;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      if (fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode) {
        sockets[inode] = {endpoint_from_proc(local), endpoint_from_proc(remote)};
      }
    }
  }
  return sockets;
}

// The inode of the socket `fd` names ("" for anything else), read from /proc, not by a call
// on the descriptor, which other threads may be opening or closing meanwhile.
std::string socket_inode(int fd) {
  char target[64];
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return "";
  std::string text(target, static_cast<size_t>(n));
  if (text.rfind("socket:[", 0) != 0 || text.back() != ']') return "";
  return text.substr(8, text.size() - 9);
}

}  // namespace

std::vector<std::string> listener_endpoints(const std::string& rendezvous_bytes) {
  constexpr size_t kRecord = sizeof(sockaddr_storage) + sizeof(int64_t);
  std::vector<std::string> endpoints;
  if (rendezvous_bytes.size() % kRecord != 0) return endpoints;
  for (size_t at = 0; at < rendezvous_bytes.size(); at += kRecord) {
    sockaddr_storage address;
    std::memcpy(&address, rendezvous_bytes.data() + at, sizeof address);
    if (std::string e = endpoint(address); !e.empty()) endpoints.push_back(std::move(e));
  }
  return endpoints;
}

SocketWatchdog::SocketWatchdog(const std::set<std::string>& listeners,
                               std::function<std::string()> failure)
    : failure_(std::move(failure)) {
  if (listeners.empty()) return;
  DIR* fds = ::opendir("/proc/self/fd");
  if (fds == nullptr) {
    LOG(WARNING) << "gloo: /proc/self/fd unreadable; a hung peer is seen only at the timeout";
    return;
  }
  const auto tcp = tcp_sockets();
  while (dirent* entry = ::readdir(fds)) {
    char* end = nullptr;
    long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    auto it = tcp.find(socket_inode(static_cast<int>(fd)));
    if (it == tcp.end()) continue;
    const auto& [local, remote] = it->second;
    // A pair's socket was accepted by this process's listener, or connected to a peer's;
    // a listening socket has no remote end.
    if (remote.find_first_not_of('\0') != std::string::npos &&
        (listeners.count(local) || listeners.count(remote))) {
      sockets_.push_back({static_cast<int>(fd), it->first});
    }
  }
  ::closedir(fds);
  if (sockets_.empty() || !failure_) return;
  thread_ = std::thread([this] { watch(); });
}

SocketWatchdog::~SocketWatchdog() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  stop_requested_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string SocketWatchdog::verdict() const {
  {
    MutexLock lock(mutex_);
    if (!verdict_.empty()) return verdict_;
  }
  return failure_ ? failure_() : "";
}

void SocketWatchdog::watch() {
  MutexLock lock(mutex_);
  while (!stopping_ && verdict_.empty()) {
    stop_requested_.wait_for(mutex_, std::chrono::milliseconds(100));
    if (stopping_ || !verdict_.empty()) return;
    std::string verdict = failure_();
    if (!verdict.empty()) shut_down_locked(verdict);
  }
}

void SocketWatchdog::shut_down(const std::string& why) {
  MutexLock lock(mutex_);
  shut_down_locked(why);
}

void SocketWatchdog::shut_down_locked(const std::string& why) {
  if (!verdict_.empty()) return;
  verdict_ = why;
  // Only descriptors that are still the same sockets: Gloo closes a pair's socket when the
  // pair fails, and the number may since name something else.
  for (const Socket& socket : sockets_) {
    if (socket_inode(socket.fd) == socket.inode) ::shutdown(socket.fd, SHUT_RDWR);
  }
}

}  // namespace cadre
