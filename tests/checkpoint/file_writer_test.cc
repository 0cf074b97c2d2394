// CheckpointFileWriter: files written one after another from one in-memory HDF5 file hold
// exactly what each save had, whatever changed between saves.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <random>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/writer.h"
#include "core/base/strings.h"
#include "tests/checkpoint/test_util.h"

namespace cadre::checkpoint {
namespace {

using testing::expect_equal_tensors;
using testing::ramp;
using testing::TempDir;

// Everything a reader gives back must be what `data` held, and what a file written on its
// own (write_checkpoint_file) gives back.
void expect_holds(const std::string& path, const CheckpointData& data,
                  const std::string& fresh_path) {
  SCOPED_TRACE(path);
  auto reader = CheckpointReader::open(path);
  auto fresh = CheckpointReader::open(fresh_path);
  EXPECT_TRUE(reader->verify().empty());
  EXPECT_EQ(reader->global_step(), data.global_step);
  EXPECT_EQ(reader->attributes(), fresh->attributes());
  ASSERT_EQ(reader->variables().size(), fresh->variables().size());
  for (const auto& [name, info] : fresh->variables()) {
    EXPECT_EQ(reader->variable(name).slot_of, info.slot_of) << name;
    expect_equal_tensors(fresh->read(name), reader->read(name), name);
  }
  for (const auto& [name, value] : data.variables) {
    expect_equal_tensors(value, reader->read(name), name);
  }
  auto rng = reader->rng_states();
  ASSERT_EQ(rng.size(), data.rng_states.size());
  for (const auto& [name, state] : data.rng_states) {
    EXPECT_EQ(rng.at(name).seed, state.seed);
    EXPECT_EQ(rng.at(name).stream, state.stream);
    EXPECT_EQ(rng.at(name).offset, state.offset);
  }
  auto iterator = reader->iterator_state();
  ASSERT_EQ(iterator.size(), data.iterator_state.size());
  for (const auto& [name, value] : data.iterator_state) {
    expect_equal_tensors(value, iterator.at(name), name);
  }
}

// Files compared with each other need the same creation time.
WriteOptions created_at(double seconds = 1780000000.25) {
  WriteOptions options;
  options.created_unix_seconds = seconds;
  return options;
}

CheckpointData model_at(int64_t step, size_t input_bytes) {
  CheckpointData data = testing::small_model(step, static_cast<float>(step) * 0.5f);
  data.variables["big/kernel"] = ramp({300, 40}, 0.01f, static_cast<float>(step));
  data.partitioned_variables["embedding"] = {ramp({5, 4}, 1, static_cast<float>(step)),
                                             ramp({3, 4}, 2, static_cast<float>(step))};
  data.iterator_state["shard_0/buffer"] =
      bytes_to_tensor(std::string(input_bytes, static_cast<char>('a' + step % 26)));
  return data;
}

TEST(CheckpointFileWriterTest, FilesInARowHoldWhatEachSaveHad) {
  TempDir dir;
  CheckpointFileWriter writer;
  WriteOptions options = created_at();
  for (int64_t step = 1; step <= 8; ++step) {
    // Values change at every save; the input state's size at saves 3 and 4; a variable
    // comes at save 6 and goes at 7 (a new layout each time); the RNG's offset always.
    CheckpointData data = model_at(step, step == 3 ? 700 : step == 4 ? 90 : 300);
    if (step == 6) data.variables["extra/bias"] = ramp({7}, 3);
    options.created_unix_seconds += 1;
    std::string path = dir.file(str_cat("model.ckpt-", step, ".h5"));
    std::string fresh = dir.file(str_cat("fresh-", step, ".h5"));
    writer.write(path, data, options);
    write_checkpoint_file(fresh, data, options);
    expect_holds(path, data, fresh);
  }
}

TEST(CheckpointFileWriterTest, ARewrittenFileSurvivesEveryFlippedByte) {
  TempDir dir;
  CheckpointFileWriter writer;
  for (int64_t step = 1; step <= 3; ++step) {
    CheckpointData data = testing::small_model(step);
    data.iterator_state["shard_0/cursor"] = bytes_to_tensor(std::string(step * 10, 'x'));
    writer.write(dir.file("good.h5"), data);
  }
  testing::expect_every_flip_noticed(dir.file("good.h5"), dir.file("bad.h5"));
}

// A dataset replaced for a new shape leaves free space in the in-memory file, which must
// not grow from save to save: files stay within a little of the size of a file written on
// its own (the writer starts a new in-memory file past that).
TEST(CheckpointFileWriterTest, AnInputStateOfChangingSizeDoesNotGrowTheFiles) {
  TempDir dir;
  CheckpointFileWriter writer;
  std::mt19937 random(7);
  std::uniform_int_distribution<size_t> bytes(1000, 60000);
  auto size_of = [](const std::string& path) {
    struct stat info {};
    EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
    return static_cast<int64_t>(info.st_size);
  };
  for (int64_t step = 1; step <= 200; ++step) {
    std::string path = dir.file(str_cat("model.ckpt-", step % 3, ".h5"));
    CheckpointData data = model_at(step, bytes(random));
    data.iterator_state["shard_1/buffer"] = bytes_to_tensor(std::string(bytes(random), 'z'));
    writer.write(path, data, created_at());
    write_checkpoint_file(dir.file("fresh.h5"), data, created_at());
    int64_t size = size_of(path), fresh = size_of(dir.file("fresh.h5"));
    // The writer's allowance for free space, and a page of padding.
    EXPECT_LE(size, fresh + std::max<int64_t>(64 << 10, size / 32) + 4096) << "save " << step;
    if (step % 50 == 0) expect_holds(path, data, dir.file("fresh.h5"));
  }
}

TEST(CheckpointFileWriterTest, AFailedWriteNamesTheFileAndTheNextStartsOver) {
  TempDir dir;
  CheckpointFileWriter writer;
  writer.write(dir.file("model.ckpt-1.h5"), model_at(1, 100));
  std::string missing = dir.file("no/such/dir/model.ckpt-2.h5");
  try {
    writer.write(missing, model_at(2, 100));
    ADD_FAILURE() << "no error";
  } catch (const NotFoundError& error) {  // typed by errno, as every file error
    EXPECT_NE(std::string(error.what()).find(missing), std::string::npos) << error.what();
  }
  CheckpointData data = model_at(3, 100);
  writer.write(dir.file("model.ckpt-3.h5"), data, created_at());
  write_checkpoint_file(dir.file("fresh.h5"), data, created_at());
  expect_holds(dir.file("model.ckpt-3.h5"), data, dir.file("fresh.h5"));
}

TEST(CheckpointFileWriterTest, DataRejectedByCheckDataWritesNothing) {
  TempDir dir;
  CheckpointFileWriter writer;
  CheckpointData data = model_at(1, 10);
  data.slot_of["orphan/Adam/m"] = "orphan";
  EXPECT_THROW(writer.write(dir.file("model.ckpt-1.h5"), data), InvalidArgumentError);
  EXPECT_FALSE(std::filesystem::exists(dir.file("model.ckpt-1.h5")));
}

TEST(CheckpointFileWriterTest, CheckpointsPastTheInMemoryLimitAreWrittenOnDisk) {
  TempDir dir;
  CheckpointFileWriter writer;
  CheckpointData small = model_at(1, 100);
  writer.write(dir.file("small-1.h5"), small);
  CheckpointData large = model_at(2, 100);
  large.variables["huge"] = Tensor::full(
      {static_cast<int64_t>(CheckpointFileWriter::kInMemoryBytes / 4096) + 1, 1024}, 1.5f);
  writer.write(dir.file("large.h5"), large, created_at());
  write_checkpoint_file(dir.file("fresh-large.h5"), large, created_at());
  expect_holds(dir.file("large.h5"), large, dir.file("fresh-large.h5"));
  writer.write(dir.file("small-3.h5"), small, created_at());
  write_checkpoint_file(dir.file("fresh-small.h5"), small, created_at());
  expect_holds(dir.file("small-3.h5"), small, dir.file("fresh-small.h5"));
}

}  // namespace
}  // namespace cadre::checkpoint
