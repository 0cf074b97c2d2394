#include "checkpoint/parts.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/checkpoint/writer.h"
#include "checkpoint/file_builder.h"
#include "core/base/crc32c.h"
#include "core/base/file_descriptor.h"
#include "core/base/file_errors.h"
#include "core/base/strings.h"

namespace cadre::checkpoint {
namespace {

constexpr char kPartInfix[] = ".part-";

bool all_digits(std::string_view text) {
  if (text.empty() || text.size() > 18) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

void remove_logged(Env& env, const std::string& path, const char* why) {
  try {
    LOG(INFO) << "removing " << path << ", " << why;
    env.remove_file(path);
  } catch (const std::exception& error) {
    LOG(WARNING) << "could not remove " << path << ": " << error.what();
  }
}

// file_checksum of `path`, whose bytes in `known` (ranges written by this process, with
// their CRCs) are not read back: only the HDF5 objects and padding between them are, a few
// KiB of a large part. Reading a 1 GiB part back took 0.17-0.20 s of CPU, a quarter of its
// write (docs/BENCHMARKS.md, MultiWorkerMirrored scale).
// Ranges that do not fit the file (overlapping, past its end) fall back to reading it all.
WrittenPart checksum_skipping(const std::string& path, std::vector<internal::DirectRange> known) {
  FileDescriptor in(path, O_RDONLY);
  struct stat info {};
  if (in.get() < 0 || ::fstat(in.get(), &info) != 0) {
    throw_errno_error(str_cat("cannot read ", path), errno);
  }
  const auto size = static_cast<uint64_t>(info.st_size);
  std::sort(known.begin(), known.end(),
            [](const auto& a, const auto& b) { return a.begin < b.begin; });
  for (size_t i = 0; i < known.size(); ++i) {
    if (known[i].end < known[i].begin || known[i].end > size ||
        (i > 0 && known[i].begin < known[i - 1].end)) {
      return file_checksum(path);
    }
  }
  std::vector<char> block(size_t{2} << 20);
  WrittenPart result;
  auto read_until = [&](uint64_t until) {
    while (result.bytes < until) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(block.size(), until - result.bytes));
      ssize_t got = ::pread(in.get(), block.data(), want, static_cast<off_t>(result.bytes));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        throw DataLossError(str_cat("cannot read ", path, ": ",
                                    got == 0 ? "it ended early" : std::strerror(errno)));
      }
      result.crc32c = crc32c::extend(result.crc32c, block.data(), static_cast<size_t>(got));
      result.bytes += static_cast<uint64_t>(got);
    }
  };
  for (const internal::DirectRange& range : known) {
    read_until(range.begin);
    result.crc32c = crc32c::combine(result.crc32c, range.crc32c, range.end - range.begin);
    result.bytes = range.end;
  }
  read_until(size);
  return result;
}

}  // namespace

std::string part_file_name(const std::string& basename, int64_t step, int index, int count,
                           const std::string& save_id) {
  return str_cat(basename, "-", step, kPartInfix, index, "-of-", count, ".", save_id, ".h5");
}

std::optional<int64_t> part_step(const std::string& file_name, const std::string& basename) {
  std::string prefix = basename + "-";
  if (!file_name.starts_with(prefix) || !file_name.ends_with(".h5")) return std::nullopt;
  size_t infix = file_name.find(kPartInfix, prefix.size());
  if (infix == std::string::npos) return std::nullopt;
  std::string_view digits(file_name.data() + prefix.size(), infix - prefix.size());
  if (!all_digits(digits)) return std::nullopt;
  return std::stoll(std::string(digits));
}

WrittenPart write_part_file(const std::string& model_dir, const std::string& file_name,
                            const CheckpointData& data, const RowSources& sources,
                            const RowsInPlaceSources& in_place) {
  if (file_name.empty() || file_name.find('/') != std::string::npos ||
      !file_name.ends_with(".h5")) {
    throw InvalidArgumentError(
        str_cat("'", file_name, "' is not the file name of a checkpoint part"));
  }
  std::shared_ptr<Env> env = posix_env();
  std::string path = join_path(model_dir, file_name);
  std::string temporary = temporary_path_for(path);
  WrittenPart written;
  try {
    std::vector<internal::DirectRange> direct =
        internal::write_checkpoint_file(temporary, data, {}, sources, in_place);
    env->sync_file(temporary);
    // The checksum covers the bytes as the file holds them: the datasets' data as handed to
    // pwrite (checksummed as it was written), the rest read back.
    written = checksum_skipping(temporary, std::move(direct));
    env->rename_file(temporary, path);
  } catch (...) {
    try {
      env->remove_file(temporary);
    } catch (const std::exception& error) {
      LOG(WARNING) << "could not remove " << temporary << ": " << error.what();
    }
    throw;
  }
  env->sync_dir(model_dir);
  return written;
}

WrittenPart file_checksum(const std::string& path) {
  FileDescriptor in(path, O_RDONLY);
  if (in.get() < 0) {
    if (errno == ENOENT) throw NotFoundError(str_cat(path, " does not exist"));
    throw_errno_error(str_cat("cannot open ", path), errno);
  }
  std::vector<char> block(size_t{2} << 20);
  WrittenPart result;
  for (;;) {
    ssize_t got = ::read(in.get(), block.data(), block.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw DataLossError(str_cat("cannot read ", path, ": ", std::strerror(errno)));
    if (got == 0) break;
    result.crc32c = crc32c::extend(result.crc32c, block.data(), static_cast<size_t>(got));
    result.bytes += static_cast<uint64_t>(got);
  }
  return result;
}

void remove_parts(Env& env, const std::string& model_dir, const std::string& basename, int64_t step,
                  const std::set<std::string>& keep) {
  std::vector<std::string> names;
  try {
    names = env.list_dir(model_dir);
  } catch (const std::exception& error) {
    LOG(WARNING) << "cannot list " << model_dir << ": " << error.what();
    return;
  }
  for (const std::string& name : names) {
    if (part_step(name, basename) == step && !keep.count(name)) {
      remove_logged(env, join_path(model_dir, name),
                    "a part of a checkpoint deleted or saved again");
    }
  }
}

void remove_orphan_parts(Env& env, const std::string& model_dir, const std::string& basename) {
  std::set<int64_t> published;
  for (const auto& [step, path] : list_checkpoint_files(env, model_dir, basename)) {
    published.insert(step);
  }
  for (const std::string& name : env.list_dir(model_dir)) {
    std::optional<int64_t> step = part_step(name, basename);
    if (step && !published.count(*step)) {
      remove_logged(env, join_path(model_dir, name), "a part of a save that did not finish");
    }
  }
}

}  // namespace cadre::checkpoint
