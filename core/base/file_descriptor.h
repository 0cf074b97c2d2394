// A POSIX file descriptor closed on every path out of a scope.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <string>

namespace cadre {

class FileDescriptor {
 public:
  // open(2) with O_CLOEXEC added; get() is negative (errno set) when it failed.
  FileDescriptor(const std::string& path, int flags, mode_t mode = 0644)
      : fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // Closes now so that a failing close (delayed write errors) is reported.
  int close() {
    int result = ::close(fd_);
    fd_ = -1;
    return result;
  }

 private:
  int fd_;
};

}  // namespace cadre
