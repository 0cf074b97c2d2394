// What a profile says: the per-phase and per-op summary, and the Chrome trace.
#include <algorithm>
#include <cstdio>

#include "cadre/runtime/profiler.h"

namespace cadre::profiler {
namespace {

// The phases of a training step in the order they happen; others follow by name.
constexpr std::string_view kPhaseOrder[] = {"input",  "forward",    "backward",        "all_reduce",
                                            "update", "checkpoint", "saving_listeners"};

int phase_rank(std::string_view name) {
  for (size_t i = 0; i < std::size(kPhaseOrder); ++i) {
    if (kPhaseOrder[i] == name) return static_cast<int>(i);
  }
  return static_cast<int>(std::size(kPhaseOrder));
}

template <typename... Args>
void append_format(std::string& out, const char* format, Args... args) {
  char line[256];
  int n = std::snprintf(line, sizeof(line), format, args...);
  if (n > 0) out.append(line, std::min<size_t>(static_cast<size_t>(n), sizeof(line) - 1));
}

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          append_format(out, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// Microseconds with the nanoseconds as three decimals.
void append_us(std::string& out, int64_t ns) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  append_format(out, "%lld.%03lld", static_cast<long long>(ns / 1000),
                static_cast<long long>(ns % 1000));
}

}  // namespace

void SummaryBuilder::add(const Profile& profile) {
  struct Open {
    int64_t end_ns;
    std::string_view name;
  };
  std::vector<Open> open;  // the phases enclosing the current event on its thread
  int tid = -1;
  for (const Event& e : profile.events) {
    if (e.category == kOp) {
      Op& op = ops_[e.name];
      ++op.calls;
      op.ns += e.duration_ns;
      continue;
    }
    if (e.category != kPhase) continue;
    if (e.tid != tid) {
      open.clear();
      tid = e.tid;
    }
    while (!open.empty() && open.back().end_ns <= e.start_ns) open.pop_back();
    Phase& phase = phases_[e.name];
    phase.self_ns += e.duration_ns;
    if (std::find(phase.tids.begin(), phase.tids.end(), e.tid) == phase.tids.end()) {
      phase.tids.push_back(e.tid);
    }
    int64_t end = e.start_ns + e.duration_ns;
    if (!open.empty() && open.back().end_ns >= end) {
      phases_[open.back().name].self_ns -= e.duration_ns;  // a nested phase is not its parent's
    }
    open.push_back({end, e.name});
  }
}

void SummaryBuilder::clear() {
  phases_.clear();
  ops_.clear();
}

Summary SummaryBuilder::summarize(int64_t steps, int64_t wall_ns, int top_ops) const {
  Summary s;
  s.steps = steps;
  if (steps <= 0) return s;
  const double per_step = 1e-6 / static_cast<double>(steps);  // ns in all -> ms per step
  s.wall_ms_per_step = static_cast<double>(wall_ns) * per_step;
  auto percent_of_step = [&](double ms) {
    return s.wall_ms_per_step > 0 ? 100 * ms / s.wall_ms_per_step : 0;
  };

  std::vector<std::pair<std::string_view, const Phase*>> phases;
  for (const auto& [name, phase] : phases_) phases.emplace_back(name, &phase);
  std::stable_sort(phases.begin(), phases.end(), [](const auto& a, const auto& b) {
    return phase_rank(a.first) < phase_rank(b.first);
  });
  double accounted = 0;
  for (const auto& [name, phase] : phases) {
    PhaseTime t;
    t.name = std::string(name);
    t.ms_per_step = static_cast<double>(std::max<int64_t>(phase->self_ns, 0)) * per_step /
                    static_cast<double>(std::max<size_t>(phase->tids.size(), 1));
    t.percent = percent_of_step(t.ms_per_step);
    accounted += t.ms_per_step;
    s.phases.push_back(std::move(t));
  }
  PhaseTime other{"other", std::max(0.0, s.wall_ms_per_step - accounted), 0};
  other.percent = percent_of_step(other.ms_per_step);
  s.phases.push_back(std::move(other));

  std::vector<std::pair<std::string_view, Op>> ops(ops_.begin(), ops_.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
    return a.second.ns != b.second.ns ? a.second.ns > b.second.ns : a.first < b.first;
  });
  int64_t kernel_ns = 0;
  for (const auto& [name, op] : ops) kernel_ns += op.ns;
  s.kernel_ms_per_step = static_cast<double>(kernel_ns) * per_step;
  for (const auto& [name, op] : ops) {
    if (static_cast<int>(s.ops.size()) >= top_ops) break;
    OpTime t;
    t.name = std::string(name);
    t.calls_per_step = static_cast<double>(op.calls) / static_cast<double>(steps);
    t.ms_per_step = static_cast<double>(op.ns) * per_step;
    t.percent =
        kernel_ns > 0 ? 100.0 * static_cast<double>(op.ns) / static_cast<double>(kernel_ns) : 0;
    s.ops.push_back(std::move(t));
  }
  return s;
}

std::string Summary::to_string() const {
  std::string out;
  append_format(out, "profile of %lld step(s): %.3f ms per step, %.3f ms of it in kernels\n",
                static_cast<long long>(steps), wall_ms_per_step, kernel_ms_per_step);
  append_format(out, "  %-34s %10s %7s\n", "phase", "ms/step", "%");
  for (const PhaseTime& p : phases) {
    append_format(out, "  %-34s %10.3f %7.1f\n", p.name.c_str(), p.ms_per_step, p.percent);
  }
  append_format(out, "  %-34s %10s %10s %7s\n", "op (kernel)", "calls/step", "ms/step", "% kern");
  for (size_t i = 0; i < ops.size(); ++i) {
    append_format(out, "  %-34s %10.1f %10.3f %7.1f", ops[i].name.c_str(), ops[i].calls_per_step,
                  ops[i].ms_per_step, ops[i].percent);
    if (i + 1 < ops.size()) out += '\n';
  }
  return out;
}

std::string chrome_trace_json(const Profile& profile, std::string_view process_name) {
  std::string out;
  out.reserve(128 + profile.events.size() * 110);
  const int pid = profile.pid;
  out += "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"origin_unix_us\":";
  out += std::to_string(profile.origin_unix_us);
  out += "},\"traceEvents\":[\n";
  append_format(
      out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", pid);
  append_json_string(out, process_name);
  out += "}}";
  for (const auto& [tid, name] : profile.thread_names) {
    append_format(
        out,
        ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid,
        tid);
    append_json_string(out, name);
    out += "}}";
  }
  for (const Event& e : profile.events) {
    out += ",\n{\"ph\":\"X\",\"name\":";
    append_json_string(out, e.name);
    out += ",\"cat\":";
    append_json_string(out, e.category);
    out += ",\"ts\":";
    append_us(out, e.start_ns);
    out += ",\"dur\":";
    append_us(out, e.duration_ns);
    append_format(out, ",\"pid\":%d,\"tid\":%d}", pid, e.tid);
  }
  out += "\n]}\n";
  return out;
}

}  // namespace cadre::profiler
