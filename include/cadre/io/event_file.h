// Reading TensorBoard event files back (for tests, tools and the evaluator), and the
// histogram layout both sides share.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cadre/base/env.h"

namespace cadre::io {

// A histogram as TensorBoard stores it: bucket[i] counts values in
// [bucket_limit[i - 1], bucket_limit[i]).
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;
  std::vector<double> bucket;
};

// The values in TensorFlow's default buckets (limits +-1e-12 * 1.1^k up to 1e20, 0 and
// +-DBL_MAX), each run of empty buckets merged into one as TensorFlow writes them.
Histogram make_histogram(std::span<const double> values);

struct SummaryValue {
  std::string tag;
  std::string plugin_name;      // from the metadata, e.g. "text"; empty when absent
  std::optional<float> scalar;  // simple_value
  std::optional<Histogram> histogram;
  std::optional<std::string> text;  // a string tensor's first value
};

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;  // set in the first record only
  std::vector<SummaryValue> values;
};

// Every event in the file, in order, read through `env` (the real file system when null).
// Throws NotFoundError naming a missing file, DataLossError naming the file and offset of a
// damaged record, InvalidArgumentError when a record is not an Event.
std::vector<Event> read_event_file(const std::string& path,
                                   const std::shared_ptr<Env>& env = nullptr);

}  // namespace cadre::io
