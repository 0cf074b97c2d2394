// TensorBoard event files: SummaryWriter appends scalars, histograms and text to
// `<logdir>/events.out.tfevents.<seconds>.<host>.<pid>`, a TFRecord file of Event protocol
// buffers (wire-compatible with TensorFlow's) starting with the "brain.Event:2" version
// record, as tf.summary writes them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "cadre/base/env.h"
#include "cadre/tensor/tensor.h"

namespace cadre::io {

struct SummaryWriterOptions {
  // Seconds between flushes to the file in the background (TensorBoard sees data no later
  // than this); close() and the destructor always flush. A flush is a write(2), not an
  // fsync: TensorFlow's 120 s left a run's curves minutes behind, and a process killed
  // between flushes took them with it.
  double flush_secs = 5;
  // Appended to the file name (e.g. ".v2").
  std::string filename_suffix;
  // Where the file is written; null: the real file system.
  std::shared_ptr<Env> env;
};

// Thread-safe: any thread may write summaries at any time.
class SummaryWriter {
 public:
  // Creates `logdir` (with parents) and a new event file in it. Throws
  // PermissionDeniedError / NotFoundError / UnavailableError naming the path on failure.
  explicit SummaryWriter(const std::string& logdir, SummaryWriterOptions options = {});
  ~SummaryWriter();  // close(), errors logged
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // Each call writes one Event at the current wall time for `step`.
  void scalar(std::string_view tag, double value, int64_t step);
  // A histogram of the values (any real tensor, or a span) in TensorFlow's default
  // exponential buckets.
  void histogram(std::string_view tag, const Tensor& values, int64_t step);
  void histogram(std::string_view tag, std::span<const double> values, int64_t step);
  // Text for TensorBoard's text dashboard (markdown).
  void text(std::string_view tag, std::string_view text, int64_t step);

  // Makes everything written so far visible to readers.
  void flush();
  // Flushes, stops the background flusher and closes the file; later writes throw
  // FailedPreconditionError.
  void close();

  const std::string& path() const;

 private:
  struct Impl;
  void write_event(const std::string& serialized_event);

  std::unique_ptr<Impl> impl_;
};

}  // namespace cadre::io
