// Sharded checkpoints written by workers that each hold every variable (MultiWorkerMirrored):
// the split of the variables among them, and parts written in the background from a snapshot
// and committed by a CheckpointManager, read back as the logical variables; a damaged worker
// part is DataLossError naming it, and the checkpoint before is used.
#include "checkpoint/worker_parts.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <numeric>

#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/restore.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/nn/variable.h"
#include "core/nn/deferred_copy.h"
#include "tests/checkpoint/test_util.h"

namespace cadre::checkpoint {
namespace {

using testing::expect_equal_tensors;
using testing::flip_byte;
using testing::TempDir;

Tensor counting(Shape shape, float base) {
  std::vector<float> values(static_cast<size_t>(shape.num_elements()));
  std::iota(values.begin(), values.end(), base);
  return Tensor::from_vector(values, shape);
}

// A wide kernel with two Adam slots (split by rows at a 1 KiB threshold), two biases with
// theirs, and a step counter.
CheckpointData dense_model(float base) {
  CheckpointData data;
  data.variables["wide/kernel"] = counting(Shape{50, 8}, base);
  data.variables["wide/kernel/Adam/m"] = counting(Shape{50, 8}, base * 2);
  data.variables["wide/kernel/Adam/v"] = counting(Shape{50, 8}, base * 3);
  data.variables["wide/bias"] = counting(Shape{8}, base);
  data.variables["wide/bias/Adam/m"] = counting(Shape{8}, base + 1);
  data.variables["logits/bias"] = counting(Shape{3}, base);
  data.variables["Adam/iterations"] = Tensor::scalar<int64_t>(7);
  data.slot_of = {{"wide/kernel/Adam/m", "wide/kernel"},
                  {"wide/kernel/Adam/v", "wide/kernel"},
                  {"wide/bias/Adam/m", "wide/bias"}};
  return data;
}

constexpr int64_t kSplitBytes = 1024;

TEST(WorkerPartsTest, SplitsLargeVariablesByRowsAndGivesSmallOnesWhole) {
  CheckpointData data = dense_model(1);
  auto shares = split_among_workers(data, 3, kSplitBytes);
  ASSERT_EQ(shares.size(), 3u);
  std::map<std::string, int64_t> rows;
  std::map<std::string, std::vector<int64_t>> firsts;
  for (const auto& share : shares) {
    for (const PartSlice& s : share) {
      rows[s.name] += s.rows;
      firsts[s.name].push_back(s.first_row);
      EXPECT_EQ(s.shape, data.variables.at(s.name).shape()) << s.name;
    }
  }
  // Every row of every tensor once; the kernel and its slots in three equal thirds.
  EXPECT_EQ(rows.size(), data.variables.size());
  for (const auto& [name, value] : data.variables) {
    EXPECT_EQ(rows[name], value.shape().rank() ? value.dim(0) : 1) << name;
  }
  EXPECT_EQ(firsts["wide/kernel"], (std::vector<int64_t>{0, 16, 33}));
  EXPECT_EQ(firsts["wide/kernel/Adam/v"], (std::vector<int64_t>{0, 16, 33}));
  // A slot goes with its variable, whole or by rows, and says whose it is.
  for (const auto& share : shares) {
    std::map<std::string, std::string> slot_of;
    for (const PartSlice& s : share) slot_of[s.name] = s.slot_of;
    if (slot_of.count("wide/bias")) EXPECT_EQ(slot_of.at("wide/bias/Adam/m"), "wide/bias");
  }
  // The same variables split the same way (every worker computes it).
  auto again = split_among_workers(dense_model(5), 3, kSplitBytes);
  for (size_t w = 0; w < 3; ++w) {
    ASSERT_EQ(again[w].size(), shares[w].size());
    for (size_t i = 0; i < again[w].size(); ++i) {
      EXPECT_EQ(again[w][i].name, shares[w][i].name);
      EXPECT_EQ(again[w][i].first_row, shares[w][i].first_row);
    }
  }
}

// Two workers write their shares while the caller changes the variables after the snapshot
// (as an update does, through finish_deferred_copies); the manager commits the parts, and
// the checkpoint holds the values of the moment each share was handed over, also where the
// snapshot's memory was prepared ahead.
CheckpointData save_by_workers(CheckpointManager& manager, int64_t step, float base) {
  CheckpointData model = dense_model(base);
  model.global_step = step;
  auto shares = split_among_workers(model, 2, kSplitBytes);
  std::vector<std::string> names = manager.part_file_names(step, 2);
  CheckpointData committed;
  committed.global_step = step;
  std::vector<std::shared_ptr<std::promise<WrittenPart>>> promises;
  for (int w = 0; w < 2; ++w) {
    auto written = std::make_shared<std::promise<WrittenPart>>();
    auto future = std::make_shared<std::shared_future<WrittenPart>>(written->get_future());
    WorkerPartWriter writer;
    CheckpointData part = part_data(model, shares[static_cast<size_t>(w)]);
    part.attributes["task"] = "worker:" + std::to_string(w);
    // Worker 1 copies into memory prepared ahead, still being faulted in meanwhile.
    if (w == 1) writer.prepare(part);
    writer.write(manager.model_dir(), names[static_cast<size_t>(w)], std::move(part),
                 [written](const WrittenPart& done, std::exception_ptr error) {
                   if (error) {
                     written->set_exception(error);
                   } else {
                     written->set_value(done);
                   }
                 });
    nn::finish_deferred_copies();
    for (auto& [name, value] : model.variables) {
      if (value.dtype() == DType::kFloat32) value.assign(Tensor::zeros(value.shape()));
    }
    writer.wait();
    committed.parts.push_back(
        {names[static_cast<size_t>(w)], shares[static_cast<size_t>(w)], [future] {
           WrittenPart part = future->get();
           return std::make_pair(part.bytes, part.crc32c);
         }});
    model = dense_model(base);  // the next worker holds the same values
  }
  manager.save(committed);
  return dense_model(base);
}

std::vector<std::string> parts_named(const std::string& dir, const std::string& pattern) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename();
    if (name.find(pattern) != std::string::npos) found.push_back(name);
  }
  return found;
}

TEST(WorkerPartsTest, WorkersPartsReadBackAsTheLogicalVariables) {
  TempDir dir;
  CheckpointManager manager(dir.path());
  CheckpointData expected = save_by_workers(manager, 4, 1);
  auto reader = CheckpointReader::open(dir.file("model.ckpt-4.h5"));
  EXPECT_EQ(reader->format_version(), 2);
  EXPECT_TRUE(reader->verify().empty());
  ASSERT_EQ(reader->variables().size(), expected.variables.size());
  for (const auto& [name, value] : expected.variables) {
    expect_equal_tensors(value, reader->read(name), name);
  }
  EXPECT_EQ(reader->variable("wide/kernel/Adam/m").slot_of, "wide/kernel");
  EXPECT_EQ(parts_named(dir.path(), "model.ckpt-4.part-").size(), 2u);
}

TEST(WorkerPartsTest, ADamagedWorkerPartIsDataLossNamingItAndThePreviousCheckpointIsUsed) {
  TempDir dir;
  CheckpointManager manager(dir.path());
  CheckpointData first = save_by_workers(manager, 1, 1);
  save_by_workers(manager, 2, 2);
  std::vector<std::string> parts = parts_named(dir.path(), "model.ckpt-2.part-1-of-2");
  ASSERT_EQ(parts.size(), 1u);
  // A byte of the kernel's rows in it (from row 25: 202, 203, ... as float32), not of HDF5's
  // own checksummed metadata.
  std::string bytes = testing::read_file(dir.file(parts[0]));
  float rows[2] = {202, 203};
  size_t at = bytes.find(std::string(reinterpret_cast<const char*>(rows), sizeof(rows)));
  ASSERT_NE(at, std::string::npos);
  flip_byte(dir.file(parts[0]), static_cast<std::streamoff>(at));
  std::vector<DatasetProblem> problems =
      CheckpointReader::open(dir.file("model.ckpt-2.h5"))->verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].dataset, "part " + parts[0]);
  std::map<std::string, Tensor> restored;
  for (const auto& [name, value] : first.variables) {
    restored[name] = Tensor::zeros(value.shape(), value.dtype());
  }
  auto used = restore_latest_good(dir.path(), whole_targets(restored));
  ASSERT_NE(used, nullptr);
  EXPECT_EQ(used->global_step(), 1);
  for (const auto& [name, value] : first.variables) {
    expect_equal_tensors(value, restored.at(name), name + " of step 1");
  }
}

// A part written through from the variables while an update claims what it overwrites at
// once, as the first update after a save does: the blocks the writer has not taken are
// copied into the pool, and past the pool's 16 blocks (three 24 MiB tensors: 18 blocks) the
// update waits for the writer. Whatever the race, the part holds the handover's values, with
// right checksums.
TEST(WorkerPartsTest, APartWrittenThroughWhileAnUpdateOverwritesItHoldsTheHandoversValues) {
  TempDir dir;
  CheckpointData model;
  for (const char* name : {"big/kernel", "big/kernel/Adam/m", "big/kernel/Adam/v"}) {
    model.variables[name] = counting(Shape{6144, 1024}, static_cast<float>(std::strlen(name)));
  }
  model.slot_of = {{"big/kernel/Adam/m", "big/kernel"}, {"big/kernel/Adam/v", "big/kernel"}};
  model.variables["Adam/iterations"] = Tensor::scalar<int64_t>(3);
  std::map<std::string, Tensor> handed_over;
  for (const auto& [name, value] : model.variables) handed_over[name] = value.clone();
  auto shares = split_among_workers(model, 1, kSplitBytes);
  CheckpointData part = part_data(model, shares[0]);
  std::promise<WrittenPart> written;
  WorkerPartWriter writer;
  writer.write(dir.path(), "model.ckpt-3.part-0-of-1.0000abcd.h5", std::move(part),
               [&](const WrittenPart& done, std::exception_ptr error) {
                 if (error) {
                   written.set_exception(error);
                 } else {
                   written.set_value(done);
                 }
               });
  std::vector<Tensor> targets;
  for (const auto& [name, value] : model.variables) targets.push_back(value);
  nn::ClaimedCopies claimed = nn::claim_deferred_copies(targets);
  for (const nn::CopyOut& out : claimed.copies()) out.make();
  claimed.done();
  for (Tensor& t : targets) {
    t.assign(Tensor::zeros(t.shape(), t.dtype()));
  }
  WrittenPart done = written.get_future().get();
  writer.wait();
  std::string path = dir.file("model.ckpt-3.part-0-of-1.0000abcd.h5");
  EXPECT_EQ(file_checksum(path).crc32c, done.crc32c);
  auto reader = CheckpointReader::open(path);
  EXPECT_TRUE(reader->verify().empty());
  for (const auto& [name, value] : handed_over) {
    expect_equal_tensors(value, reader->read(part_dataset_name(name, 0)), name);
  }
}

}  // namespace
}  // namespace cadre::checkpoint
