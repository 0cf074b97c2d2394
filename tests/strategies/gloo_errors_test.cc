// Gloo's collectives when a rank is missing, every rank a thread of this process meeting
// through an in-memory store on 127.0.0.1: peers that never come, a peer that leaves, hangs,
// or leaves but lives on end the others' rendezvous or collective, naming it.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "cadre/base/errors.h"
#include "strategies/cluster/memory_store.h"
#include "strategies/collectives/gloo/collective.h"
#include "tests/strategies/gloo_test.h"

namespace cadre {
namespace {

using testing::within;

TEST(GlooErrorsTest, PeersThatNeverComeEndTheRendezvousAtTheTimeout) {
  MemoryStore store;
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(gloo_collective(store, 0, 2, "127.0.0.1", within(1)), DeadlineExceededError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// Rank 0 ("chief:0") of two, once rank 1 ("worker:0") has connected and closed its end.
std::unique_ptr<ProcessCollective> chief_whose_worker_left(MemoryStore& store) {
  GlooOptions named = within(60);
  named.rank_names = {"chief:0", "worker:0"};
  // The worker leaves once the chief has connected (leaving sooner fails the chief's connect).
  auto leaver = std::async(std::launch::async, [&] {
    auto worker = gloo_collective(store, 1, 2, "127.0.0.1", named);
    store.wait({"test/chief connected"}, 60);
  });
  auto collective = gloo_collective(store, 0, 2, "127.0.0.1", named);
  store.set("test/chief connected", "");
  leaver.get();
  return collective;
}

// A peer that leaves while the others wait in an all-reduce ends their wait at once with
// UnavailableError naming the collective, not at the timeout, and the process lives on.
TEST(GlooErrorsTest, APeerThatLeavesEndsTheOthersAllReduceAtOnce) {
  MemoryStore store;
  auto start = std::chrono::steady_clock::now();
  auto collective = chief_whose_worker_left(store);
  std::vector<float> x(1 << 20, 1.0f);
  try {
    collective->sum(x.data(), x.size());
    ADD_FAILURE() << "the all-reduce returned without its peer";
  } catch (const UnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find("all-reduce across 2 processes (this is chief:0): a peer "
                                         "is gone (worker:0)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// A root that broadcasts to a peer that left gets an error naming the peer, and its thread's
// signal mask is as it was: SIGPIPE, which the collective blocks while it writes, neither
// left blocked nor pending. (Whether a write raises SIGPIPE depends on how the peer's
// connection ended: MultiWorkerTest's SIGKILLed worker shows it.)
TEST(GlooErrorsTest, ABroadcastToAPeerThatLeftNamesItAndLeavesTheSignalMaskAsItWas) {
  MemoryStore store;
  auto collective = chief_whose_worker_left(store);
  std::vector<char> bytes(8 << 20, 'x');
  std::string error;
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      collective->broadcast(bytes.data(), bytes.size(), /*root=*/0);
    } catch (const UnavailableError& e) {
      error = e.what();
    }
  }
  EXPECT_NE(error.find("broadcast across 2 processes (this is chief:0): a peer is gone "
                       "(worker:0)"),
            std::string::npos)
      << error;
  sigset_t mask;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &mask), 0);
  EXPECT_EQ(sigismember(&mask, SIGPIPE), 0) << "SIGPIPE left blocked";
  sigset_t pending;
  ASSERT_EQ(sigpending(&pending), 0);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0) << "a SIGPIPE left pending";
}

// Rank 0 of a connected pair ("chief:0" and "worker:0") all-reduces while rank 1 never
// does, and 300 ms in runs `meanwhile` with itself: how rank 0's sum ended, and after how long.
struct SumEnded {
  std::string error;  // empty when the sum returned
  bool aborted = false;
  std::chrono::steady_clock::duration after;
};

SumEnded sum_while_the_peer_does_not(GlooOptions options,
                                     const std::function<void(ProcessCollective&)>& meanwhile) {
  options.rank_names = {"chief:0", "worker:0"};
  MemoryStore store;
  auto other = std::async(std::launch::async,
                          [&] { return gloo_collective(store, 1, 2, "127.0.0.1", options); });
  auto collective = gloo_collective(store, 0, 2, "127.0.0.1", options);
  auto peer = other.get();  // connected, and never calls sum
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    meanwhile(*peer);
  });
  SumEnded ended;
  auto start = std::chrono::steady_clock::now();
  std::vector<float> x(1 << 20, 1.0f);
  try {
    collective->sum(x.data(), x.size());
  } catch (const std::exception& e) {
    ended.error = e.what();
    ended.aborted = dynamic_cast<const AbortedError*>(&e) != nullptr;
  }
  ended.after = std::chrono::steady_clock::now() - start;
  later.join();
  return ended;
}

// A peer that hangs (stopped, or its host unreachable) closes no connection: the others'
// reads would wait for the timeout. Once the coordination service declares it dead, the
// waiting operation ends at once with the service's words.
TEST(GlooErrorsTest, AHungPeerEndsTheWaitWhenTheServiceDeclaresItDead) {
  std::atomic<bool> declared{false};
  GlooOptions options = within(60);
  options.peer_failure = [&] {
    return declared ? std::string("task worker:0 has sent no heartbeat for 10 s") : "";
  };
  SumEnded ended =
      sum_while_the_peer_does_not(options, [&](ProcessCollective&) { declared = true; });
  EXPECT_TRUE(ended.aborted) << ended.error;
  EXPECT_NE(ended.error.find("all-reduce across 2 processes (this is chief:0): the cluster "
                             "failed: task worker:0 has sent no heartbeat"),
            std::string::npos)
      << ended.error;
  EXPECT_LT(ended.after, std::chrono::seconds(5));
}

// A process that leaves (its training failed, and it lives on) ends its peers' wait at once
// although its connections stay open, and cannot take part again.
TEST(GlooErrorsTest, ARankThatLeavesButLivesOnEndsTheOthersWaitAtOnce) {
  std::vector<float> x(16, 1.0f);
  bool refused = false;
  SumEnded ended = sum_while_the_peer_does_not(within(60), [&](ProcessCollective& peer) {
    peer.leave();
    try {
      peer.sum(x.data(), x.size());
    } catch (const Error&) {
      refused = true;
    }
  });
  EXPECT_NE(ended.error.find("a peer is gone (worker:0)"), std::string::npos) << ended.error;
  EXPECT_LT(ended.after, std::chrono::seconds(5));
  EXPECT_TRUE(refused);
}

}  // namespace
}  // namespace cadre
