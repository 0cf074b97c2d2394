// Keras's progress output for fit: "Epoch 3/10", then a bar redrawn in place on a terminal
// ("120/469 [=====>........................] - ETA: 2s - loss: 0.4012 - accuracy: 0.8560")
// and one final line per epoch with its time and per-step time and the validation logs.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "cadre/keras/callbacks.h"

namespace cadre::keras::internal {

// "0.4012", or "1.2346e-05" for small values, as Keras prints logs.
std::string format_log_value(double value);
// " - loss: 0.4012 - accuracy: 0.8560", loss first, then the rest by name with val_ last.
std::string format_logs(const Logs& logs);

class Progbar {
 public:
  // verbose 0 prints nothing, 1 a bar (redrawn only on a terminal), 2 one line per epoch.
  Progbar(std::FILE* out, int verbose, int64_t target);
  void epoch_header(int epoch, int epochs);
  // After `step` of the epoch's `target` steps; redraws at most 10 times a second.
  void update(int64_t step, const Logs& logs);
  // The epoch's last line, with every log (validation included).
  void finish(int64_t steps, const Logs& logs);

 private:
  std::string bar(int64_t step) const;
  std::FILE* out_;
  int verbose_;
  int64_t target_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  int64_t first_step_ = -1;  // of this process (a resumed epoch starts mid-way)
  bool drawn_ = false;
};

}  // namespace cadre::keras::internal
