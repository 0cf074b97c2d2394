// Every file the framework writes or publishes goes through an Env (as leveldb's): the
// checkpoint state, leases, exports, the evaluator's cursor, the training-finished marker,
// TensorBoard event files, TFRecord files and the dataset file cache; so do the data files
// the io readers read (TFRecord, CSV, IDX). Tests substitute an Env that records each call
// and fails the n-th one, to check that a crash between any two steps of a publish leaves
// the previous file intact, or that fails reads, to check what a reader makes of an I/O
// error.
//
// HDF5 writes and reads checkpoint files through its own POSIX driver; an Env covers
// everything around that: syncing, renaming, listing, the clock.
//
// Failures throw Cadre's typed errors naming the path and the system's reason: NotFoundError
// (ENOENT), PermissionDeniedError, ResourceExhaustedError (ENOSPC, EDQUOT), UnavailableError
// (anything else). An Env is safe for concurrent use from several threads, and so is a
// RandomAccessFile; a WritableFile is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cadre {

// A file open for writing, buffered in the process until flush().
class WritableFile {
 public:
  virtual ~WritableFile() = default;  // closes; errors are lost there, so close() first
  virtual void append(std::string_view data) = 0;
  // Hands what is buffered to the operating system: other processes then read it.
  virtual void flush() = 0;
  // flush(), then waits until the data is on disk (fsync).
  virtual void sync() = 0;
  // flush() and close; later calls do nothing.
  virtual void close() = 0;
  // Bytes in the file: what was there when opened to append, plus everything appended.
  virtual uint64_t size() const = 0;
};

// A file open for reading at any offset (pread(2)). Safe for concurrent use from several
// threads. It sees what the file holds at the time of each read: a file that grows shows
// the new bytes to later reads.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to `n` bytes at `offset`. Returns them as a view of `scratch` (which must hold
  // `n` bytes) or of memory the file owns, valid until the next read or the file's end of
  // life; fewer than `n` bytes only where the file ends (none at or past its end). Throws
  // the Env's typed error naming the path when the read fails.
  virtual std::string_view read(uint64_t offset, size_t n, char* scratch) const = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  virtual bool file_exists(const std::string& path) = 0;
  virtual uint64_t file_size(const std::string& path) = 0;
  // When `path` was last modified, in seconds since the Unix epoch.
  virtual double modified_seconds(const std::string& path) = 0;
  // Names (not paths) of the entries of `dir`, without "." and "..", in no particular order.
  virtual std::vector<std::string> list_dir(const std::string& dir) = 0;
  virtual std::string read_file(const std::string& path) = 0;
  // Opens `path` for reading (NotFoundError when it does not exist). The file may outlive
  // the Env.
  virtual std::unique_ptr<RandomAccessFile> new_random_access_file(const std::string& path) = 0;
  // Creates or truncates `path` and writes `contents`; does not sync.
  virtual void write_file(const std::string& path, std::string_view contents) = 0;
  // Creates or truncates `path` (with `append`, keeps what is there and writes after it).
  virtual std::unique_ptr<WritableFile> new_writable_file(const std::string& path,
                                                          bool append = false) = 0;
  // Cuts `path` to its first `size` bytes.
  virtual void truncate_file(const std::string& path, uint64_t size) = 0;
  // fsync of the file's data and metadata.
  virtual void sync_file(const std::string& path) = 0;
  // fsync of a directory, which makes renames and removals inside it durable.
  virtual void sync_dir(const std::string& dir) = 0;
  // Atomically replaces `to` (rename(2)); both must be on one file system. `from` may be a
  // directory when `to` does not exist.
  virtual void rename_file(const std::string& from, const std::string& to) = 0;
  // Returns false when the file did not exist.
  virtual bool remove_file(const std::string& path) = 0;
  // Removes `dir` and everything in it; false when it did not exist.
  virtual bool remove_dir_recursively(const std::string& dir) = 0;
  // Creates `dir` and missing parents; succeeds when it exists already.
  virtual void create_dir(const std::string& dir) = 0;
  // Wall-clock time in seconds since the Unix epoch (leases compare it across processes).
  virtual double now_seconds() = 0;
};

// The real file system. Each call returns a new, independent object.
std::shared_ptr<Env> posix_env();

// Publishes `contents` at `path` atomically: writes a temporary file beside it, syncs it
// (`durable`), renames it over `path` and syncs the directory (`durable`). Without the
// syncs a crash of the process still leaves the old or the new file whole; a crash of the
// machine may leave either, or an empty or partial file. On failure the temporary file is
// removed (best effort) and `path` is untouched.
void write_file_atomically(Env& env, const std::string& path, std::string_view contents,
                           bool durable = true);

// A temporary name beside `path`, unique across processes and hosts, that names its owner:
// "<path>.tmp-<counter>-<pid>-<start>-<host>". Readers never treat such names as finished
// files.
std::string temporary_path_for(const std::string& path);
bool is_temporary_name(std::string_view name);
// Whether the process that made temporary file `name` is certainly gone (it ran on this
// host and no longer does), so that what it left may be removed. False for another host's
// process, a live one, or a name that is not a temporary.
bool temporary_owner_is_dead(std::string_view name);
// Whether the calling process made temporary file `name`.
bool temporary_of_this_process(std::string_view name);
// Whether temporary file `dir/name` was abandoned: its owner is dead, or it is another
// host's (or unnamed) and has not changed for `stale_seconds`.
bool temporary_is_abandoned(Env& env, const std::string& dir, const std::string& name,
                            double stale_seconds = 6 * 3600);

// "a/b" from ("a", "b"); `name` unchanged when absolute.
std::string join_path(const std::string& dir, const std::string& name);
// The directory part of `path` ("." when it has none) and the last component.
std::string dir_name(const std::string& path);
std::string base_name(const std::string& path);

}  // namespace cadre
