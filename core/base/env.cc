#include "cadre/base/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "cadre/base/errors.h"
#include "core/base/file_descriptor.h"
#include "core/base/file_errors.h"
#include "core/base/process_id.h"
#include "core/base/strings.h"

namespace cadre {
namespace {

constexpr char kTemporaryMark[] = ".tmp-";

void sync_path(const std::string& path, int flags, std::string_view what) {
  FileDescriptor fd(path, flags);
  if (fd.get() < 0) throw_file_error(str_cat("cannot open for ", what), path, errno);
  if (::fsync(fd.get()) != 0) throw_file_error(what, path, errno);
}

// Writes whole buffers to `fd`, retrying short writes and EINTR.
void write_all(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t wrote = ::write(fd, data, size);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      throw_file_error("cannot write", path, errno);
    }
    data += wrote;
    size -= static_cast<size_t>(wrote);
  }
}

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, bool append) : path_(std::move(path)) {
    fd_ =
        ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
    if (fd_ < 0) throw_file_error("cannot open for writing", path_, errno);
    if (append) {
      struct stat info;
      if (::fstat(fd_, &info) != 0) throw_file_error("cannot stat", path_, errno);
      size_ = static_cast<uint64_t>(info.st_size);
    }
  }
  ~PosixWritableFile() override {
    if (fd_ < 0) return;
    try {
      flush();
    } catch (...) {
      // The destructor cannot report it; close() does.
    }
    ::close(fd_);
  }

  void append(std::string_view data) override {
    if (fd_ < 0) throw_file_error("cannot append to a closed file", path_, EBADF);
    size_ += data.size();
    if (buffer_.size() + data.size() <= kBufferBytes) {
      buffer_.append(data);
      return;
    }
    flush();
    if (data.size() >= kBufferBytes) {
      write_all(fd_, data.data(), data.size(), path_);
    } else {
      buffer_.assign(data);
    }
  }

  void flush() override {
    if (fd_ < 0 || buffer_.empty()) return;
    write_all(fd_, buffer_.data(), buffer_.size(), path_);
    buffer_.clear();
  }

  void sync() override {
    flush();
    if (fd_ >= 0 && ::fsync(fd_) != 0) throw_file_error("fsync", path_, errno);
  }

  void close() override {
    if (fd_ < 0) return;
    flush();
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw_file_error("cannot close", path_, errno);
  }

  uint64_t size() const override { return size_; }

 private:
  static constexpr size_t kBufferBytes = 64 * 1024;
  std::string path_;
  int fd_ = -1;
  std::string buffer_;
  uint64_t size_ = 0;
};

class PosixRandomAccessFile : public RandomAccessFile {
 public:
  explicit PosixRandomAccessFile(std::string path) : path_(std::move(path)), fd_(path_, O_RDONLY) {
    if (fd_.get() < 0) throw_file_error("cannot open", path_, errno);
  }

  std::string_view read(uint64_t offset, size_t n, char* scratch) const override {
    size_t got = 0;
    while (got < n) {  // pread may return less than asked before the end of the file
      ssize_t r = ::pread(fd_.get(), scratch + got, n - got, static_cast<off_t>(offset + got));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw_file_error(str_cat("cannot read ", n, " bytes at offset ", offset, " of"), path_,
                         errno);
      }
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    return std::string_view(scratch, got);
  }

 private:
  std::string path_;
  FileDescriptor fd_;
};

class PosixEnv : public Env {
 public:
  bool file_exists(const std::string& path) override {
    struct stat info;
    return ::stat(path.c_str(), &info) == 0;
  }

  uint64_t file_size(const std::string& path) override {
    struct stat info;
    if (::stat(path.c_str(), &info) != 0) throw_file_error("cannot stat", path, errno);
    return static_cast<uint64_t>(info.st_size);
  }

  double modified_seconds(const std::string& path) override {
    struct stat info;
    if (::stat(path.c_str(), &info) != 0) throw_file_error("cannot stat", path, errno);
    return static_cast<double>(info.st_mtim.tv_sec) + info.st_mtim.tv_nsec * 1e-9;
  }

  std::vector<std::string> list_dir(const std::string& dir) override {
    DIR* handle = ::opendir(dir.c_str());
    if (handle == nullptr) throw_file_error("cannot list directory", dir, errno);
    std::vector<std::string> names;
    while (const dirent* entry = ::readdir(handle)) {
      std::string_view name = entry->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    ::closedir(handle);
    return names;
  }

  std::string read_file(const std::string& path) override {
    FileDescriptor fd(path, O_RDONLY);
    if (fd.get() < 0) throw_file_error("cannot open", path, errno);
    std::string contents;
    char buffer[1 << 14];
    while (true) {
      ssize_t got = ::read(fd.get(), buffer, sizeof(buffer));
      if (got < 0) {
        if (errno == EINTR) continue;
        throw_file_error("cannot read", path, errno);
      }
      if (got == 0) break;
      contents.append(buffer, static_cast<size_t>(got));
    }
    return contents;
  }

  std::unique_ptr<RandomAccessFile> new_random_access_file(const std::string& path) override {
    return std::make_unique<PosixRandomAccessFile>(path);
  }

  void write_file(const std::string& path, std::string_view contents) override {
    FileDescriptor fd(path, O_WRONLY | O_CREAT | O_TRUNC);
    if (fd.get() < 0) throw_file_error("cannot create", path, errno);
    write_all(fd.get(), contents.data(), contents.size(), path);
    if (fd.close() != 0) throw_file_error("cannot write", path, errno);
  }

  std::unique_ptr<WritableFile> new_writable_file(const std::string& path, bool append) override {
    return std::make_unique<PosixWritableFile>(path, append);
  }

  void truncate_file(const std::string& path, uint64_t size) override {
    if (::truncate(path.c_str(), static_cast<off_t>(size)) != 0) {
      throw_file_error("cannot truncate", path, errno);
    }
  }

  void sync_file(const std::string& path) override { sync_path(path, O_RDONLY, "fsync"); }

  void sync_dir(const std::string& dir) override {
    sync_path(dir, O_RDONLY | O_DIRECTORY, "fsync of directory");
  }

  void rename_file(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      throw_file_error(str_cat("cannot rename to ", to, ":"), from, errno);
    }
  }

  bool remove_file(const std::string& path) override {
    if (::unlink(path.c_str()) == 0) return true;
    if (errno == ENOENT) return false;
    throw_file_error("cannot remove", path, errno);
  }

  bool remove_dir_recursively(const std::string& dir) override {
    std::error_code error;
    std::uintmax_t removed = std::filesystem::remove_all(dir, error);
    if (error) throw_file_error("cannot remove directory", dir, error.value());
    return removed > 0;
  }

  void create_dir(const std::string& dir) override {
    if (dir.empty() || file_exists(dir)) return;
    std::string parent = dir_name(dir);
    if (parent != dir && parent != ".") create_dir(parent);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      throw_file_error("cannot create directory", dir, errno);
    }
  }

  double now_seconds() override {
    using std::chrono::duration;
    return duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
};

}  // namespace

std::shared_ptr<Env> posix_env() { return std::make_shared<PosixEnv>(); }

std::string temporary_path_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return str_cat(path, kTemporaryMark, counter.fetch_add(1), "-", to_token(this_process()));
}

bool is_temporary_name(std::string_view name) {
  return name.find(kTemporaryMark) != std::string_view::npos;
}

// The owner named by a temporary name ("...tmp-<counter>-<token>"), if it parses.
std::optional<ProcessId> temporary_owner(std::string_view name) {
  size_t mark = name.rfind(kTemporaryMark);
  if (mark == std::string_view::npos) return std::nullopt;
  std::string_view rest = name.substr(mark + std::string_view(kTemporaryMark).size());
  size_t dash = rest.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  return parse_process_token(rest.substr(dash + 1));
}

bool temporary_owner_is_dead(std::string_view name) {
  std::optional<ProcessId> owner = temporary_owner(name);
  return owner && liveness(*owner) == Liveness::kDead;
}

bool temporary_of_this_process(std::string_view name) {
  std::optional<ProcessId> owner = temporary_owner(name);
  return owner && *owner == this_process();
}

bool temporary_is_abandoned(Env& env, const std::string& dir, const std::string& name,
                            double stale_seconds) {
  if (!is_temporary_name(name)) return false;
  std::optional<ProcessId> owner = temporary_owner(name);
  Liveness state = owner ? liveness(*owner) : Liveness::kUnknown;
  if (state != Liveness::kUnknown) return state == Liveness::kDead;
  try {
    return env.now_seconds() - env.modified_seconds(join_path(dir, name)) > stale_seconds;
  } catch (const NotFoundError&) {
    return false;  // gone already
  }
}

void write_file_atomically(Env& env, const std::string& path, std::string_view contents,
                           bool durable) {
  std::string temporary = temporary_path_for(path);
  try {
    env.write_file(temporary, contents);
    if (durable) env.sync_file(temporary);
    env.rename_file(temporary, path);
  } catch (...) {
    try {
      env.remove_file(temporary);
    } catch (...) {
      // The original failure is the one worth reporting.
    }
    throw;
  }
  if (durable) env.sync_dir(dir_name(path));
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty() || (!name.empty() && name[0] == '/')) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

std::string dir_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace cadre
