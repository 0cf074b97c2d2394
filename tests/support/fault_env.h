// An Env over the real file system that records every mutating call (a writable file's
// open, appends, syncs and close included), can fail the n-th one (as a crash or a full disk
// would stop a publish there), can refuse every write as a read-only file system does (tests
// run as root, for whom permissions are no obstacle), can fail the reads of one file past
// a byte offset (as a bad disk sector does), and has a clock tests set.
#pragma once

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "cadre/base/mutex.h"
#include "core/base/file_errors.h"
#include "core/base/strings.h"

namespace cadre::testing {

class FaultEnv : public Env {
 public:
  FaultEnv() : base_(posix_env()) {}

  // Fail the mutating call with this index (counted from now, 0-based) and every one after
  // it (a crash or a full disk), or with `once` that call alone (a transient error, after
  // which clean-up works); -1: never.
  void fail_from(int index, bool once = false) {
    MutexLock lock(mutex_);
    fail_from_ = index;
    once_ = once;
    count_ = 0;
  }
  // From now on every mutation except a sync (which a read-only file system allows) throws
  // PermissionDeniedError, as EROFS does, and is recorded in refused() instead of log();
  // so does creating a directory that does not exist.
  void set_read_only(bool read_only) {
    MutexLock lock(mutex_);
    read_only_ = read_only;
  }
  // From now on a read that would return a byte at or past `from_offset` of the file named
  // `name` (a base name) throws the UnavailableError of EIO naming the path; reads before
  // that offset, and opening the file, still work. An empty name: no read fails.
  void fail_reads(const std::string& name, uint64_t from_offset = 0) {
    MutexLock lock(mutex_);
    failing_read_name_ = name;
    failing_read_offset_ = from_offset;
  }
  // Reads made so far: read_file() calls and reads of random-access files.
  int reads() {
    MutexLock lock(mutex_);
    return reads_;
  }
  std::vector<std::string> refused() {
    MutexLock lock(mutex_);
    return refused_;
  }
  void advance(double seconds) {
    MutexLock lock(mutex_);
    now_ += seconds;
  }
  std::vector<std::string> log() {
    MutexLock lock(mutex_);
    return log_;
  }
  void clear_log() {
    MutexLock lock(mutex_);
    log_.clear();
  }
  int mutations() {
    MutexLock lock(mutex_);
    return count_;
  }

  bool file_exists(const std::string& path) override { return base_->file_exists(path); }
  uint64_t file_size(const std::string& path) override { return base_->file_size(path); }
  double modified_seconds(const std::string& path) override {
    return base_->modified_seconds(path);
  }
  std::vector<std::string> list_dir(const std::string& dir) override {
    return base_->list_dir(dir);
  }
  std::string read_file(const std::string& path) override {
    std::string contents = base_->read_file(path);
    check_read(path, 0, contents.size());
    return contents;
  }
  std::unique_ptr<RandomAccessFile> new_random_access_file(const std::string& path) override {
    return std::make_unique<ReadFile>(*this, path, base_->new_random_access_file(path));
  }
  void write_file(const std::string& path, std::string_view contents) override {
    mutate("write " + base_name(path));
    base_->write_file(path, contents);
  }
  std::unique_ptr<WritableFile> new_writable_file(const std::string& path, bool append) override {
    mutate("open " + base_name(path));
    return std::make_unique<File>(*this, base_name(path), base_->new_writable_file(path, append));
  }
  void truncate_file(const std::string& path, uint64_t size) override {
    mutate("truncate " + base_name(path));
    base_->truncate_file(path, size);
  }
  void sync_file(const std::string& path) override {
    mutate("sync " + base_name(path));
    base_->sync_file(path);
  }
  void sync_dir(const std::string& dir) override {
    mutate("syncdir");
    base_->sync_dir(dir);
  }
  void rename_file(const std::string& from, const std::string& to) override {
    mutate("rename " + base_name(from) + " " + base_name(to));
    base_->rename_file(from, to);
  }
  bool remove_file(const std::string& path) override {
    mutate("remove " + base_name(path));
    return base_->remove_file(path);
  }
  bool remove_dir_recursively(const std::string& dir) override {
    mutate("rmtree " + base_name(dir));
    return base_->remove_dir_recursively(dir);
  }
  void create_dir(const std::string& dir) override {
    if (!base_->file_exists(dir)) refuse_if_read_only("mkdir " + base_name(dir));
    base_->create_dir(dir);
  }
  double now_seconds() override {
    MutexLock lock(mutex_);
    return now_;
  }

 private:
  // Appends, syncs and the close of a file count as mutations of the Env that opened it.
  class File : public WritableFile {
   public:
    File(FaultEnv& env, std::string name, std::unique_ptr<WritableFile> base)
        : env_(env), name_(std::move(name)), base_(std::move(base)) {}
    void append(std::string_view data) override {
      env_.mutate("append " + name_);
      base_->append(data);
    }
    void flush() override { base_->flush(); }
    void sync() override {
      env_.mutate("sync " + name_);
      base_->sync();
    }
    void close() override {
      env_.mutate("close " + name_);
      base_->close();
    }
    uint64_t size() const override { return base_->size(); }

   private:
    FaultEnv& env_;
    std::string name_;
    std::unique_ptr<WritableFile> base_;
  };

  class ReadFile : public RandomAccessFile {
   public:
    ReadFile(FaultEnv& env, std::string path, std::unique_ptr<RandomAccessFile> base)
        : env_(env), path_(std::move(path)), base_(std::move(base)) {}
    std::string_view read(uint64_t offset, size_t n, char* scratch) const override {
      std::string_view got = base_->read(offset, n, scratch);
      env_.check_read(path_, offset, got.size());
      return got;
    }

   private:
    FaultEnv& env_;
    std::string path_;
    std::unique_ptr<RandomAccessFile> base_;
  };

  // Counts a read of `size` bytes at `offset` of `path`, failing it as fail_reads() asks.
  void check_read(const std::string& path, uint64_t offset, size_t size) {
    MutexLock lock(mutex_);
    ++reads_;
    if (failing_read_name_.empty() || base_name(path) != failing_read_name_) return;
    if (offset + size > failing_read_offset_) {
      throw_file_error(str_cat("cannot read ", size, " bytes at offset ", offset, " of"), path,
                       EIO);
    }
  }

  void refuse_if_read_only(const std::string& what) {
    MutexLock lock(mutex_);
    if (!read_only_ || what.starts_with("sync")) return;
    refused_.push_back(what);
    throw PermissionDeniedError(str_cat("cannot ", what, ": Read-only file system"));
  }

  void mutate(const std::string& what) {
    refuse_if_read_only(what);
    MutexLock lock(mutex_);
    int index = count_++;
    if (fail_from_ >= 0 && (once_ ? index == fail_from_ : index >= fail_from_)) {
      throw UnavailableError(str_cat("injected failure at ", what));
    }
    log_.push_back(what);
  }

  std::shared_ptr<Env> base_;
  Mutex mutex_;
  std::vector<std::string> log_ CADRE_GUARDED_BY(mutex_);
  int fail_from_ CADRE_GUARDED_BY(mutex_) = -1;
  bool once_ CADRE_GUARDED_BY(mutex_) = false;
  int count_ CADRE_GUARDED_BY(mutex_) = 0;
  bool read_only_ CADRE_GUARDED_BY(mutex_) = false;
  std::vector<std::string> refused_ CADRE_GUARDED_BY(mutex_);
  double now_ CADRE_GUARDED_BY(mutex_) = 1.7e9;
  std::string failing_read_name_ CADRE_GUARDED_BY(mutex_);
  uint64_t failing_read_offset_ CADRE_GUARDED_BY(mutex_) = 0;
  int reads_ CADRE_GUARDED_BY(mutex_) = 0;
};

}  // namespace cadre::testing
