// The fuzzer's bytes as a file for readers that take a path: an in-memory file (memfd_create)
// reached through /proc/self/fd, so that no input touches the disk.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace cadre::fuzz {

class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) : fd_(::memfd_create("cadre_fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) throw std::runtime_error("memfd_create failed");
    for (size_t done = 0; done < size;) {
      ssize_t wrote = ::write(fd_, data + done, size - done);
      if (wrote <= 0) throw std::runtime_error("write to memfd failed");
      done += static_cast<size_t>(wrote);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

}  // namespace cadre::fuzz
