// Input positions over loopback: a job whose number of workers changes between runs (2, 4,
// one process, 3) reads every example of its epoch exactly once, as the examples its training
// steps took, counted by the training program itself, show; so does an elastic group whose
// worker dies and comes back, and a parameter-server job.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cadre/checkpoint/reader.h"
#include "core/base/strings.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

class InputShardsTest : public cadre::testing::TempDirTest {
 protected:
  // Trains `model_dir` ("m") to `max_steps` with `workers` workers (one process without
  // TF_CONFIG when 1); returns the output.
  std::string train(int workers, int max_steps, const std::string& model_dir = "m",
                    const std::string& environment = "") {
    std::string program = std::string(CADRE_INPUT_SHARDS_HELPER) + " " + path(model_dir) + " " +
                          std::to_string(max_steps) + " " + path("seen");
    std::string command = environment + " " +
                          (workers == 1 ? program
                                        : std::string(CADRE_LAUNCH) + " --chief=1 --workers=" +
                                              std::to_string(workers - 1) + " -- " + program);
    cadre::testing::CommandResult run = cadre::testing::run_command(command + " 2>&1");
    EXPECT_EQ(run.status, 0) << cadre::testing::tail(run.output);
    return run.output;
  }

  // Runs an elastic group (the chief and worker:0) to `max_steps` in `dir`, worker:0 dying
  // after step `die_after` (0: never) and restarted alone `comeback_ms` later; its examples in
  // order (no shuffle) in `shards` input shards (0: a pipeline per worker). Returns the output.
  std::string run_elastic(const std::string& dir, int shards, int comeback_ms, int die_after,
                          int max_steps);
  // Each pipeline's, or each input shard's, examples are numbers c, c + P, c + 2P, ... (P =
  // `classes`): what the runs in `dir` took of each must be a prefix of that, and worker:0's
  // was read on by the worker restarted after it died after step `died_after`.
  void expect_every_example_once_in_order(const std::string& dir, int64_t classes, int died_after);

  // Runs the program under `cadre_launch CLUSTER --max_restarts=1` on `dir` to `max_steps`
  // with `environment`, worker:0 dying after its second step (once) and restarted alone, its
  // examples in `seen`; no worker may read its input from its start. Returns the output.
  std::string run_dying_on_ps(const std::string& environment, const std::string& cluster,
                              const std::string& dir, int max_steps, const std::string& seen);
  // worker:0 died, came back, and read on from the position ps 0 kept.
  static void expect_read_on_from_ps0(const std::string& output);
  // (step, example) of the steps that count of two jobs whose examples are in `first` and
  // `second`: every step of the second, and those of the first before the checkpoint the
  // second (which printed `second_output`) resumed from.
  std::vector<std::pair<int64_t, int64_t>> counted(const std::string& first,
                                                   const std::string& second,
                                                   const std::string& second_output);

  // How often each example was taken by a training step, over every run so far.
  std::map<int64_t, int> counts() {
    std::map<int64_t, int> out;
    for (const auto& entry : std::filesystem::directory_iterator(path(""))) {
      if (!entry.path().filename().string().starts_with("seen-")) continue;
      std::ifstream in(entry.path());
      for (int64_t step, id; in >> step >> id;) ++out[id];
    }
    return out;
  }
};

TEST_F(InputShardsTest, AResizedJobReadsEveryExampleOfItsEpochOnce) {
  // 480 examples in global batches of 16: the epoch ends after step 30.
  for (auto [workers, max_steps] : {std::pair{2, 7}, {4, 15}, {1, 21}, {3, 100}}) {
    std::string output = train(workers, max_steps);
    EXPECT_EQ(output.find("from its start"), std::string::npos) << output;
    EXPECT_EQ(output.find("from the start"), std::string::npos) << output;
    if (workers == 4) {
      EXPECT_NE(output.find("input of worker 3 of 4: input shard(s) 6-7 of 8"), std::string::npos)
          << output;
    }
  }
  std::map<int64_t, int> seen = counts();
  ASSERT_EQ(seen.size(), 480u);
  for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << "example " << id;
  EXPECT_EQ(seen.begin()->first, 0);
  EXPECT_EQ(seen.rbegin()->first, 479);
}

// Input shards of different lengths (60, 52, ... 4 examples, 2 per step each): worker:0's
// last 30 steps, worker:1's 14. Workers that step together go on until every one's input has
// ended, those whose input ended with no rows: a run to step 20 (worker:1 has ended), a run
// to the end (worker:1 steps with no rows from its first step), then one process (nothing
// left) read every example once, and every run ends cleanly.
TEST_F(InputShardsTest, WorkersWhoseInputEndsFirstStepWithNoRowsUntilEveryWorkersHasEnded) {
  const std::string uneven = "INPUT_SHARDS_UNEVEN=1";
  train(2, 20, "m", uneven);
  std::string output = train(2, 1000, "m", uneven);
  EXPECT_NE(output.find("worker 1: its training input ended at step 20; it steps with no examples"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("the training input of every worker ended at step 30"), std::string::npos)
      << output;
  output = train(1, 1000, "m", uneven);
  EXPECT_NE(output.find("the training input ended at step 30"), std::string::npos) << output;
  std::map<int64_t, int> seen = counts();
  EXPECT_EQ(seen.size(), 256u);
  for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << "example " << id;
  for (int64_t shard = 0; shard < 8; ++shard) {
    int64_t in_shard = 0;
    for (const auto& [id, count] : seen) in_shard += id % 8 == shard;
    EXPECT_EQ(in_shard, 60 - 8 * shard) << "input shard " << shard;
  }
}

// Whether every variable of the two checkpoints is the same bits.
bool same_bits(const std::string& a_path, const std::string& b_path) {
  auto a = checkpoint::CheckpointReader::open(a_path);
  auto b = checkpoint::CheckpointReader::open(b_path);
  bool same = a->variables().size() == b->variables().size();
  for (const auto& [name, info] : a->variables()) {
    Tensor x = a->read(name), y = b->read(name);
    same = same && x.nbytes() == y.nbytes() &&
           std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
  }
  return same;
}

// RunConfig.deterministic: the same bits after the epoch's 30 steps on one process, 2, 3 and
// 4 workers, and 2 workers resized to 4 at step 12; without it, 2 workers add their gradients
// in another order than one process does, and end elsewhere.
TEST_F(InputShardsTest, DeterministicStepsAreTheSameBitsForAnyNumberOfWorkers) {
  const std::string on = "INPUT_SHARDS_DETERMINISTIC=1";
  train(1, 100, "one", on);
  train(2, 100, "two", on);
  train(3, 100, "three", on);
  train(4, 100, "four", on);
  train(2, 12, "resized", on);
  train(4, 100, "resized", on);
  train(1, 100, "one_plain");
  train(2, 100, "two_plain");
  const std::string last = "/model.ckpt-30.h5";
  for (const char* other : {"two", "three", "four", "resized"}) {
    EXPECT_TRUE(same_bits(path("one") + last, path(other) + last)) << other;
  }
  EXPECT_FALSE(same_bits(path("one_plain") + last, path("two_plain") + last));
}

std::string InputShardsTest::run_elastic(const std::string& dir, int shards, int comeback_ms,
                                         int die_after, int max_steps) {
  cadre::testing::CommandResult run = cadre::testing::run_command(str_cat(
      "INPUT_SHARDS_ELASTIC=1 INPUT_SHARDS_SHUFFLE=0 INPUT_SHARDS_EPOCHS=2 ",
      "INPUT_SHARDS_STEP_MS=100 INPUT_SHARDS_SAVE_STEPS=4 INPUT_SHARDS_DIE_AFTER=", die_after,
      " INPUT_SHARDS_COUNT=", shards, " INPUT_SHARDS_COMEBACK_MS=", comeback_ms, " ", CADRE_LAUNCH,
      " --chief=1 --workers=1 --elastic --max_restarts=1 -- ", CADRE_INPUT_SHARDS_HELPER, " ",
      path(dir), " ", max_steps, " ", path(dir + "_seen"), " 2>&1"));
  EXPECT_EQ(run.status, 0) << cadre::testing::tail(run.output);
  // Nobody waited at the end for a member that was not coming.
  EXPECT_EQ(run.output.find("shutdown barrier:"), std::string::npos)
      << cadre::testing::tail(run.output);
  if (die_after > 0) {
    EXPECT_NE(run.output.find("worker:0 failed (killed by signal 9); restarting it alone"),
              std::string::npos)
        << cadre::testing::tail(run.output);
  }
  return run.output;
}

void InputShardsTest::expect_every_example_once_in_order(const std::string& dir, int64_t classes,
                                                         int died_after) {
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> taken;  // by class: step, id
  for (const auto& entry : std::filesystem::directory_iterator(path(""))) {
    if (!entry.path().filename().string().starts_with(dir + "_seen-")) continue;
    std::ifstream in(entry.path());
    for (int64_t step, id; in >> step >> id;) taken[id % classes].push_back({step, id});
  }
  ASSERT_EQ(static_cast<int64_t>(taken.size()), classes);
  for (auto& [c, examples] : taken) {
    std::stable_sort(examples.begin(), examples.end(),
                     [](auto& a, auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < examples.size(); ++i) {
      ASSERT_EQ(examples[i].second, (c + classes * static_cast<int64_t>(i)) % 480)
          << "class " << c << ", example " << i << " at step " << examples[i].first;
    }
  }
  EXPECT_GT(taken[classes - 1].back().first, died_after + 5) << "worker:0 never came back";
}

// An elastic group whose worker dies after step 10, two steps past its position in the
// checkpoint of step 8, and is restarted alone while the chief steps on: the batches the
// group took from it before it died are not read again, and nothing of its input is skipped.
// It comes back at once (the chief tells it what to skip as it joins), or after the chief's
// checkpoints of steps 12 and on (which say how far its position is behind); and in a job
// resumed at step 12, it dies before the chief's first checkpoint (which keeps the position
// it resumed from).
TEST_F(InputShardsTest, AnElasticGroupsWorkerThatDiesReadsOnWhereTheGroupLeftIt) {
  run_elastic("at_once", 0, 0, 10, 50);
  expect_every_example_once_in_order("at_once", 2, 10);
  // To the end of the input, which comes for the chief's shards first: the worker, behind,
  // ends with it, and the last checkpoint holds where every shard is.
  run_elastic("later", 8, 1500, 10, 1000);
  expect_every_example_once_in_order("later", 8, 10);
  cadre::testing::CommandResult after = cadre::testing::run_command(
      str_cat("INPUT_SHARDS_SHUFFLE=0 INPUT_SHARDS_EPOCHS=2 ", CADRE_INPUT_SHARDS_HELPER, " ",
              path("later"), " 1000 ", path("later_seen"), " 2>&1"));
  EXPECT_EQ(after.status, 0) << cadre::testing::tail(after.output);
  EXPECT_EQ(after.output.find("from its start"), std::string::npos) << after.output;
  run_elastic("resumed", 0, 0, 0, 12);
  std::string output = run_elastic("resumed", 0, 1500, 14, 50);
  EXPECT_NE(output.find("skipped the 2 batch(es) taken from it after"), std::string::npos)
      << cadre::testing::tail(output);
  expect_every_example_once_in_order("resumed", 2, 14);
}

std::string InputShardsTest::run_dying_on_ps(const std::string& environment,
                                             const std::string& cluster, const std::string& dir,
                                             int max_steps, const std::string& seen) {
  cadre::testing::CommandResult run = cadre::testing::run_command(
      str_cat("INPUT_SHARDS_SHUFFLE=0 INPUT_SHARDS_SAVE_STEPS=8 INPUT_SHARDS_DIE_AFTER=2 ",
              environment, " ", CADRE_LAUNCH, " ", cluster, " --max_restarts=1 -- ",
              CADRE_INPUT_SHARDS_HELPER, " ", path(dir), " ", max_steps, " ", path(seen), " 2>&1"));
  EXPECT_EQ(run.status, 0) << cadre::testing::tail(run.output);
  for (const char* over : {"from its start", "from the start"}) {
    EXPECT_EQ(run.output.find(over), std::string::npos) << run.output;
  }
  return run.output;
}

void InputShardsTest::expect_read_on_from_ps0(const std::string& output) {
  EXPECT_NE(output.find("worker:0 failed (killed by signal 9); restarting it"), std::string::npos)
      << cadre::testing::tail(output);
  EXPECT_NE(output.find("batch(es) taken from it after the position ps 0 kept"), std::string::npos)
      << cadre::testing::tail(output);
}

std::vector<std::pair<int64_t, int64_t>> InputShardsTest::counted(
    const std::string& first, const std::string& second, const std::string& second_output) {
  const size_t at = second_output.find("resuming from ");
  EXPECT_NE(at, std::string::npos) << second_output;
  if (at == std::string::npos) return {};
  const int64_t resumed = std::atoll(second_output.c_str() + second_output.find("ckpt-", at) + 5);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& entry : std::filesystem::directory_iterator(path(""))) {
    const std::string name = entry.path().filename().string();
    const bool later = name.starts_with(second + "-");
    if (!later && !name.starts_with(first + "-")) continue;
    std::ifstream in(entry.path());
    for (int64_t step, id; in >> step >> id;) {
      if (step >= 0 && (later || step < resumed)) out.push_back({step, id});
    }
  }
  return out;
}

// Under ParameterServerStrategy, whose workers step on their own: worker:0 of a chief, 2
// workers and a ps task dies after its second step and is restarted alone while the others
// push on (it skips what its pushes took, which ps 0 counted); the job then stops at step 60
// and resumes with one worker fewer. Steps its workers pushed after the checkpoint the second
// job resumed from count for nothing; every other example is taken once.
TEST_F(InputShardsTest, AParameterServerJobReadsEveryExampleOnceAcrossADeathAndAResize) {
  const std::string pace = "INPUT_SHARDS_STEP_MS=100";
  expect_read_on_from_ps0(run_dying_on_ps(pace, "--chief=1 --ps=1 --workers=2", "m", 60, "first"));
  std::string second = run_dying_on_ps(pace, "--chief=1 --ps=1 --workers=1", "m", 1000, "second");
  std::map<int64_t, int> taken;
  for (auto [step, id] : counted("first", "second", second)) ++taken[id];
  ASSERT_EQ(taken.size(), 480u);
  for (const auto& [id, count] : taken) EXPECT_EQ(count, 1) << "example " << id;
}

// Coordinator mode: a client drives 2 workers over a ps task; worker:0 dies after its second
// step and is restarted alone; the job stops at step 40 and resumes with one worker to step
// 70. Each input shard's examples (in order, no shuffle, 3 epochs) are a prefix of its
// numbers: none read twice, none skipped.
TEST_F(InputShardsTest, ACoordinatorJobReadsEachShardOnceInOrderAcrossADeathAndAResize) {
  const std::string pace = "INPUT_SHARDS_EPOCHS=3 INPUT_SHARDS_STEP_MS=50";
  expect_read_on_from_ps0(
      run_dying_on_ps(pace, "--client=1 --ps=1 --workers=2", "c", 40, "cfirst"));
  std::string second = run_dying_on_ps(pace, "--client=1 --ps=1 --workers=1", "c", 70, "csecond");
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_shard;  // step, example
  for (auto [step, id] : counted("cfirst", "csecond", second)) {
    by_shard[id % 8].push_back({step, id});
  }
  int64_t taken = 0;
  for (auto& [shard, examples] : by_shard) {
    std::stable_sort(examples.begin(), examples.end(),
                     [](auto& a, auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < examples.size(); ++i) {
      ASSERT_EQ(examples[i].second, (shard + 8 * static_cast<int64_t>(i)) % 480)
          << "shard " << shard << ", example " << i << " at step " << examples[i].first;
    }
    taken += static_cast<int64_t>(examples.size());
  }
  // Steps 0-39 took 8 examples each (2 workers), 40-69 took 16 (one worker); a step a
  // worker took for a unit already complete is taken but not counted.
  EXPECT_GE(taken, 40 * 8 + 30 * 16);
}

// Coordinator mode: the client is SIGKILLed right after its first checkpoint past step 15 (S) while
// its 2 workers run on, and restarted alone; the new client restores that checkpoint, and the
// workers, given its units, read their input again from that checkpoint's positions. The
// input (2 epochs) then ends before max_steps, and the client ends training there. Each input
// shard's examples that count (the first client's before step S, all of the second's) are
// its numbers in order, each once, to the end of the 2 epochs.
TEST_F(InputShardsTest, ANewClientRewindsTheWorkersInputsAndTheJobEndsWithThem) {
  cadre::testing::KillSchedule kills;
  kills.add("client:0", R"(^\[client:0\].*saved checkpoint for step (1[6-9]|[2-9][0-9]):)");
  cadre::testing::CommandResult run = cadre::testing::run_command(
      str_cat("INPUT_SHARDS_SHUFFLE=0 INPUT_SHARDS_SAVE_STEPS=8 INPUT_SHARDS_EPOCHS=2 ",
              "INPUT_SHARDS_STEP_MS=50 ", CADRE_LAUNCH,
              " --client=1 --ps=1 --workers=2 --max_restarts=1 -- ", CADRE_INPUT_SHARDS_HELPER, " ",
              path("k"), " 1000 ", path("kseen"), " 2>&1"),
      std::ref(kills));
  ASSERT_EQ(run.status, 0) << cadre::testing::tail(run.output);
  ASSERT_EQ(kills.done(), 1u) << cadre::testing::tail(run.output);
  for (const char* line : {"client (generation 2): resuming from", "reading the input again",
                           "client: every worker's input has ended, at global step"}) {
    EXPECT_NE(run.output.find(line), std::string::npos) << line << cadre::testing::tail(run.output);
  }
  const size_t at = run.output.find("ckpt-", run.output.find("(generation 2): resuming from"));
  const int64_t resumed = std::atoll(run.output.c_str() + at + 5);
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_shard;  // step, example
  for (const auto& entry : std::filesystem::directory_iterator(path(""))) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("kseen-")) continue;
    const bool second = name.ends_with("-g2");
    std::ifstream in(entry.path());
    for (int64_t step, id; in >> step >> id;) {
      if (step >= 0 && (second || step < resumed)) by_shard[id % 8].push_back({step, id});
    }
  }
  ASSERT_EQ(by_shard.size(), 8u);
  for (auto& [shard, examples] : by_shard) {
    std::stable_sort(examples.begin(), examples.end(),
                     [](auto& a, auto& b) { return a.first < b.first; });
    ASSERT_EQ(examples.size(), 120u) << "shard " << shard;
    for (size_t i = 0; i < examples.size(); ++i) {
      ASSERT_EQ(examples[i].second, (shard + 8 * static_cast<int64_t>(i)) % 480)
          << "shard " << shard << ", example " << i << " at step " << examples[i].first;
    }
  }
}

}  // namespace
}  // namespace cadre
