// A POSIX shared-memory segment that the processes of one host map together, and that
// outlives none of them: the creator names it /dev/shm/cadre-<pid>-<random>, and once every
// process has mapped it the name is unlinked, so the memory goes with the last process,
// however it ends. A creator killed before that leaves a name behind; the next
// create_segment() on the host removes the names of creators that are gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cadre {

class Segment {
 public:
  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  ~Segment();  // unmaps; the name, if still there, is left to unlink()

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Removes the name (idempotent; a name another process removed first is fine).
  void unlink();

 private:
  friend Segment create_segment(size_t bytes);
  friend Segment open_segment(const std::string& name, size_t bytes);
  void* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
};

// A new zeroed segment of `bytes`, mode 0600. Throws UnavailableError with the system's
// reason (e.g. /dev/shm full).
Segment create_segment(size_t bytes);

// Maps the segment `name` made by another process of this host. Throws NotFoundError when
// there is no such name here (another host, or another /dev/shm), UnavailableError when it
// cannot be mapped or is not `bytes` long.
Segment open_segment(const std::string& name, size_t bytes);

// The inode of this process's pid namespace (0 when unknown): a pid means something only to
// processes of the same namespace.
uint64_t pid_namespace();

// Removes /dev/shm/cadre-<pid>-* names whose creating process no longer exists; returns how
// many. Names of live processes and of other users are left alone.
int remove_orphan_segments();

}  // namespace cadre
