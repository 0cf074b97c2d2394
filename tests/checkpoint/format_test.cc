// The file format: round trips of every dtype and odd shapes, partitions, checksums and
// what a damaged or foreign file gives.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/writer.h"
#include "tests/checkpoint/test_util.h"

namespace cadre::checkpoint {
namespace {

using testing::expect_equal_tensors;
using testing::ramp;
using testing::TempDir;

// Offset in `path` of the first occurrence of `tensor`'s first bytes (its data on disk).
std::streamoff find_data(const std::string& path, const Tensor& tensor, size_t bytes = 16) {
  std::string contents = testing::read_file(path);
  std::string needle(static_cast<const char*>(tensor.contiguous().raw_data()), bytes);
  size_t at = contents.find(needle);
  EXPECT_NE(at, std::string::npos);
  return static_cast<std::streamoff>(at);
}

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(FormatTest, RoundTripsEveryDtype) {
  TempDir dir;
  Tensor base = ramp({2, 3}, 0.75f, -2);
  CheckpointData data;
  data.global_step = 7;
  data.variables["f32"] = base;
  data.variables["f64"] = base.cast(DType::kFloat64);
  data.variables["i32"] = base.cast(DType::kInt32);
  data.variables["i64"] =
      Tensor::from_vector<int64_t>({-(int64_t{1} << 40), 0, 1, 2, 3, 4}, {2, 3});
  data.variables["u8"] = Tensor::from_vector<uint8_t>({0, 1, 2, 127, 128, 255}, {2, 3});
  data.variables["bool"] =
      Tensor::from_vector<bool>({true, false, true, true, false, false}, {2, 3});
  data.variables["bf16"] = base.cast(DType::kBFloat16);
  data.variables["f16"] = base.cast(DType::kFloat16);
  std::string path = dir.file("all.h5");
  write_checkpoint_file(path, data);

  auto reader = CheckpointReader::open(path);
  EXPECT_EQ(reader->global_step(), 7);
  ASSERT_EQ(reader->variables().size(), data.variables.size());
  for (const auto& [name, value] : data.variables) {
    EXPECT_EQ(reader->variable(name).dtype, value.dtype()) << name;
    expect_equal_tensors(value, reader->read(name), name);
  }
  EXPECT_TRUE(reader->verify().empty());
}

TEST(FormatTest, RoundTripsScalarsAndEmptyTensors) {
  TempDir dir;
  CheckpointData data;
  data.variables["scalar"] = Tensor::scalar<float>(3.5f);
  data.variables["scalar_bool"] = Tensor::scalar<bool>(true);
  data.variables["empty"] = Tensor::zeros({0});
  data.variables["empty_rows"] = Tensor::zeros({0, 5}, DType::kInt64);
  data.variables["empty_columns"] = Tensor::zeros({3, 0});
  std::string path = dir.file("odd.h5");
  write_checkpoint_file(path, data);
  auto reader = CheckpointReader::open(path);
  for (const auto& [name, value] : data.variables)
    expect_equal_tensors(value, reader->read(name), name);
  EXPECT_EQ(reader->read("scalar").item<float>(), 3.5f);
  EXPECT_TRUE(reader->verify().empty());
}

TEST(FormatTest, LargeAndNonContiguousTensorsAreWrittenInBlocks) {
  TempDir dir;
  Tensor large = ramp({1024, 2048}, 0.5f);      // 8 MiB
  Tensor transposed = ramp({300, 500}, 2).t();  // a view: copied one block at a time
  CheckpointData data;
  data.variables["large"] = large;
  data.variables["transposed"] = transposed;
  WriteOptions options;
  options.block_bytes = 1 << 20;  // 8 blocks for "large"
  std::string path = dir.file("large.h5");
  write_checkpoint_file(path, data, options);

  auto reader = CheckpointReader::open(path);
  reader->set_block_bytes(3 << 20);  // blocks that do not line up with the writer's
  expect_equal_tensors(large, reader->read("large"), "large");
  expect_equal_tensors(transposed.contiguous(), reader->read("transposed"), "transposed");
  // Into a non-contiguous destination and one of another layout.
  Tensor destination = Tensor::zeros({300, 500}).t();
  reader->read_into("transposed", destination);
  expect_equal_tensors(transposed.contiguous(), destination.contiguous(), "into a view");
  EXPECT_TRUE(reader->verify().empty());
}

TEST(FormatTest, PartitionedVariablesSaveAsOneLogicalTensorAndRestoreAsSlices) {
  TempDir dir;
  Tensor logical = ramp({10, 4}, 1, 100);
  CheckpointData data;
  // Saved from three parameter-server shards of uneven size.
  data.partitioned_variables["embedding"] = {logical.slice(0, 0, 4), logical.slice(0, 4, 7),
                                             logical.slice(0, 7, 10)};
  WriteOptions options;
  options.block_bytes = 32;  // two rows per block: blocks straddle the shards
  std::string path = dir.file("parts.h5");
  write_checkpoint_file(path, data, options);

  auto reader = CheckpointReader::open(path);
  reader->set_block_bytes(48);
  EXPECT_EQ(reader->variable("embedding").shape, (Shape{10, 4}));
  expect_equal_tensors(logical, reader->read("embedding"), "whole");
  // Into two partitions of a different split, with and without verification.
  for (bool verify : {true, false}) {
    Tensor first = Tensor::zeros({5, 4}), second = Tensor::zeros({5, 4});
    reader->read_partitions_into("embedding", {{0, first}, {5, second}}, verify);
    expect_equal_tensors(logical.slice(0, 0, 5).contiguous(), first, "first");
    expect_equal_tensors(logical.slice(0, 5, 10).contiguous(), second, "second");
  }
  Tensor rows = Tensor::zeros({3, 4}, DType::kFloat64);  // converted on the way
  EXPECT_THROW(reader->read_rows_into("embedding", 8, rows), InvalidArgumentError);
}

TEST(FormatTest, DeviceTensorsAreSavedAndRestoredThroughTheHost) {
  if (num_gpus() == 0) GTEST_SKIP() << "no GPU";
  TempDir dir;
  Tensor host = ramp({300, 70}, 0.5f, 1);
  CheckpointData data;
  data.variables["on_gpu"] = host.to(Device::gpu(0));
  WriteOptions options;
  options.block_bytes = 1 << 14;  // several device-to-host block copies
  write_checkpoint_file(dir.file("gpu.h5"), data, options);
  auto reader = CheckpointReader::open(dir.file("gpu.h5"));
  expect_equal_tensors(host, reader->read("on_gpu"), "read to the host");
  Tensor destination = Tensor::zeros({300, 70}, DType::kFloat32, Device::gpu(0));
  reader->set_block_bytes(1 << 14);
  reader->read_into("on_gpu", destination);
  expect_equal_tensors(host, destination, "read into a GPU tensor");
}

TEST(FormatTest, StepRngIteratorStateAndAttributesRoundTrip) {
  TempDir dir;
  CheckpointData data = testing::small_model(1200);
  data.rng_states["replica_1"] = {42, 8, 99};
  std::string path = dir.file("state.h5");
  write_checkpoint_file(path, data);
  auto reader = CheckpointReader::open(path);
  EXPECT_EQ(reader->global_step(), 1200);
  auto rng = reader->rng_states();
  ASSERT_EQ(rng.size(), 2u);
  EXPECT_EQ(rng["global"].seed, 42u);
  EXPECT_EQ(rng["global"].offset, 12000u);
  EXPECT_EQ(rng["replica_1"].stream, 8u);
  auto iterator = reader->iterator_state();
  EXPECT_EQ(iterator.at("shard_0/position").item<int64_t>(), 1200 * 32);
  EXPECT_EQ(tensor_to_bytes(iterator.at("shard_0/cursor")), "epoch=1;file=train-00001");
  auto attributes = reader->attributes();
  EXPECT_EQ(attributes["strategy"], "MirroredStrategy");
  EXPECT_EQ(attributes["format"], "cadre-checkpoint");
  EXPECT_EQ(attributes["format_version"], "1");
  EXPECT_EQ(attributes["global_step"], "1200");
  EXPECT_FALSE(attributes["library_version"].empty());
  EXPECT_EQ(attributes["created"].size(), 20u);  // 2026-01-02T03:04:05Z
  EXPECT_EQ(reader->variable("hidden1/kernel/Adam/m").slot_of, "hidden1/kernel");
  EXPECT_EQ(reader->variable("hidden1/kernel").slot_of, "");
}

TEST(FormatTest, FlippedByteInsideAVariableIsCaughtByVerifyAndByRead) {
  TempDir dir;
  CheckpointData data = testing::small_model(5);
  Tensor weights = ramp({64, 64}, 3.25f, 7);
  data.variables["big/kernel"] = weights;
  std::string path = dir.file("flip.h5");
  write_checkpoint_file(path, data);
  testing::flip_byte(path, find_data(path, weights) + 1000);

  auto reader = CheckpointReader::open(path);
  std::vector<DatasetProblem> problems = reader->verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].dataset, "variables/big/kernel");
  EXPECT_NE(problems[0].problem.find("checksum mismatch"), std::string::npos)
      << problems[0].problem;
  std::string message = error_of([&] { reader->read("big/kernel"); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("variables/big/kernel"), std::string::npos) << message;
  EXPECT_THROW(reader->read("big/kernel"), DataLossError);
  EXPECT_NO_THROW(reader->read("hidden1/kernel"));  // the rest is intact
}

// Every 7th byte of a small checkpoint flipped in turn: each flip is either harmless
// (padding, free space) or reported as an error; never a crash, never a wrong value.
TEST(FormatTest, NoFlippedByteAnywhereGoesUnnoticed) {
  TempDir dir;
  CheckpointData data = testing::small_model(5);
  data.variables["bool"] = Tensor::from_vector<bool>({true, false}, {2});
  std::string path = dir.file("good.h5");
  write_checkpoint_file(path, data);
  testing::expect_every_flip_noticed(path, dir.file("bad.h5"));
}

TEST(FormatTest, AFileThatIsNotHdf5IsAClearDataLossError) {
  TempDir dir;
  std::string path = dir.file("model.ckpt-1.h5");
  testing::write_file(path, "this is a text file, not a checkpoint\n");
  std::string message = error_of([&] { CheckpointReader::open(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("not an HDF5 file"), std::string::npos) << message;
  EXPECT_THROW(CheckpointReader::open(path), DataLossError);
  EXPECT_EQ(testing::read_file(path), "this is a text file, not a checkpoint\n");
}

TEST(FormatTest, TruncatedFileIsADataLossError) {
  TempDir dir;
  CheckpointData data = testing::small_model(3);
  data.variables["big"] = ramp({256, 256});
  std::string path = dir.file("model.ckpt-3.h5");
  write_checkpoint_file(path, data);
  struct stat info;
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  for (off_t size : {off_t{0}, off_t{100}, info.st_size / 2, info.st_size - 1}) {
    std::filesystem::copy_file(path, dir.file("cut.h5"),
                               std::filesystem::copy_options::overwrite_existing);
    ASSERT_EQ(::truncate(dir.file("cut.h5").c_str(), size), 0);
    std::string message = error_of([&] {
      auto reader = CheckpointReader::open(dir.file("cut.h5"));
      reader->read("big");
    });
    EXPECT_NE(message.find(dir.file("cut.h5")), std::string::npos) << size << ": " << message;
    EXPECT_THROW(
        {
          auto reader = CheckpointReader::open(dir.file("cut.h5"));
          reader->read("big");
        },
        DataLossError)
        << size;
  }
}

// A superblock whose addresses lie past the end of the file is refused before libhdf5 reads
// it: libhdf5 allocated 2.2 GB for this 43-byte file (found by fuzzing).
TEST(FormatTest, ASuperblockPointingPastTheFileIsRefusedBeforeHdf5ReadsIt) {
  TempDir dir;
  std::string path = dir.file("model.ckpt-1.h5");
  const unsigned char fuzzed[] = {0x89, 0x48, 0x44, 0x46, 0x0d, 0x0a, 0x1a, 0x0a, 0x01, 0x00, 0x00,
                                  0x2b, 0x00, 0x04, 0x02, 0x08, 0x4e, 0x06, 0xd3, 0xf1, 0x00, 0xff,
                                  0x85, 0x84, 0x85, 0x85, 0x85, 0x85, 0x85, 0x85, 0x85, 0x85, 0x85,
                                  0x85, 0x85, 0x85, 0x85, 0x85, 0x85, 0x85, 0x85, 0x85, 0x14};
  testing::write_file(path, std::string(reinterpret_cast<const char*>(fuzzed), sizeof fuzzed));
  std::string message = error_of([&] { CheckpointReader::open(path); });
  EXPECT_NE(message.find("is damaged: its HDF5 superblock declares 4-byte addresses"),
            std::string::npos)
      << message;
  EXPECT_THROW(CheckpointReader::open(path), DataLossError);

  // A real checkpoint whose end-of-file address is made larger than the file.
  CheckpointData data = testing::small_model(3);
  write_checkpoint_file(path, data);
  std::string bytes = testing::read_file(path);
  int version = static_cast<unsigned char>(bytes[8]);
  size_t end_at = version == 0 ? 24 + 16 : version == 1 ? 28 + 16 : 12 + 16;
  bytes[end_at + 4] = '\x7f';
  testing::write_file(path, bytes);
  message = error_of([&] { CheckpointReader::open(path); });
  EXPECT_NE(message.find("says the file ends at byte"), std::string::npos) << message;
}

TEST(FormatTest, MissingFileIsNotFound) {
  TempDir dir;
  EXPECT_THROW(CheckpointReader::open(dir.file("model.ckpt-9.h5")), NotFoundError);
}

TEST(FormatTest, DataThatCannotBeSavedIsRejectedBeforeAnythingIsWritten) {
  TempDir dir;
  std::string path = dir.file("bad.h5");
  auto rejects = [&](CheckpointData data, const std::string& expected) {
    std::string message = error_of([&] { write_checkpoint_file(path, data); });
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_FALSE(std::filesystem::exists(path));
  };
  CheckpointData clash;
  clash.variables["a"] = Tensor::zeros({1});
  clash.variables["a/b"] = Tensor::zeros({1});
  rejects(clash, "'a' is also the group of 'a/b'");
  // Names that sort between "a" and "a/..." ('-' and '.' sort before '/') hide nothing.
  CheckpointData hidden;
  hidden.variables["a"] = Tensor::zeros({1});
  hidden.variables["a-b"] = Tensor::zeros({1});
  hidden.variables["a.c"] = Tensor::zeros({1});
  hidden.partitioned_variables["a/d"] = {Tensor::zeros({1})};
  rejects(hidden, "'a' is also the group of 'a/d'");
  CheckpointData apart;  // prefixes that are not groups are fine
  apart.variables["a"] = Tensor::zeros({1});
  apart.variables["a-b"] = Tensor::zeros({1});
  apart.variables["ab/c"] = Tensor::zeros({1});
  apart.partitioned_variables["a0"] = {Tensor::zeros({1})};
  EXPECT_NO_THROW(check_data(apart));
  CheckpointData bad_name;
  bad_name.variables["a//b"] = Tensor::zeros({1});
  bad_name.variables["../x"] = Tensor::zeros({1});
  rejects(bad_name, "'../x'");
  CheckpointData bad_parts;
  bad_parts.partitioned_variables["e"] = {Tensor::zeros({2, 3}), Tensor::zeros({2, 4})};
  rejects(bad_parts, "partition 1 of 'e'");
  CheckpointData orphan_slot;
  orphan_slot.variables["v/m"] = Tensor::zeros({1});
  orphan_slot.slot_of["v/m"] = "v";
  rejects(orphan_slot, "belongs to 'v'");
}

}  // namespace
}  // namespace cadre::checkpoint
