// ProcessId: identities of processes of this host, their tokens, and liveness checks that
// survive processes ending while they look.
#include "core/base/process_id.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace cadre {
namespace {

TEST(ProcessIdTest, ThisProcessIsAliveAndItsTokenRoundTrips) {
  const ProcessId& self = this_process();
  EXPECT_EQ(self.pid, ::getpid());
  EXPECT_GT(self.start_ticks, 0u);
  EXPECT_EQ(liveness(self), Liveness::kAlive);
  std::optional<ProcessId> parsed = parse_process_token(to_token(self));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->pid, self.pid);
  EXPECT_EQ(parsed->start_ticks, self.start_ticks);
  EXPECT_EQ(parsed->host, self.host);
  EXPECT_FALSE(parse_process_token("12-x-host").has_value());
}

TEST(ProcessIdTest, AReapedChildIsDead) {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  std::optional<ProcessId> id = process_on_this_host(child);
  ASSERT_TRUE(id.has_value());  // running, or a zombie until reaped
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_FALSE(process_on_this_host(child).has_value());
  EXPECT_EQ(liveness(*id), Liveness::kDead);
}

// A zombie runs no more: what it left (a lease, a temporary) is a dead process's at once, not
// once its parent reaps it (init reaps an orphan when it gets to it, which took over a
// second here: an evaluator killed with its launcher kept its lease past its successor's exit).
TEST(ProcessIdTest, AnExitedChildNotYetReapedIsDead) {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  std::optional<ProcessId> id = process_on_this_host(child);
  ASSERT_TRUE(id.has_value());
  // Until it has exited; it stays a zombie, since nothing reaps it before waitpid below.
  Liveness seen = Liveness::kAlive;
  for (int i = 0; i < 500 && seen == Liveness::kAlive; ++i) {
    seen = liveness(*id);
    if (seen == Liveness::kAlive) ::usleep(2000);
  }
  EXPECT_EQ(seen, Liveness::kDead);
  EXPECT_TRUE(process_on_this_host(child).has_value()) << "a zombie is still a process";
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
}

// Looking at processes while they end (a killed evaluator whose lease the chief checks):
// reading /proc/<pid>/stat of a process reaped meanwhile fails with ESRCH, which must be
// "no such process", never an exception.
TEST(ProcessIdTest, ProcessesEndingWhileLookedAtAreNeverAnError) {
  std::atomic<pid_t> latest{0};
  std::atomic<bool> done{false};
  std::thread looker([&] {
    while (!done.load()) {
      pid_t pid = latest.load();
      if (pid > 0) {
        EXPECT_NO_THROW({
          std::optional<ProcessId> id = process_on_this_host(pid);
          if (id) liveness(*id);
        });
      }
    }
  });
  for (int i = 0; i < 300; ++i) {
    pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    latest.store(child);
    ::waitpid(child, nullptr, 0);
  }
  done.store(true);
  looker.join();
}

}  // namespace
}  // namespace cadre
