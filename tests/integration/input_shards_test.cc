// Input shards over loopback: a job whose number of workers changes between runs (2, 4, one
// process, 3) reads every example of its epoch exactly once, as the examples its training
// steps took, counted by the training program itself, show.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

class InputShardsTest : public cadre::testing::TempDirTest {
 protected:
  // Trains model_dir "m" to `max_steps` with `workers` workers (one process without
  // TF_CONFIG when 1); returns the output.
  std::string train(int workers, int max_steps) {
    std::string program = std::string(CADRE_INPUT_SHARDS_HELPER) + " " + path("m") + " " +
                          std::to_string(max_steps) + " " + path("seen");
    std::string command = workers == 1 ? program
                                       : std::string(CADRE_LAUNCH) +
                                             " --chief=1 --workers=" + std::to_string(workers - 1) +
                                             " -- " + program;
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
      for (int64_t id; in >> id;) ++out[id];
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

}  // namespace
}  // namespace cadre
