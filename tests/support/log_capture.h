// Every line glog logs (INFO or worse) while a LogCapture lives, for tests that check what
// a person is told.
#pragma once

#include <glog/logging.h>

#include <mutex>
#include <string>
#include <vector>

namespace cadre::testing {

class LogCapture : public google::LogSink {
 public:
  LogCapture() { google::AddLogSink(this); }
  ~LogCapture() override { google::RemoveLogSink(this); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  void send(google::LogSeverity severity, const char*, const char*, int,
            const google::LogMessageTime&, const char* message, size_t length) override {
    std::lock_guard lock(mutex_);
    lines_.push_back({severity, std::string(message, length)});
  }
  // The lines of at least `severity` that contain every one of `parts`.
  std::vector<std::string> matching(std::initializer_list<std::string> parts,
                                    google::LogSeverity severity = google::GLOG_WARNING) {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [level, text] : lines_) {
      bool all = level >= severity;
      for (const std::string& part : parts) all = all && text.find(part) != std::string::npos;
      if (all) out.push_back(text);
    }
    return out;
  }
  std::string all() {
    std::lock_guard lock(mutex_);
    std::string text;
    for (const auto& [level, line] : lines_) text += line + "\n";
    return text;
  }

 private:
  struct Line {
    google::LogSeverity severity;
    std::string text;
  };
  std::mutex mutex_;
  std::vector<Line> lines_;
};

}  // namespace cadre::testing
