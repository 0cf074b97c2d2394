// A real Slurm: a throwaway controller, node daemon and munge on this machine
// (tests/support/local_slurm.sh), and one `srun` job step of a chief, a worker and an
// evaluator of examples/fashion_mnist, each reading its role from Slurm's environment
// (CADRE_SLURM_JOBS). Skips, saying why, where Slurm cannot run (not root, no packages).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <regex>
#include <string>

#include "cadre/estimator/train_and_evaluate.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

class SlurmTest : public cadre::testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    slurm_dir_ = path("slurm");
    testing::CommandResult started =
        testing::run_command("tests/support/local_slurm.sh start " + slurm_dir_ + " " +
                             std::to_string(testing::free_port()) + " " +
                             std::to_string(testing::free_port()) + " 2>&1");
    if (started.status == 77) GTEST_SKIP() << started.output;
    ASSERT_EQ(started.status, 0) << started.output;
    started_ = true;
  }
  void TearDown() override {
    if (started_) testing::run_command("tests/support/local_slurm.sh stop " + slurm_dir_);
    TempDirTest::TearDown();
  }

  std::string slurm_dir_;
  bool started_ = false;
};

TEST_F(SlurmTest, AChiefAWorkerAndAnEvaluatorRunAsOneSrunJobStep) {
  // The job's secret in a file on storage every node sees, as docs/DEPLOY.md has it.
  testing::write_file(path("job_secret"), "a secret for this srun job step\n");
  ASSERT_EQ(::chmod(path("job_secret").c_str(), 0600), 0);  // others may not read it
  std::string command =
      "SLURM_CONF=" + slurm_dir_ + "/slurm.conf CADRE_SLURM_JOBS=chief:1,worker:1,evaluator:1" +
      " CADRE_JOB_SECRET_FILE=" + path("job_secret") +
      " CADRE_SLURM_PORT_BASE=" + std::to_string(testing::free_port()) +
      " CADRE_NUM_THREADS=1 timeout 240 srun --ntasks=3 --overcommit --label " +
      CADRE_FASHION_MNIST + " --model_dir=" + path("m") +
      " --strategy=multi_worker_mirrored --max_steps=200 --save_checkpoints_steps=100" +
      " --eval_steps=2 --batch_size=64 2>&1";
  testing::CommandResult run = testing::run_command(command);
  ASSERT_EQ(run.status, 0) << testing::tail(run.output);
  // srun --label prefixes each line with the task's SLURM_PROCID: 2 is the evaluator.
  EXPECT_TRUE(std::regex_search(
      run.output,
      std::regex(
          R"((^|\n) *2: \{"task":"evaluator","model":"mlp","global_step":200,"accuracy":0\.)")))
      << testing::tail(run.output);
  EXPECT_TRUE(std::regex_search(
      run.output, std::regex(R"((^|\n) *0: \{"task":"chief","model":"mlp","global_step":200)")))
      << testing::tail(run.output);
  EXPECT_EQ(read_training_finished(path("m")), 200);
}

}  // namespace
}  // namespace cadre
