#include "tools/cadre_launch/task_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <utility>

namespace cadre::launch {

void print_line(const std::string& prefix, const std::string& line) {
  std::string text = prefix + line + "\n";
  ::fwrite(text.data(), 1, text.size(), stdout);
  ::fflush(stdout);
}

TaskOutput::TaskOutput(TaskOutput&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      prefix_(std::move(other.prefix_)),
      partial_(std::move(other.partial_)) {}

TaskOutput& TaskOutput::operator=(TaskOutput&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    prefix_ = std::move(other.prefix_);
    partial_ = std::move(other.partial_);
  }
  return *this;
}

TaskOutput::~TaskOutput() {
  if (fd_ >= 0) ::close(fd_);
}

void TaskOutput::open(int fd, std::string prefix) {
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  fd_ = fd;
  prefix_ = std::move(prefix);
  partial_.clear();
}

void TaskOutput::drain() {
  if (fd_ < 0) return;
  char buffer[4096];
  while (true) {
    ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n > 0) {
      partial_.append(buffer, static_cast<size_t>(n));
      size_t newline;
      while ((newline = partial_.find('\n')) != std::string::npos) {
        print_line(prefix_, partial_.substr(0, newline));
        partial_.erase(0, newline + 1);
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    ::close(fd_);  // end of output, or an error reading it
    fd_ = -1;
    if (!partial_.empty()) print_line(prefix_, partial_);
    partial_.clear();
    return;
  }
}

void TaskOutput::close() {
  drain();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace cadre::launch
