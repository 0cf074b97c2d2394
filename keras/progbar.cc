#include "keras/progbar.h"

#include <unistd.h>

#include <cmath>

#include "core/base/clock.h"
#include "core/base/strings.h"

namespace cadre::keras::internal {

namespace {

std::string duration(double secs) {
  if (secs >= 3600) {
    return str_cat(static_cast<int>(secs) / 3600, ":", (static_cast<int>(secs) % 3600) / 60 / 10,
                   (static_cast<int>(secs) % 3600) / 60 % 10, ":", static_cast<int>(secs) % 60 / 10,
                   static_cast<int>(secs) % 10);
  }
  if (secs >= 60) {
    return str_cat(static_cast<int>(secs) / 60, ":", static_cast<int>(secs) % 60 / 10,
                   static_cast<int>(secs) % 10);
  }
  return str_cat(static_cast<int>(std::lround(secs)), "s");
}

std::string per_step(double secs) {
  if (secs >= 1) return str_cat(static_cast<int>(std::lround(secs)), "s/step");
  if (secs >= 1e-3) return str_cat(static_cast<int>(std::lround(secs * 1e3)), "ms/step");
  return str_cat(static_cast<int>(std::lround(secs * 1e6)), "us/step");
}

}  // namespace

std::string format_log_value(double value) {
  char buffer[32];
  if (value != 0 && std::fabs(value) < 1e-3) {
    std::snprintf(buffer, sizeof buffer, "%.4e", value);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.4f", value);
  }
  return buffer;
}

std::string format_logs(const Logs& logs) {
  std::string out;
  auto add = [&](const std::string& name, double value) {
    out += str_cat(" - ", name, ": ", format_log_value(value));
  };
  if (auto it = logs.find("loss"); it != logs.end()) add("loss", it->second);
  for (const auto& [name, value] : logs) {
    if (name != "loss" && !name.starts_with("val_")) add(name, value);
  }
  if (auto it = logs.find("val_loss"); it != logs.end()) add("val_loss", it->second);
  for (const auto& [name, value] : logs) {
    if (name != "val_loss" && name.starts_with("val_")) add(name, value);
  }
  return out;
}

Progbar::Progbar(std::FILE* out, int verbose, int64_t target)
    : out_(out),
      verbose_(verbose),
      target_(target),
      terminal_(out != nullptr && ::isatty(::fileno(out))),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void Progbar::epoch_header(int epoch, int epochs) {
  if (verbose_ == 0) return;
  std::fprintf(out_, "Epoch %d/%d\n", epoch + 1, epochs);
  std::fflush(out_);
  start_ = std::chrono::steady_clock::now();
}

std::string Progbar::bar(int64_t step) const {
  int width = 30;
  std::string digits = std::to_string(target_);
  std::string counter = std::to_string(step);
  counter = std::string(digits.size() > counter.size() ? digits.size() - counter.size() : 0, ' ') +
            counter + "/" + digits;
  int done = target_ > 0 ? static_cast<int>(width * step / target_) : width;
  std::string b = "[";
  if (done > 0) b += std::string(done - 1, '=') + (step < target_ ? ">" : "=");
  b += std::string(width - std::max(done, 0), '.') + "]";
  return counter + " " + b;
}

void Progbar::update(int64_t step, const Logs& logs) {
  if (first_step_ < 0) first_step_ = step - 1;
  if (verbose_ != 1 || !terminal_ || step >= target_) return;
  if (seconds_since(last_draw_) < 0.1 && drawn_) return;
  last_draw_ = std::chrono::steady_clock::now();
  double elapsed = seconds_since(start_);
  int64_t done_here = step - first_step_;
  double eta = done_here > 0 ? elapsed / done_here * (target_ - step) : 0;
  std::string line = str_cat(bar(step), " - ETA: ", duration(eta), format_logs(logs));
  std::fprintf(out_, "\r%s\033[K", line.c_str());
  std::fflush(out_);
  drawn_ = true;
}

void Progbar::finish(int64_t steps, const Logs& logs) {
  if (verbose_ == 0) return;
  double elapsed = seconds_since(start_);
  int64_t done_here = std::max<int64_t>(1, steps - std::max<int64_t>(first_step_, 0));
  std::string line;
  if (verbose_ == 1) {
    line = str_cat(bar(steps), " - ", duration(elapsed), " ", per_step(elapsed / done_here),
                   format_logs(logs));
  } else {
    line = str_cat(steps, "/", target_, " - ", duration(elapsed), format_logs(logs), " - ",
                   duration(elapsed), "/epoch - ", per_step(elapsed / done_here));
  }
  std::fprintf(out_, "%s%s\n", drawn_ ? "\r\033[K" : "", line.c_str());
  std::fflush(out_);
  drawn_ = false;
  first_step_ = -1;
}

}  // namespace cadre::keras::internal
