// The file-system operations the checkpoint module needs, behind an interface (as leveldb's
// Env) so that tests can inject failures between the steps of an atomic publish and check
// that every step happens in the right order.
//
// HDF5 itself writes and reads checkpoint files through its own POSIX driver; Env covers
// everything around that: syncing, renaming, listing, the state and lease files, the clock.
//
// Failures throw Cadre's typed errors naming the path and the system's reason: NotFoundError
// (ENOENT), PermissionDeniedError, ResourceExhaustedError (ENOSPC, EDQUOT), UnavailableError
// (anything else). Implementations are safe for concurrent use from several threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cadre::checkpoint {

class Env {
 public:
  virtual ~Env() = default;

  virtual bool file_exists(const std::string& path) = 0;
  // Names (not paths) of the entries of `dir`, without "." and "..", in no particular order.
  virtual std::vector<std::string> list_dir(const std::string& dir) = 0;
  virtual std::string read_file(const std::string& path) = 0;
  // Creates or truncates `path` and writes `contents`; does not sync.
  virtual void write_file(const std::string& path, std::string_view contents) = 0;
  // fsync of the file's data and metadata.
  virtual void sync_file(const std::string& path) = 0;
  // fsync of a directory, which makes renames and removals inside it durable.
  virtual void sync_dir(const std::string& dir) = 0;
  // Atomically replaces `to` (rename(2)); both must be on one file system.
  virtual void rename_file(const std::string& from, const std::string& to) = 0;
  // Returns false when the file did not exist.
  virtual bool remove_file(const std::string& path) = 0;
  // Creates `dir` and missing parents; succeeds when it exists already.
  virtual void create_dir(const std::string& dir) = 0;
  // Wall-clock time in seconds since the Unix epoch (leases compare it across processes).
  virtual double now_seconds() = 0;
};

// The real file system. Each call returns a new, independent object.
std::shared_ptr<Env> posix_env();

// Publishes `contents` at `path` atomically and durably: writes a temporary file beside it,
// syncs it, renames it over `path` and syncs the directory. On failure the temporary file
// is removed (best effort) and `path` is untouched.
void write_file_atomically(Env& env, const std::string& path, std::string_view contents);

// A temporary name beside `path` that is unique in this process and across processes:
// "<path>.tmp-<pid>-<counter>". Readers never treat such names as checkpoints.
std::string temporary_path_for(const std::string& path);
bool is_temporary_name(std::string_view name);

// "a/b" from ("a", "b"); `name` unchanged when absolute.
std::string join_path(const std::string& dir, const std::string& name);
// The directory part of `path` ("." when it has none) and the last component.
std::string dir_name(const std::string& path);
std::string base_name(const std::string& path);

}  // namespace cadre::checkpoint
