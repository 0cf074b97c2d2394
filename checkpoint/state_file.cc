#include "cadre/checkpoint/state_file.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "cadre/base/errors.h"
#include "checkpoint/model_dir_checkpoints.h"
#include "core/base/strings.h"

namespace cadre::checkpoint {
namespace {

std::string quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string format_double(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

[[noreturn]] void bad_line(const std::string& source, int line, std::string_view problem) {
  throw DataLossError(str_cat("checkpoint state file ", source, ", line ", line, ": ", problem));
}

std::string unquote(std::string_view value, const std::string& source, int line) {
  if (value.size() < 2 || value.front() != '"' || value.back() != '"') {
    bad_line(source, line, "expected a quoted string");
  }
  std::string out;
  for (size_t i = 1; i + 1 < value.size(); ++i) {
    char c = value[i];
    if (c == '\\') {
      if (i + 2 >= value.size()) bad_line(source, line, "dangling escape");
      c = value[++i];
      if (c == 'n') c = '\n';
    } else if (c == '"') {
      bad_line(source, line, "unescaped quote");
    }
    out += c;
  }
  return out;
}

// A timestamp, which other tools may write too: one beyond a double's range saturates (to
// infinity or zero) rather than making the whole state file unreadable.
double parse_number(std::string_view value, const std::string& source, int line) {
  std::optional<double> number = parse_double(value, OutOfRange::kSaturate);
  if (!number) bad_line(source, line, str_cat("expected a number, got '", value, "'"));
  return *number;
}

std::string_view trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t\r");
  return text.substr(begin, end - begin + 1);
}

}  // namespace

std::string serialize_state(const CheckpointState& state) {
  std::string text = str_cat("model_checkpoint_path: ", quote(state.model_checkpoint_path), "\n");
  for (const std::string& path : state.all_model_checkpoint_paths) {
    text += str_cat("all_model_checkpoint_paths: ", quote(path), "\n");
  }
  for (double timestamp : state.all_model_checkpoint_timestamps) {
    text += str_cat("all_model_checkpoint_timestamps: ", format_double(timestamp), "\n");
  }
  if (state.last_preserved_timestamp != 0) {
    text +=
        str_cat("last_preserved_timestamp: ", format_double(state.last_preserved_timestamp), "\n");
  }
  return text;
}

CheckpointState parse_state(std::string_view text, const std::string& source) {
  CheckpointState state;
  bool has_latest = false;
  int line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = trim(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) bad_line(source, line_number, "expected 'field: value'");
    std::string_view key = trim(line.substr(0, colon));
    std::string_view value = trim(line.substr(colon + 1));
    if (key == "model_checkpoint_path") {
      state.model_checkpoint_path = unquote(value, source, line_number);
      has_latest = true;
    } else if (key == "all_model_checkpoint_paths") {
      state.all_model_checkpoint_paths.push_back(unquote(value, source, line_number));
    } else if (key == "all_model_checkpoint_timestamps") {
      state.all_model_checkpoint_timestamps.push_back(parse_number(value, source, line_number));
    } else if (key == "last_preserved_timestamp") {
      state.last_preserved_timestamp = parse_number(value, source, line_number);
    }
  }
  if (!has_latest) {
    throw DataLossError(
        str_cat("checkpoint state file ", source, " has no model_checkpoint_path line"));
  }
  if (state.all_model_checkpoint_timestamps.size() != state.all_model_checkpoint_paths.size()) {
    // Written by a tool that keeps no timestamps: retention treats them as unknown (now).
    state.all_model_checkpoint_timestamps.clear();
  }
  return state;
}

std::optional<CheckpointState> read_state(Env& env, const std::string& model_dir) {
  std::string path = join_path(model_dir, kStateFileName);
  std::string text;
  try {
    text = env.read_file(path);
  } catch (const NotFoundError&) {
    return std::nullopt;
  }
  return parse_state(text, path);
}

void write_state(Env& env, const std::string& model_dir, const CheckpointState& state,
                 bool durable) {
  write_file_atomically(env, join_path(model_dir, kStateFileName), serialize_state(state), durable);
}

std::string resolve_checkpoint_path(const std::string& model_dir, const std::string& path) {
  return join_path(model_dir, path);
}

std::string checkpoint_file_name(const std::string& basename, int64_t step) {
  return str_cat(basename, "-", step, ".h5");
}

std::optional<int64_t> checkpoint_step(const std::string& file_name, const std::string& basename) {
  std::string prefix = basename + "-";
  if (!file_name.starts_with(prefix) || !file_name.ends_with(".h5")) return std::nullopt;
  std::string digits = file_name.substr(prefix.size(), file_name.size() - prefix.size() - 3);
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return std::stoll(digits);
}

std::vector<std::pair<int64_t, std::string>> list_checkpoint_files(Env& env,
                                                                   const std::string& model_dir,
                                                                   const std::string& basename) {
  std::vector<std::pair<int64_t, std::string>> files;
  std::vector<std::string> names;
  try {
    names = env.list_dir(model_dir);
  } catch (const NotFoundError&) {
    return files;
  }
  for (const std::string& name : names) {
    if (auto step = checkpoint_step(name, basename)) {
      files.emplace_back(*step, join_path(model_dir, name));
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::optional<std::string> latest_checkpoint(const std::string& model_dir, Env* env) {
  std::shared_ptr<Env> owned;
  if (env == nullptr) {
    owned = posix_env();
    env = owned.get();
  }
  for (const std::string& path : find_checkpoints(*env, model_dir).candidates) {
    if (checkpoint_exists(*env, path)) return path;
  }
  return std::nullopt;
}

}  // namespace cadre::checkpoint
