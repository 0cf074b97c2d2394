#include "keras/fit_state.h"

#include <optional>
#include <sstream>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::keras::internal {

namespace {

std::string number(double v) {
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.17g", v);
  return buffer;
}

// A number this file wrote (with %.17g, so never out of a double's range): anything else,
// an out-of-range one included, means the file is damaged.
double parse_number(const std::string& text, const std::string& source) {
  std::optional<double> value = parse_double(text, OutOfRange::kReject);
  if (!value) throw DataLossError(str_cat(source, ": '", text, "' is not a number"));
  return *value;
}

}  // namespace

std::string encode_logs(const Logs& logs) {
  std::string out;
  for (const auto& [name, value] : logs) out += str_cat(name, "=", number(value), "\n");
  return out;
}

Logs decode_logs(const std::string& text) {
  Logs logs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.rfind('=');
    if (eq == std::string::npos) throw DataLossError(str_cat("epoch logs: bad line '", line, "'"));
    logs[line.substr(0, eq)] = parse_number(line.substr(eq + 1), "epoch logs");
  }
  return logs;
}

// One "key value" per line; each epoch done is "epoch N" followed by its logs as
// "log name value".
std::string encode_fit_state(const FitState& s) {
  std::string out = str_cat("start_step ", s.start_step, "\ninitial_epoch ", s.initial_epoch,
                            "\nsteps_per_epoch ", s.steps_per_epoch, "\nlearning_rate ",
                            number(s.learning_rate), "\n");
  for (size_t i = 0; i < s.history.epoch.size(); ++i) {
    out += str_cat("epoch ", s.history.epoch[i], "\n");
    for (const auto& [name, values] : s.history.history) {
      if (i < values.size()) out += str_cat("log ", name, " ", number(values[i]), "\n");
    }
  }
  return out;
}

FitState decode_fit_state(const std::string& text, const std::string& source) {
  FitState s;
  std::istringstream in(text);
  std::string line;
  bool has_start = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key, a, b;
    fields >> key >> a >> b;
    if (key == "start_step") {
      s.start_step = static_cast<int64_t>(parse_number(a, source));
      has_start = true;
    } else if (key == "initial_epoch") {
      s.initial_epoch = static_cast<int>(parse_number(a, source));
    } else if (key == "steps_per_epoch") {
      s.steps_per_epoch = static_cast<int64_t>(parse_number(a, source));
    } else if (key == "learning_rate") {
      s.learning_rate = parse_number(a, source);
    } else if (key == "epoch") {
      s.history.epoch.push_back(static_cast<int>(parse_number(a, source)));
    } else if (key == "log") {
      s.history.history[a].push_back(parse_number(b, source));
    } else if (!key.empty()) {
      throw DataLossError(str_cat(source, ": unexpected line '", line, "'"));
    }
  }
  if (!has_start) throw DataLossError(str_cat(source, ": not a fit state (no start_step)"));
  return s;
}

std::optional<FitState> read_fit_state(Env& env, const std::string& backup_dir) {
  std::string path = backup_dir + "/" + kFitStateFile;
  if (!env.file_exists(path)) return std::nullopt;
  return decode_fit_state(env.read_file(path), path);
}

void write_fit_state(Env& env, const std::string& backup_dir, const FitState& state) {
  env.create_dir(backup_dir);
  std::string path = backup_dir + "/" + kFitStateFile;
  std::string temporary = path + ".tmp";
  env.write_file(temporary, encode_fit_state(state));
  env.sync_file(temporary);
  env.rename_file(temporary, path);
  env.sync_dir(backup_dir);
}

void remove_fit_state(Env& env, const std::string& backup_dir) {
  env.remove_file(backup_dir + "/" + kFitStateFile);
}

}  // namespace cadre::keras::internal
