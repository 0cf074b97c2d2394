// Threads that work behind training (a checkpoint's copy and write) and must not take its
// cores at the moment they wake.
#pragma once

namespace cadre {

// Makes the calling thread a background one, named `name` (at most 15 characters: what
// top -H and /proc/<pid>/task/<tid>/comm show). Under SCHED_BATCH a waking thread never
// preempts the thread running on a busy core: it waits for that thread's time slice to
// end (under the default policy it runs at once, and a writer woken on the training
// thread's core would hold it for its whole write). `niceness` more lowers its share of a
// contended core once it runs. Best effort: a refusal (a seccomp filter, an exotic
// kernel) leaves the thread as it was.
void make_background_thread(const char* name, int niceness);

}  // namespace cadre
