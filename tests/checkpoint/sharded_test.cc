// Sharded checkpoints (FORMAT.md, Sharded checkpoints): parts written as other tasks write
// them, committed by a CheckpointManager through the manifest, read back as the logical
// variables under any partitioning; a damaged or missing part, or a part whose task failed,
// never makes a checkpoint that is used.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/restore.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/checkpoint/watcher.h"
#include "checkpoint/parts.h"
#include "checkpoint/restore_rows.h"
#include "core/base/crc32c.h"
#include "tests/checkpoint/test_util.h"

namespace cadre::checkpoint {
namespace {

using testing::expect_equal_tensors;
using testing::flip_byte;
using testing::TempDir;

// A table of 10 rows of 3, sliced as ps tasks hold it: rows [0, 4) and [7, 10) on task 0,
// [4, 7) on task 1; with an Adagrad-like slot of the same slicing, and a scalar on task 1.
struct Model {
  Tensor table, accumulator, bias;
};

Model model(float base) {
  std::vector<float> values(30), slot(30);
  std::iota(values.begin(), values.end(), base);
  std::iota(slot.begin(), slot.end(), base * 2);
  return {Tensor::from_vector(values, Shape{10, 3}), Tensor::from_vector(slot, Shape{10, 3}),
          Tensor::scalar(base)};
}

PartSlice slice(const std::string& name, const Tensor& whole, int64_t first, int64_t rows,
                const std::string& slot_of = "") {
  return {name, slot_of, whole.dtype(), whole.shape(), first, rows};
}

// Writes the parts of `m` for step `step` as the two tasks would; `fail_task` >= 0 makes that
// task's part fail as a task killed mid-write does. `streamed`: the table's slices and their
// slots come from row sources (as a ps task streams them from its copy-on-write snapshot),
// their tensors only broadcast views of a row of NaNs that must never be written.
CheckpointData sharded_data(CheckpointManager& manager, int64_t step, const Model& m,
                            int fail_task = -1, bool streamed = false) {
  std::vector<std::string> names = manager.part_file_names(step, 2);
  struct Held {
    int64_t first, rows;
  };
  std::vector<std::vector<Held>> table_slices = {{{0, 4}, {7, 3}}, {{4, 3}}};
  CheckpointData data;
  data.global_step = step;
  data.variables["counter"] = Tensor::scalar<int64_t>(step);
  for (int task = 0; task < 2; ++task) {
    CheckpointData part;
    part.global_step = step;
    CheckpointPart described;
    RowSources sources;
    described.file_name = names[task];
    for (const Held& h : table_slices[task]) {
      std::string v = part_dataset_name("table", h.first);
      std::string a = part_dataset_name("table/Adagrad/accumulator", h.first);
      part.variables[v] = m.table.slice(0, h.first, h.first + h.rows).contiguous();
      part.variables[a] = m.accumulator.slice(0, h.first, h.first + h.rows).contiguous();
      for (const std::string& name : {v, a}) {
        if (!streamed) continue;
        Tensor rows = part.variables[name];
        sources[name] = [rows](int64_t begin, int64_t end, void* destination) {
          Tensor block = rows.slice(0, begin, end).contiguous();
          std::memcpy(destination, block.raw_data(), block.nbytes());
        };
        part.variables[name] = Tensor::full(Shape{1, 3}, std::nan("")).broadcast_to(rows.shape());
      }
      part.slot_of[a] = v;
      described.slices.push_back(slice("table", m.table, h.first, h.rows));
      described.slices.push_back(
          slice("table/Adagrad/accumulator", m.accumulator, h.first, h.rows, "table"));
    }
    if (task == 1) {
      part.variables[part_dataset_name("bias", 0)] = m.bias;
      described.slices.push_back(slice("bias", m.bias, 0, 1));
    }
    if (task == fail_task) {
      described.wait = [task]() -> std::pair<uint64_t, uint32_t> {
        throw UnavailableError("ps:" + std::to_string(task) + " is gone");
      };
    } else {
      WrittenPart written = write_part_file(manager.model_dir(), names[task], part, sources);
      described.wait = [written] { return std::make_pair(written.bytes, written.crc32c); };
    }
    data.parts.push_back(std::move(described));
  }
  return data;
}

std::vector<std::string> files_of(const std::string& dir, const std::string& pattern) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename();
    if (name.find(pattern) != std::string::npos) found.push_back(name);
  }
  return found;
}

// write_part_file checksums the datasets' data as it writes it and reads back only the rest:
// its CRC must be that of the whole file read back, for datasets of several blocks, streamed
// ones, small ones and scalars alike.
TEST(ShardedCheckpointTest, APartsChecksumIsThatOfItsFile) {
  TempDir dir;
  const int64_t rows = 1200, columns = 1024;  // 4.7 MiB: two of the writer's 4 MiB blocks
  std::vector<float> values(static_cast<size_t>(rows * columns));
  std::iota(values.begin(), values.end(), 0.5f);
  Tensor large = Tensor::from_vector(values, Shape{rows, columns});
  CheckpointData part;
  part.global_step = 3;
  part.variables["large"] = large;
  part.variables["large/Adam/m"] = Tensor::full(Shape{1, columns}, 0.0).broadcast_to(large.shape());
  part.variables["bias"] = model(2).accumulator;
  part.variables["step"] = Tensor::scalar<int64_t>(3);
  part.slot_of["large/Adam/m"] = "large";
  RowSources sources;
  std::vector<float> streamed(values.rbegin(), values.rend());
  sources["large/Adam/m"] = [&](int64_t begin, int64_t end, void* destination) {
    std::memcpy(destination, streamed.data() + begin * columns,
                static_cast<size_t>((end - begin) * columns) * sizeof(float));
  };
  std::string name = part_file_name("model.ckpt", 3, 0, 1, "0badcafe");
  WrittenPart written = write_part_file(dir.path(), name, part, sources);
  WrittenPart read_back = file_checksum(dir.file(name));
  EXPECT_EQ(written.bytes, read_back.bytes);
  EXPECT_EQ(written.crc32c, read_back.crc32c);
  EXPECT_EQ(written.bytes, std::filesystem::file_size(dir.file(name)));
  EXPECT_GT(written.bytes, uint64_t{2} * rows * columns * sizeof(float));
}

TEST(ShardedCheckpointTest, ReadsTheLogicalVariablesUnderAnyPartitioning) {
  TempDir dir;
  Model m = model(1);
  CheckpointManager manager(dir.path());
  std::string path = manager.save(sharded_data(manager, 5, m));
  EXPECT_EQ(path, dir.file("model.ckpt-5.h5"));
  EXPECT_EQ(files_of(dir.path(), ".part-").size(), 2u);

  auto reader = CheckpointReader::open(path);
  EXPECT_EQ(reader->global_step(), 5);
  EXPECT_EQ(reader->format_version(), 2);
  ASSERT_EQ(reader->variables().size(), 4u);
  EXPECT_EQ(reader->variable("table").shape, (Shape{10, 3}));
  EXPECT_EQ(reader->variable("table/Adagrad/accumulator").slot_of, "table");
  expect_equal_tensors(m.table, reader->read("table"), "table");
  expect_equal_tensors(m.accumulator, reader->read("table/Adagrad/accumulator"), "slot");
  expect_equal_tensors(m.bias, reader->read("bias"), "bias");
  EXPECT_EQ(reader->read("counter").item<int64_t>(), 5);
  // Three ps tasks' partitions, which cut across the parts' slices.
  std::vector<std::pair<int64_t, Tensor>> three = {{0, Tensor::zeros(Shape{3, 3})},
                                                   {3, Tensor::zeros(Shape{5, 3})},
                                                   {8, Tensor::zeros(Shape{2, 3})}};
  reader->read_partitions_into("table", three);
  for (const auto& [first, tensor] : three) {
    expect_equal_tensors(m.table.slice(0, first, first + tensor.dim(0)).contiguous(), tensor,
                         "rows from " + std::to_string(first));
  }
  EXPECT_TRUE(reader->verify().empty());
  EXPECT_GT(reader->sizes().variables, 0u);
}

TEST(ShardedCheckpointTest, PartsStreamedFromRowSourcesHoldTheirRows) {
  TempDir dir;
  Model m = model(3);
  CheckpointManager manager(dir.path());
  std::string path = manager.save(sharded_data(manager, 6, m, -1, /*streamed=*/true));
  auto reader = CheckpointReader::open(path);
  EXPECT_TRUE(reader->verify().empty());
  expect_equal_tensors(m.table, reader->read("table"), "table");
  expect_equal_tensors(m.accumulator, reader->read("table/Adagrad/accumulator"), "slot");
  EXPECT_EQ(reader->variable("table/Adagrad/accumulator").slot_of, "table");
}

// What a ps task reads on restore (read_own_rows): its rows from whichever parts hold them,
// or from a single-file checkpoint; nothing but a checkpoint file in model_dir.
TEST(ShardedCheckpointTest, ATaskReadsItsOwnRowsFromModelDirAndNothingOutsideIt) {
  TempDir dir, outside;
  Model m = model(4);
  CheckpointManager manager(dir.path());
  manager.save(sharded_data(manager, 5, m));
  Tensor rows = Tensor::zeros(Shape{5, 3});  // [3, 8): across both parts' slices
  read_own_rows(dir.path(), "model.ckpt-5.h5", "table/Adagrad/accumulator", 3, rows);
  expect_equal_tensors(m.accumulator.slice(0, 3, 8).contiguous(), rows, "sharded rows");
  CheckpointData whole;
  whole.global_step = 6;
  whole.variables["table"] = m.table;
  manager.save(whole);
  read_own_rows(dir.path(), "model.ckpt-6.h5", "table", 3, rows);
  expect_equal_tensors(m.table.slice(0, 3, 8).contiguous(), rows, "single-file rows");

  EXPECT_THROW(read_own_rows(dir.path(), "model.ckpt-6.h5", "table", 6, rows),
               InvalidArgumentError);
  EXPECT_THROW(read_own_rows(dir.path(), "model.ckpt-6.h5", "nothing", 0, rows), NotFoundError);
  EXPECT_THROW(read_own_rows(dir.path(), "model.ckpt-9.h5", "table", 0, rows), NotFoundError);
  EXPECT_THROW(read_own_rows("", "model.ckpt-6.h5", "table", 0, rows), FailedPreconditionError);
  std::filesystem::copy_file(dir.file("model.ckpt-6.h5"), outside.file("elsewhere.h5"));
  std::filesystem::create_symlink(outside.file("elsewhere.h5"), dir.file("link.h5"));
  for (std::string name :
       {"../" + std::filesystem::path(outside.path()).filename().string() + "/elsewhere.h5",
        outside.file("elsewhere.h5"), std::string("link.h5"), std::string(".."), std::string("")}) {
    EXPECT_THROW(read_own_rows(dir.path(), name, "table", 0, rows), PermissionDeniedError) << name;
  }
}

TEST(ShardedCheckpointTest, ADamagedPartIsDataLossNamingItAndThePreviousCheckpointIsUsed) {
  TempDir dir;
  CheckpointManager manager(dir.path());
  manager.save(sharded_data(manager, 1, model(1)));
  manager.save(sharded_data(manager, 2, model(2)));
  std::vector<std::string> parts = files_of(dir.path(), "model.ckpt-2.part-1-of-2");
  ASSERT_EQ(parts.size(), 1u);
  flip_byte(dir.file(parts[0]), 5000);

  auto damaged = CheckpointReader::open(dir.file("model.ckpt-2.h5"));
  std::vector<DatasetProblem> problems = damaged->verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].dataset, "part " + parts[0]);
  EXPECT_NE(problems[0].problem.find("checksum mismatch"), std::string::npos);

  Model restored{Tensor::zeros(Shape{10, 3}), Tensor::zeros(Shape{10, 3}), Tensor::scalar(0.0f)};
  RestoreTargets targets = whole_targets({{"table", restored.table},
                                          {"table/Adagrad/accumulator", restored.accumulator},
                                          {"bias", restored.bias},
                                          {"counter", Tensor::scalar<int64_t>(0)}});
  auto used = open_latest_intact(dir.path());
  ASSERT_NE(used, nullptr);
  EXPECT_EQ(used->global_step(), 1);
  EXPECT_EQ(restore_latest_good(dir.path(), targets)->global_step(), 1);
  expect_equal_tensors(model(1).table, restored.table, "table of step 1");

  // A missing part: the checkpoint cannot even be opened, and says which part.
  std::filesystem::remove(dir.file(parts[0]));
  try {
    CheckpointReader::open(dir.file("model.ckpt-2.h5"));
    FAIL() << "opened a checkpoint without its part";
  } catch (const DataLossError& error) {
    EXPECT_NE(std::string(error.what()).find(parts[0] + " is missing"), std::string::npos)
        << error.what();
  }
}

TEST(ShardedCheckpointTest, APartThatFailsIsNeverPublishedAndIsRemoved) {
  TempDir dir;
  {
    CheckpointManager manager(dir.path());
    manager.save(sharded_data(manager, 1, model(1)));
    EXPECT_THROW(manager.save(sharded_data(manager, 2, model(2), /*fail_task=*/1)),
                 UnavailableError);
    EXPECT_EQ(latest_checkpoint(dir.path()), dir.file("model.ckpt-1.h5"));
    EXPECT_FALSE(std::filesystem::exists(dir.file("model.ckpt-2.h5")));
    // Task 0 finished its part; no manifest names it.
    EXPECT_EQ(files_of(dir.path(), "model.ckpt-2.part-").size(), 1u);
  }
  CheckpointManager next(dir.path());
  EXPECT_TRUE(files_of(dir.path(), "model.ckpt-2.part-").empty());
  EXPECT_EQ(files_of(dir.path(), "model.ckpt-1.part-").size(), 2u);
  EXPECT_EQ(open_latest_intact(dir.path())->global_step(), 1);
}

TEST(ShardedCheckpointTest, RetentionAndSavingAStepAgainRemoveTheOldParts) {
  TempDir dir;
  CheckpointManagerOptions options;
  options.keep_checkpoint_max = 2;
  CheckpointManager manager(dir.path(), options);
  for (int64_t step : {1, 2, 3}) manager.save(sharded_data(manager, step, model(step)));
  EXPECT_TRUE(files_of(dir.path(), "model.ckpt-1.").empty());
  EXPECT_EQ(files_of(dir.path(), "model.ckpt-3.part-").size(), 2u);
  manager.save(sharded_data(manager, 3, model(7)));
  EXPECT_EQ(files_of(dir.path(), "model.ckpt-3.part-").size(), 2u);
  expect_equal_tensors(model(7).table,
                       CheckpointReader::open(dir.file("model.ckpt-3.h5"))->read("table"), "table");
}

// A manifest that names itself as a part (damage, or a hostile file) is DataLossError, not a
// recursion without end.
TEST(ShardedCheckpointTest, AManifestNamingItselfAsAPartIsDataLoss) {
  TempDir dir;
  CheckpointManager manager(dir.path());
  CheckpointData data = sharded_data(manager, 1, model(1));
  std::string own = dir.file("model.ckpt-1.h5");
  // The manifest's own name for part 1, with the size it will have: written twice, the file
  // keeps its size.
  data.parts[1].file_name = "model.ckpt-1.h5";
  uint64_t size = 0;
  for (int round = 0; round < 2; ++round) {
    data.parts[1].wait = [&size] { return std::make_pair(size, uint32_t{0}); };
    manager.save(data);
    size = std::filesystem::file_size(own);
  }
  try {
    CheckpointReader::open(own);
    FAIL() << "opened a manifest that is its own part";
  } catch (const DataLossError& error) {
    EXPECT_NE(std::string(error.what()).find("that is itself one"), std::string::npos)
        << error.what();
  }
}

TEST(ShardedCheckpointTest, RejectsPartsThatDoNotCoverTheVariable) {
  TempDir dir;
  CheckpointManager manager(dir.path());
  CheckpointData data = sharded_data(manager, 1, model(1));
  data.parts[1].slices.erase(data.parts[1].slices.begin());  // rows [4, 7) of the table
  try {
    manager.save(data);
    FAIL() << "saved a table with a hole";
  } catch (const InvalidArgumentError& error) {
    EXPECT_NE(std::string(error.what()).find("the slices of 'table' do not cover its rows"),
              std::string::npos)
        << error.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("model.ckpt-1.h5")));
}

// The evaluator's watcher yields a sharded checkpoint as any other, and warm start reads its
// variables (renamed) and slots from the parts.
TEST(ShardedCheckpointTest, TheWatcherYieldsItAndWarmStartReadsIt) {
  TempDir dir;
  Model m = model(6);
  CheckpointManager manager(dir.path());
  manager.save(sharded_data(manager, 9, m));
  WatcherOptions options;
  options.use_inotify = false;
  CheckpointWatcher watcher(dir.path(), options);
  std::unique_ptr<CheckpointReader> reader = watcher.next(10);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->global_step(), 9);

  Tensor embedding = Tensor::zeros(Shape{10, 3}), accumulator = Tensor::zeros(Shape{10, 3});
  WarmStartOptions warm;
  warm.vars_to_warm_start = "embedding";
  warm.var_name_to_prev_var_name = {{"embedding", "table"}};
  warm.include_slots = true;
  std::vector<std::string> written = warm_start(
      *reader, {{"embedding", embedding}, {"embedding/Adagrad/accumulator", accumulator}},
      {{"embedding/Adagrad/accumulator", "embedding"}}, warm);
  EXPECT_EQ(written.size(), 2u);
  expect_equal_tensors(m.table, embedding, "embedding");
  expect_equal_tensors(m.accumulator, accumulator, "accumulator");
}

// tools/cadre_ckpt/cadre_checkpoint.py, with h5py, assembles the same logical values (their
// CRC-32C as this library computes it). Skipped where python3 has no h5py.
TEST(ShardedCheckpointTest, ThePythonReaderReadsTheLogicalVariablesWithH5py) {
  if (std::system("python3 -c 'import h5py' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3 cannot import h5py";
  }
  TempDir dir;
  Model m = model(3);
  CheckpointManager manager(dir.path());
  manager.save(sharded_data(manager, 4, m));
  std::string script = (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() /
                        "tools/cadre_ckpt/cadre_checkpoint.py")
                           .string();
  std::string command =
      "python3 " + script + " " + dir.path() + " table table/Adagrad/accumulator bias counter 2>&1";
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[4096];
  while (size_t got = std::fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, got);
  ASSERT_EQ(::pclose(pipe), 0) << output;
  auto crc = [](const Tensor& t) {
    char text[16];
    std::snprintf(text, sizeof(text), "0x%08x", crc32c::value(t.raw_data(), t.nbytes()));
    return std::string(text);
  };
  EXPECT_NE(output.find("(format 2, 2 parts)"), std::string::npos) << output;
  EXPECT_NE(output.find("table float32 [10, 3] crc32c=" + crc(m.table) + "\n"), std::string::npos)
      << output;
  EXPECT_NE(output.find("table/Adagrad/accumulator float32 [10, 3] crc32c=" + crc(m.accumulator) +
                        " (slot of table)"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("bias float32 [] crc32c=" + crc(m.bias)), std::string::npos) << output;
  EXPECT_NE(output.find("counter int64 [] crc32c=" + crc(Tensor::scalar<int64_t>(4))),
            std::string::npos)
      << output;
}

}  // namespace
}  // namespace cadre::checkpoint
