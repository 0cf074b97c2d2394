// tools/cadre_ckpt, run as a program: output and exit status of ls, diff and verify.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/writer.h"
#include "tests/checkpoint/test_util.h"

namespace cadre::checkpoint {
namespace {

using testing::small_model;
using testing::TempDir;

struct ToolRun {
  int status;
  std::string output;  // stdout and stderr
};

ToolRun cadre_ckpt(const std::string& arguments) {
  std::string command = std::string(CADRE_CKPT_TOOL) + " " + arguments + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ToolRun run{-1, ""};
  char buffer[4096];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, got);
  int status = ::pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CadreCkptTest, LsPrintsTheStepAndOneLinePerVariable) {
  TempDir dir;
  {
    CheckpointManager manager(dir.path());
    manager.save(small_model(100));
    manager.save(small_model(200));
  }
  ToolRun run = cadre_ckpt("ls " + dir.path());  // a model_dir: its latest
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "global_step 200\n")) << run.output;
  EXPECT_TRUE(contains(run.output, "hidden1/kernel         float32  [4, 3]\n")) << run.output;
  EXPECT_TRUE(contains(run.output, "Adam/iterations        int64    []\n")) << run.output;
  EXPECT_TRUE(contains(run.output, "(slot of hidden1/kernel)")) << run.output;
  run = cadre_ckpt("ls " + dir.file("model.ckpt-100.h5"));
  EXPECT_TRUE(contains(run.output, "global_step 100\n")) << run.output;
  run = cadre_ckpt("ls " + dir.file("missing.h5"));
  EXPECT_EQ(run.status, 1);
  EXPECT_TRUE(contains(run.output, "missing.h5 does not exist")) << run.output;
}

// A checkpoint converted to TensorFlow's format holds the same variables and slots, slots
// under TensorFlow's names in the file, and ls, diff and verify read it like ours.
TEST(CadreCkptTest, ConvertWritesATensorFlowCheckpointThatReadsBackTheSame) {
  TempDir dir;
  {
    CheckpointManager manager(dir.path());
    manager.save(small_model(300));
  }
  ToolRun run = cadre_ckpt("convert " + dir.path() + " " + dir.file("tf/model.ckpt-300"));
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "7 tensors")) << run.output;  // 6 and the global step
  run = cadre_ckpt("diff " + dir.path() + " " + dir.file("tf/model.ckpt-300"));
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "no variables differ")) << run.output;
  run = cadre_ckpt("ls " + dir.file("tf/model.ckpt-300.index"));
  EXPECT_TRUE(contains(run.output, "global_step 300\n")) << run.output;
  EXPECT_TRUE(contains(run.output, "(training/Adam/hidden1/kernel/m in the file)")) << run.output;
  EXPECT_TRUE(contains(run.output, "(training/Adam/iter in the file)")) << run.output;
  EXPECT_EQ(cadre_ckpt("verify " + dir.file("tf/model.ckpt-300")).status, 0);
  run = cadre_ckpt("convert " + dir.file("missing") + " " + dir.file("tf/x"));
  EXPECT_EQ(run.status, 1) << run.output;
}

TEST(CadreCkptTest, LsGivesTheBytesOfEachPart) {
  TempDir dir;
  CheckpointData data;
  data.global_step = 7;
  data.variables["dense/kernel"] = Tensor::zeros({1000, 100});        // 400,000 bytes
  data.variables["dense/kernel/Adam/m"] = Tensor::zeros({1000, 50});  // 200,000 bytes
  data.slot_of["dense/kernel/Adam/m"] = "dense/kernel";
  data.iterator_state["input/index"] = Tensor::zeros({300}, DType::kUInt8);  // 300 bytes
  CheckpointManager(dir.path()).save(data);
  ToolRun run = cadre_ckpt("ls " + dir.path());
  EXPECT_EQ(run.status, 0) << run.output;
  size_t at = run.output.find("\nbytes ");
  ASSERT_NE(at, std::string::npos) << run.output;
  unsigned long long file = 0, variables = 0, slots = 0, input = 0, other = 0;
  ASSERT_EQ(std::sscanf(run.output.c_str() + at,
                        "\nbytes %llu: variables %llu, slots %llu, input state %llu, other %llu",
                        &file, &variables, &slots, &input, &other),
            5)
      << run.output;
  EXPECT_EQ(variables, 400000u);
  EXPECT_EQ(slots, 200000u);
  EXPECT_EQ(input, 300u);
  EXPECT_EQ(file, variables + slots + input + other);
  EXPECT_LT(other, 40000u) << "headers and attributes";
}

TEST(CadreCkptTest, DiffListsPresenceShapeAndValueDifferences) {
  TempDir dir;
  CheckpointData a = small_model(1);
  CheckpointData b = small_model(1);
  b.variables["hidden1/bias"] = testing::ramp({3}, 0.5f, 0.25f);  // values differ by 0.25
  b.variables.erase("logits/kernel");
  b.variables["hidden1/kernel"] = testing::ramp({4, 4});
  b.slot_of.erase("hidden1/kernel/Adam/m");
  b.slot_of.erase("hidden1/kernel/Adam/v");
  b.variables.erase("hidden1/kernel/Adam/m");
  b.variables.erase("hidden1/kernel/Adam/v");
  write_checkpoint_file(dir.file("a.h5"), a);
  write_checkpoint_file(dir.file("b.h5"), b);
  ToolRun same = cadre_ckpt("diff " + dir.file("a.h5") + " " + dir.file("a.h5"));
  EXPECT_EQ(same.status, 0) << same.output;
  EXPECT_TRUE(contains(same.output, "no variables differ")) << same.output;
  ToolRun run = cadre_ckpt("diff " + dir.file("a.h5") + " " + dir.file("b.h5"));
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_TRUE(contains(run.output, "differs: hidden1/bias max_abs_diff 0.25")) << run.output;
  EXPECT_TRUE(contains(run.output, "only in A: logits/kernel float32 [3, 2]")) << run.output;
  EXPECT_TRUE(contains(run.output, "differs: hidden1/kernel A float32 [4, 3], B float32 [4, 4]"))
      << run.output;
  EXPECT_TRUE(contains(run.output, "5 variables differ")) << run.output;
  ToolRun bad = cadre_ckpt("diff " + dir.file("a.h5") + " " + dir.file("nope.h5"));
  EXPECT_EQ(bad.status, 2) << bad.output;
}

TEST(CadreCkptTest, VerifyFindsTheDamagedDatasetAndTruncatedOrForeignFiles) {
  TempDir dir;
  CheckpointData data = small_model(9);
  Tensor weights = testing::ramp({128, 64}, 1.5f, 3);
  data.variables["big/kernel"] = weights;
  write_checkpoint_file(dir.file("model.ckpt-9.h5"), data);
  ToolRun good = cadre_ckpt("verify " + dir.file("model.ckpt-9.h5"));
  EXPECT_EQ(good.status, 0) << good.output;
  EXPECT_TRUE(contains(good.output, "OK ")) << good.output;

  std::string contents = testing::read_file(dir.file("model.ckpt-9.h5"));
  size_t at = contents.find(std::string(static_cast<const char*>(weights.raw_data()), 64));
  ASSERT_NE(at, std::string::npos);
  testing::flip_byte(dir.file("model.ckpt-9.h5"), static_cast<std::streamoff>(at + 4000));
  ToolRun flipped = cadre_ckpt("verify " + dir.file("model.ckpt-9.h5"));
  EXPECT_EQ(flipped.status, 1) << flipped.output;
  EXPECT_TRUE(contains(flipped.output, "DAMAGED")) << flipped.output;
  EXPECT_TRUE(contains(flipped.output, "variables/big/kernel: checksum mismatch"))
      << flipped.output;

  testing::write_file(dir.file("model.ckpt-10.h5"), contents.substr(0, contents.size() / 2));
  ToolRun truncated = cadre_ckpt("verify " + dir.file("model.ckpt-10.h5"));
  EXPECT_EQ(truncated.status, 1) << truncated.output;
  EXPECT_TRUE(contains(truncated.output, "truncated")) << truncated.output;

  testing::write_file(dir.file("model.ckpt-11.h5"), "hello");
  ToolRun foreign = cadre_ckpt("verify " + dir.path());  // every checkpoint of the model_dir
  EXPECT_EQ(foreign.status, 1) << foreign.output;
  EXPECT_TRUE(contains(foreign.output, "not an HDF5 file")) << foreign.output;

  EXPECT_EQ(cadre_ckpt("verify " + dir.file("absent.h5")).status, 2);
  EXPECT_EQ(cadre_ckpt("frobnicate").status, 2);
}

// A state file at fault (what a machine crash or a full disk leaves) does not stop ls or
// diff on the model_dir: they take its newest checkpoint file, with a warning; verify
// reports it.
TEST(CadreCkptTest, ADamagedStateFileIsWorkedAroundByLsAndDiffAndReportedByVerify) {
  const std::vector<std::pair<std::string, std::string>> damages = {
      {"", "is empty"},
      {"}{ garbage\n", "line 1"},
      {"(missing)", "no state file"},
      {"model_checkpoint_path: \"model.ckpt-300.h5\"\n",
       "model.ckpt-300.h5, which does not exist"}};
  for (const auto& [state, problem] : damages) {
    TempDir dir;
    {
      CheckpointManager manager(dir.path());
      manager.save(small_model(100));
      manager.save(small_model(200));
    }
    if (state == "(missing)") {
      std::filesystem::remove(dir.file("checkpoint"));
    } else {
      testing::write_file(dir.file("checkpoint"), state);
    }
    ToolRun ls = cadre_ckpt("ls " + dir.path());
    EXPECT_EQ(ls.status, 0) << ls.output;
    EXPECT_TRUE(contains(ls.output, "global_step 200\n")) << ls.output;
    EXPECT_TRUE(contains(ls.output, "warning: ")) << ls.output;
    EXPECT_TRUE(contains(ls.output, problem)) << ls.output;
    ToolRun diff = cadre_ckpt("diff " + dir.path() + " " + dir.file("model.ckpt-200.h5"));
    EXPECT_EQ(diff.status, 0) << diff.output;
    ToolRun verify = cadre_ckpt("verify " + dir.path());
    EXPECT_EQ(verify.status, 1) << verify.output;
    EXPECT_TRUE(contains(verify.output, "DAMAGED " + dir.file("checkpoint"))) << verify.output;
    EXPECT_TRUE(contains(verify.output, problem)) << verify.output;
    EXPECT_TRUE(contains(verify.output, "OK " + dir.file("model.ckpt-200.h5"))) << verify.output;
    // Nothing was written: the tools only read.
    if (state == "(missing)") {
      EXPECT_FALSE(std::filesystem::exists(dir.file("checkpoint")));
    } else {
      EXPECT_EQ(testing::read_file(dir.file("checkpoint")), state);
    }
  }
}

TEST(CadreCkptTest, LsOnAModelDirSkipsANewestCheckpointThatDoesNotOpen) {
  TempDir dir;
  {
    CheckpointManager manager(dir.path());
    manager.save(small_model(100));
    manager.save(small_model(200));
  }
  ASSERT_EQ(::truncate(dir.file("model.ckpt-200.h5").c_str(), 300), 0);
  ToolRun ls = cadre_ckpt("ls " + dir.path());
  EXPECT_EQ(ls.status, 0) << ls.output;
  EXPECT_TRUE(contains(ls.output, "global_step 100\n")) << ls.output;
  EXPECT_TRUE(contains(ls.output, "warning: skipping " + dir.file("model.ckpt-200.h5")))
      << ls.output;
}

}  // namespace
}  // namespace cadre::checkpoint
