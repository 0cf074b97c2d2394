// The profiler: scopes, sessions, kernel and gradient events, the summary and the trace.
#include "cadre/runtime/profiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/linalg.h"
#include "cadre/ops/math.h"
#include "cadre/ops/random.h"
#include "cadre/ops/reduce.h"
#include "tests/support/mini_json.h"

namespace cadre::profiler {
namespace {

using testing::Json;
using testing::JsonParser;

std::vector<Event> named(const Profile& p, std::string_view name) {
  std::vector<Event> out;
  for (const Event& e : p.events) {
    if (e.name == name) out.push_back(e);
  }
  return out;
}

bool contains(const Event& outer, const Event& inner) {
  return outer.tid == inner.tid && outer.start_ns <= inner.start_ns &&
         inner.start_ns + inner.duration_ns <= outer.start_ns + outer.duration_ns;
}

TEST(ProfilerTest, OffRecordsNothing) {
  EXPECT_FALSE(enabled());
  { Scope scope("before_the_session"); }
  Tensor x = random_normal({8, 8});
  matmul(x, x);
  auto session = ProfilerSession::start();
  EXPECT_TRUE(enabled());
  Profile p = session->collect();
  EXPECT_TRUE(p.events.empty());
  session.reset();
  EXPECT_FALSE(enabled());
  { Scope scope("after_the_session"); }
  session = ProfilerSession::start();
  EXPECT_TRUE(session->collect().events.empty());
}

TEST(ProfilerTest, OneSessionAtATime) {
  auto session = ProfilerSession::start();
  EXPECT_THROW(ProfilerSession::start(), FailedPreconditionError);
  session.reset();
  EXPECT_NO_THROW(ProfilerSession::start());
}

TEST(ProfilerTest, KernelCallsAreEventsNamedByTheirKernel) {
  Tensor a = random_normal({32, 64}), b = random_normal({64, 16});
  auto session = ProfilerSession::start();
  Tensor c;
  {
    Scope scope("layer", kUser);
    c = matmul(a, b) + 1.0;
  }
  Profile p = session->collect();
  std::vector<Event> layer = named(p, "layer"), mm = named(p, "matmul"), add = named(p, "binary");
  ASSERT_EQ(layer.size(), 1u);
  ASSERT_EQ(mm.size(), 1u);
  ASSERT_GE(add.size(), 1u);
  EXPECT_EQ(mm[0].category, kOp);
  EXPECT_EQ(layer[0].category, kUser);
  EXPECT_TRUE(contains(layer[0], mm[0]));
  EXPECT_TRUE(contains(layer[0], add[0]));
  EXPECT_LE(mm[0].start_ns + mm[0].duration_ns, add[0].start_ns);
  EXPECT_EQ(p.thread_names.count(mm[0].tid), 1u);
  // Taken out: a second collect has nothing new.
  EXPECT_TRUE(session->collect().events.empty());
}

TEST(ProfilerTest, GradientFunctionsContainTheirKernels) {
  Tensor x = random_normal({16, 32}), w = random_normal({32, 8});
  auto session = ProfilerSession::start();
  GradientTape tape;
  tape.watch(w);
  Tensor loss = sum(matmul(x, w));
  Gradient g = tape.gradient(loss, w);
  Profile p = session->collect();
  std::vector<Event> grad = named(p, "matmul_grad");
  ASSERT_EQ(grad.size(), 1u);
  EXPECT_EQ(grad[0].category, kGrad);
  int inside = 0;
  for (const Event& e : named(p, "matmul")) inside += contains(grad[0], e);
  EXPECT_GE(inside, 1);  // the product that gives dw
}

TEST(ProfilerTest, ThreadsAreNamed) {
  auto session = ProfilerSession::start();
  int tid = 0;
  std::thread t([&] {
    set_thread_name("helper \"one\"");
    tid = static_cast<int>(::gettid());
    Scope scope("work");
  });
  t.join();
  Profile p = session->collect();
  ASSERT_EQ(named(p, "work").size(), 1u);
  EXPECT_EQ(named(p, "work")[0].tid, tid);
  EXPECT_EQ(p.thread_names.at(tid), "helper \"one\"");
}

TEST(ProfilerTest, AThreadKeepsABoundedNumberOfEventsBetweenCollects) {
  auto session = ProfilerSession::start();
  const int64_t limit = int64_t{1} << 18;
  for (int64_t i = 0; i < limit + 10; ++i) Scope scope("tick");
  Profile p = session->collect();
  EXPECT_EQ(static_cast<int64_t>(p.events.size()), limit);
  EXPECT_EQ(p.dropped_events, 10);
  { Scope scope("tock"); }
  p = session->collect();
  EXPECT_EQ(p.events.size(), 1u);
  EXPECT_EQ(p.dropped_events, 0);
}

TEST(ProfilerTest, PhasesFollowOneAnother) {
  auto session = ProfilerSession::start();
  {
    Phases phase("forward");
    phase.next("backward");
    { Scope op("k", kOp); }
    phase.next("update");
  }
  Profile p = session->collect();
  ASSERT_EQ(named(p, "forward").size(), 1u);
  ASSERT_EQ(named(p, "backward").size(), 1u);
  ASSERT_EQ(named(p, "update").size(), 1u);
  Event f = named(p, "forward")[0], b = named(p, "backward")[0], u = named(p, "update")[0];
  EXPECT_EQ(f.category, kPhase);
  EXPECT_LE(f.start_ns + f.duration_ns, b.start_ns);
  EXPECT_LE(b.start_ns + b.duration_ns, u.start_ns);
  EXPECT_TRUE(contains(b, named(p, "k")[0]));
}

// A profile written by hand: update (6 ms) contains all_reduce (2 ms); one thread.
Profile synthetic_step(int64_t offset_ns) {
  const int64_t ms = 1'000'000;
  Profile p;
  p.events = {
      {"input", kPhase, 1, offset_ns + 0, 1 * ms},
      {"forward", kPhase, 1, offset_ns + 1 * ms, 2 * ms},
      {"matmul", kOp, 1, offset_ns + 1 * ms, 1 * ms},
      {"binary", kOp, 1, offset_ns + 2 * ms, ms * 3 / 4},
      {"update", kPhase, 1, offset_ns + 3 * ms, 6 * ms},
      {"all_reduce", kPhase, 1, offset_ns + 4 * ms, 2 * ms},
      {"adam_update", kOp, 1, offset_ns + 7 * ms, ms / 2},
  };
  p.thread_names[1] = "main";
  return p;
}

TEST(ProfilerTest, SummaryCountsSelfTimePerStep) {
  SummaryBuilder builder;
  builder.add(synthetic_step(0));
  builder.add(synthetic_step(10'000'000));
  Summary s = builder.summarize(/*steps=*/2, /*wall_ns=*/20'000'000, /*top_ops=*/2);
  EXPECT_DOUBLE_EQ(s.wall_ms_per_step, 10);
  EXPECT_DOUBLE_EQ(s.kernel_ms_per_step, 2.25);
  std::vector<std::string> names;
  for (const PhaseTime& p : s.phases) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"input", "forward", "all_reduce", "update", "other"}));
  EXPECT_DOUBLE_EQ(s.phases[0].ms_per_step, 1);
  EXPECT_DOUBLE_EQ(s.phases[2].ms_per_step, 2);
  EXPECT_DOUBLE_EQ(s.phases[3].ms_per_step, 4);  // 6 less the all_reduce inside it
  EXPECT_DOUBLE_EQ(s.phases[3].percent, 40);
  EXPECT_DOUBLE_EQ(s.phases[4].ms_per_step, 1);  // 10 - 1 - 2 - 2 - 4
  ASSERT_EQ(s.ops.size(), 2u);
  EXPECT_EQ(s.ops[0].name, "matmul");
  EXPECT_DOUBLE_EQ(s.ops[0].calls_per_step, 1);
  EXPECT_NEAR(s.ops[0].percent, 100 / 2.25, 1e-9);
  EXPECT_EQ(s.ops[1].name, "binary");
  std::string text = s.to_string();
  for (const char* word : {"input", "forward", "all_reduce", "update", "other", "matmul"}) {
    EXPECT_NE(text.find(word), std::string::npos) << word << " in\n" << text;
  }
  EXPECT_EQ(text.find("adam_update"), std::string::npos);  // not among the top 2
}

TEST(ProfilerTest, ChromeTraceIsValidJsonWithCompleteAndMetadataEvents) {
  Profile p = synthetic_step(0);
  p.pid = 42;
  p.events.push_back({intern("odd \"name\"\n\\"), kUser, 1, 5, 7});
  p.thread_names[1] = "main \\ \"thread\"";
  Json trace = JsonParser::parse(chrome_trace_json(p, "proc"));
  const Json::Array& events = trace["traceEvents"].array();
  int complete = 0, threads = 0, processes = 0;
  for (const Json& e : events) {
    ASSERT_TRUE(e.is_object());
    EXPECT_EQ(e["pid"].number(), 42);
    ASSERT_TRUE(e["tid"].is_number());
    const std::string& ph = e["ph"].string();
    if (ph == "X") {
      ++complete;
      EXPECT_TRUE(e["ts"].is_number());
      EXPECT_TRUE(e["dur"].is_number());
      EXPECT_TRUE(e["cat"].is_string());
      EXPECT_TRUE(e["name"].is_string());
    } else {
      ASSERT_EQ(ph, "M");
      if (e["name"].string() == "thread_name") {
        ++threads;
        EXPECT_EQ(e["args"]["name"].string(), "main \\ \"thread\"");
      } else {
        ++processes;
        EXPECT_EQ(e["args"]["name"].string(), "proc");
      }
    }
  }
  EXPECT_EQ(complete, 8);
  EXPECT_EQ(threads, 1);
  EXPECT_EQ(processes, 1);
  // Microseconds, with the nanoseconds kept.
  const Json& last = events.back();
  EXPECT_EQ(last["name"].string(), "odd \"name\"\n\\");
  EXPECT_DOUBLE_EQ(last["ts"].number(), 0.005);
  EXPECT_DOUBLE_EQ(last["dur"].number(), 0.007);
  EXPECT_DOUBLE_EQ(events[3]["dur"].number(), 2000);  // forward: 2 ms
}

TEST(ProfilerTest, MiniJsonRejectsBrokenText) {
  EXPECT_THROW(JsonParser::parse("{\"a\":1,}"), std::runtime_error);
  EXPECT_THROW(JsonParser::parse("[1 2]"), std::runtime_error);
  EXPECT_THROW(JsonParser::parse("{\"a\":\"x\n\"}"), std::runtime_error);
  EXPECT_THROW(JsonParser::parse("{} x"), std::runtime_error);
  EXPECT_EQ(JsonParser::parse(" {\"a\":[1.5e2,true,null]} ")["a"].array()[0].number(), 150);
}

}  // namespace
}  // namespace cadre::profiler
