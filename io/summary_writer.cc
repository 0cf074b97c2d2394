#include "cadre/io/summary_writer.h"

#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/io/event_file.h"
#include "cadre/io/tfrecord.h"
#include "core/base/strings.h"
#include "io/proto/event.pb.h"

namespace cadre::io {
namespace {

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

// A new file name in `logdir`: two writers started in the same second in one process get
// distinct names through a counter suffix.
std::string unique_event_path(Env& env, const std::string& logdir, const std::string& suffix) {
  auto seconds = static_cast<long long>(now_seconds());
  char stamp[32];
  std::snprintf(stamp, sizeof(stamp), "%010lld", seconds);
  std::string base =
      str_cat(logdir, "/events.out.tfevents.", stamp, ".", hostname(), ".", ::getpid());
  std::string path = base + suffix;
  for (int n = 1; env.file_exists(path); ++n) path = str_cat(base, ".", n, suffix);
  return path;
}

proto::Event make_event(int64_t step) {
  proto::Event e;
  e.set_wall_time(now_seconds());
  e.set_step(step);
  return e;
}

}  // namespace

// The event file and its background flusher.
struct SummaryWriter::Impl {
  void flush_loop();

  std::string path_;
  SummaryWriterOptions options_;
  std::mutex mutex_;  // guards writer_, dirty_, closing_
  std::condition_variable wake_;
  std::unique_ptr<TFRecordWriter> writer_;
  bool dirty_ = false;
  bool closing_ = false;
  std::thread flusher_;
};

SummaryWriter::SummaryWriter(const std::string& logdir, SummaryWriterOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->options_ = std::move(options);
  if (!impl_->options_.env) impl_->options_.env = posix_env();
  impl_->options_.env->create_dir(logdir);
  impl_->path_ = unique_event_path(*impl_->options_.env, logdir, impl_->options_.filename_suffix);
  impl_->writer_ =
      std::make_unique<TFRecordWriter>(impl_->path_, /*append=*/false, impl_->options_.env);
  proto::Event version = make_event(0);
  version.set_file_version("brain.Event:2");
  write_event(version.SerializeAsString());
  flush();  // TensorBoard recognises the file from its first record
  impl_->flusher_ = std::thread([impl = impl_.get()] { impl->flush_loop(); });
}

SummaryWriter::~SummaryWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    LOG(ERROR) << "closing event file " << impl_->path_ << ": " << e.what();
  }
}

void SummaryWriter::write_event(const std::string& serialized_event) {
  std::lock_guard lock(impl_->mutex_);
  if (!impl_->writer_)
    throw FailedPreconditionError(str_cat("event file ", impl_->path_, " is closed"));
  impl_->writer_->write(serialized_event);
  impl_->dirty_ = true;
}

void SummaryWriter::scalar(std::string_view tag, double value, int64_t step) {
  proto::Event e = make_event(step);
  proto::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->set_simple_value(static_cast<float>(value));
  write_event(e.SerializeAsString());
}

void SummaryWriter::histogram(std::string_view tag, const Tensor& values, int64_t step) {
  std::vector<double> v = values.to_vector<double>();
  histogram(tag, std::span<const double>(v), step);
}

void SummaryWriter::histogram(std::string_view tag, std::span<const double> values, int64_t step) {
  Histogram h = make_histogram(values);
  proto::Event e = make_event(step);
  proto::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  proto::HistogramProto* p = v->mutable_histo();
  p->set_min(h.min);
  p->set_max(h.max);
  p->set_num(h.num);
  p->set_sum(h.sum);
  p->set_sum_squares(h.sum_squares);
  p->mutable_bucket_limit()->Add(h.bucket_limit.begin(), h.bucket_limit.end());
  p->mutable_bucket()->Add(h.bucket.begin(), h.bucket.end());
  write_event(e.SerializeAsString());
}

void SummaryWriter::text(std::string_view tag, std::string_view text, int64_t step) {
  proto::Event e = make_event(step);
  proto::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  proto::TensorProto* t = v->mutable_tensor();
  t->set_dtype(proto::DT_STRING);
  t->mutable_tensor_shape();  // a scalar: present, with no dimensions
  t->add_string_val(std::string(text));
  write_event(e.SerializeAsString());
}

void SummaryWriter::flush() {
  std::lock_guard lock(impl_->mutex_);
  if (impl_->writer_) impl_->writer_->flush();
  impl_->dirty_ = false;
}

void SummaryWriter::close() {
  {
    std::lock_guard lock(impl_->mutex_);
    impl_->closing_ = true;
  }
  impl_->wake_.notify_all();
  if (impl_->flusher_.joinable()) impl_->flusher_.join();
  std::lock_guard lock(impl_->mutex_);
  if (!impl_->writer_) return;
  std::unique_ptr<TFRecordWriter> writer = std::move(impl_->writer_);
  writer->flush();
  writer->close();
}

void SummaryWriter::Impl::flush_loop() {
  // Clamped so that the deadline arithmetic cannot overflow.
  auto interval = std::chrono::duration<double>(std::clamp(options_.flush_secs, 1e-3, 1e7));
  std::unique_lock lock(mutex_);
  while (!closing_) {
    wake_.wait_for(lock, interval, [&] { return closing_; });
    if (closing_ || !dirty_ || !writer_) continue;
    try {
      writer_->flush();
      dirty_ = false;
    } catch (const std::exception& e) {
      LOG(ERROR) << "flushing event file " << path_ << ": " << e.what();
    }
  }
}

const std::string& SummaryWriter::path() const { return impl_->path_; }

}  // namespace cadre::io
