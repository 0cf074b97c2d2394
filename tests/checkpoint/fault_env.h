// An Env over the real file system that records every mutating call, can fail the n-th
// one (as a crash or a full disk would stop a save there), and has a clock tests set.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/env.h"
#include "core/base/strings.h"

namespace cadre::checkpoint::testing {

class FaultEnv : public Env {
 public:
  FaultEnv() : base_(posix_env()) {}

  // Fail the mutating call with this index (0-based) and every one after it; -1: never.
  void fail_from(int index) {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_from_ = index;
    count_ = 0;
  }
  void set_now(double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    now_ = seconds;
  }
  void advance(double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    now_ += seconds;
  }
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lock(mutex_);
    return log_;
  }
  void clear_log() {
    std::lock_guard<std::mutex> lock(mutex_);
    log_.clear();
  }
  int mutations() {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }

  bool file_exists(const std::string& path) override { return base_->file_exists(path); }
  std::vector<std::string> list_dir(const std::string& dir) override {
    return base_->list_dir(dir);
  }
  std::string read_file(const std::string& path) override { return base_->read_file(path); }
  void write_file(const std::string& path, std::string_view contents) override {
    mutate("write " + base_name(path));
    base_->write_file(path, contents);
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
  void create_dir(const std::string& dir) override { base_->create_dir(dir); }
  double now_seconds() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return now_;
  }

 private:
  void mutate(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    int index = count_++;
    if (fail_from_ >= 0 && index >= fail_from_) {
      throw UnavailableError(str_cat("injected failure at ", what));
    }
    log_.push_back(what);
  }

  std::shared_ptr<Env> base_;
  std::mutex mutex_;
  std::vector<std::string> log_;
  int fail_from_ = -1;
  int count_ = 0;
  double now_ = 1.7e9;
};

}  // namespace cadre::checkpoint::testing
