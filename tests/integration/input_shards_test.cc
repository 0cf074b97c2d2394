// Input shards over loopback: a job whose number of workers changes between runs (2, 4, one
// process, 3) reads every example of its epoch exactly once, as the examples its training
// steps took, counted by the training program itself, show.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "cadre/checkpoint/reader.h"
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

}  // namespace
}  // namespace cadre
