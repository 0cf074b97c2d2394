#include "strategies/collectives/shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {

namespace {

constexpr char kPrefix[] = "cadre-";

std::string random_hex() {
  std::random_device device;
  uint64_t value = (static_cast<uint64_t>(device()) << 32) ^ device();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

void* map(int fd, size_t bytes, const std::string& name) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    int error = errno;
    ::close(fd);
    throw UnavailableError(
        str_cat("shared memory ", name, ": cannot map ", bytes, " bytes: ", std::strerror(error)));
  }
  ::close(fd);
  return data;
}

}  // namespace

uint64_t pid_namespace() {
  struct stat st;
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

Segment::Segment(Segment&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      name_(std::move(other.name_)) {}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    name_ = std::move(other.name_);
  }
  return *this;
}

Segment::~Segment() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

void Segment::unlink() {
  if (!name_.empty()) ::shm_unlink(name_.c_str());
}

Segment create_segment(size_t bytes) {
  remove_orphan_segments();
  std::string name = str_cat("/", kPrefix, pid_namespace(), "-", ::getpid(), "-", random_hex());
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw UnavailableError(
        str_cat("shared memory ", name, ": cannot create: ", std::strerror(errno)));
  }
  // posix_fallocate reserves the pages now: a /dev/shm too small fails here with ENOSPC,
  // not later with SIGBUS in the middle of a reduction.
  if (int error = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); error != 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw UnavailableError(str_cat("shared memory ", name, ": cannot reserve ", bytes,
                                   " bytes in /dev/shm: ", std::strerror(error)));
  }
  Segment segment;
  try {
    segment.data_ = map(fd, bytes, name);
  } catch (...) {
    ::shm_unlink(name.c_str());
    throw;
  }
  segment.size_ = bytes;
  segment.name_ = std::move(name);
  return segment;
}

Segment open_segment(const std::string& name, size_t bytes) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    int error = errno;
    if (error == ENOENT) {
      throw NotFoundError(str_cat("shared memory ", name, " is not on this host"));
    }
    throw UnavailableError(
        str_cat("shared memory ", name, ": cannot open: ", std::strerror(error)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    ::close(fd);
    throw UnavailableError(str_cat("shared memory ", name, " is not ", bytes, " bytes long"));
  }
  Segment segment;
  segment.data_ = map(fd, bytes, name);
  segment.size_ = bytes;
  segment.name_ = name;
  return segment;
}

int remove_orphan_segments() {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return 0;
  const std::string ours = str_cat(kPrefix, pid_namespace(), "-");
  int removed = 0;
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name.compare(0, ours.size(), ours) != 0) continue;
    pid_t pid = static_cast<pid_t>(std::atol(name.c_str() + ours.size()));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (::shm_unlink(("/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

}  // namespace cadre
