#include "cadre/io/event_file.h"

#include <algorithm>
#include <cfloat>

#include "cadre/base/errors.h"
#include "cadre/io/tfrecord.h"
#include "core/base/strings.h"
#include "io/proto/event.pb.h"

namespace cadre::io {
namespace {

// Default bucket limits, computed once: the exponential series mirrored around 0.
const std::vector<double>& default_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> positive;
    for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
    positive.push_back(DBL_MAX);
    std::vector<double> all;
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), positive.begin(), positive.end());
    return all;
  }();
  return limits;
}

}  // namespace

Histogram make_histogram(std::span<const double> values) {
  const std::vector<double>& limits = default_limits();
  std::vector<double> counts(limits.size(), 0.0);
  Histogram h;
  h.min = DBL_MAX;
  h.max = -DBL_MAX;
  for (double v : values) {
    size_t bucket = std::upper_bound(limits.begin(), limits.end(), v) - limits.begin();
    counts[std::min(bucket, counts.size() - 1)] += 1;
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.num += 1;
    h.sum += v;
    h.sum_squares += v * v;
  }
  // A run of empty buckets is written as one bucket reaching to the run's last limit.
  for (size_t i = 0; i < limits.size();) {
    double limit = limits[i];
    double count = counts[i];
    ++i;
    if (count == 0) {
      while (i < limits.size() && counts[i] == 0) limit = limits[i++];
    }
    h.bucket_limit.push_back(limit);
    h.bucket.push_back(count);
  }
  return h;
}

std::vector<Event> read_event_file(const std::string& path, const std::shared_ptr<Env>& env) {
  TFRecordReader reader(path, env);
  std::vector<Event> out;
  while (auto record = reader.read()) {
    proto::Event e;
    if (!e.ParseFromString(*record)) {
      throw InvalidArgumentError(str_cat("event file ", path, ": the record before byte offset ",
                                         reader.offset(), " is not an Event"));
    }
    Event event;
    event.wall_time = e.wall_time();
    event.step = e.step();
    event.file_version = e.file_version();
    for (const proto::Summary::Value& v : e.summary().value()) {
      SummaryValue value;
      value.tag = v.tag();
      value.plugin_name = v.metadata().plugin_data().plugin_name();
      if (v.has_simple_value()) value.scalar = v.simple_value();
      if (v.has_histo()) {
        const proto::HistogramProto& p = v.histo();
        value.histogram = Histogram{p.min(),
                                    p.max(),
                                    p.num(),
                                    p.sum(),
                                    p.sum_squares(),
                                    {p.bucket_limit().begin(), p.bucket_limit().end()},
                                    {p.bucket().begin(), p.bucket().end()}};
      }
      if (v.has_tensor() && v.tensor().string_val_size() > 0) {
        value.text = v.tensor().string_val(0);
      }
      event.values.push_back(std::move(value));
    }
    out.push_back(std::move(event));
  }
  return out;
}

}  // namespace cadre::io
