// TensorBoard event files: the records' wire bytes, reading back what was written, and
// flushing.
#include "cadre/io/event_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <regex>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/io/summary_writer.h"
#include "cadre/io/tfrecord.h"
#include "tests/support/bytes.h"
#include "tests/support/temp_dir.h"

namespace cadre::io {
namespace {

using Clock = std::chrono::system_clock;

double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

using cadre::testing::bytes;

// An Event record: field 1 (wall_time, wire type 1: 8 little-endian bytes) first, then the
// rest. Returns the wall time and leaves the rest in `tail`.
double split_wall_time(const std::string& record, std::string& tail) {
  EXPECT_GE(record.size(), 9u);
  EXPECT_EQ(record[0], 0x09);  // (1 << 3) | 1
  double wall_time;
  std::memcpy(&wall_time, record.data() + 1, 8);
  tail = record.substr(9);
  return wall_time;
}

class EventFileTest : public cadre::testing::TempDirTest {};

TEST_F(EventFileTest, RecordsHaveTheEventWireLayout) {
  double before = now();
  std::string file;
  {
    SummaryWriter writer(path("logs/train"));
    file = writer.path();
    writer.scalar("loss", 0.25, 7);
  }
  double after = now();
  std::string name = std::filesystem::path(file).filename();
  EXPECT_TRUE(std::regex_match(
      name, std::regex(R"(events\.out\.tfevents\.\d{10}\..+\.)" + std::to_string(::getpid()))))
      << name;

  TFRecordReader reader(file);
  std::string tail;
  // {wall_time, file_version (3) = "brain.Event:2"}; step 0 is not written (proto3).
  double t = split_wall_time(*reader.read(), tail);
  EXPECT_EQ(tail, bytes({0x1A, 13}) + "brain.Event:2");
  EXPECT_GE(t, before - 1);
  EXPECT_LE(t, after + 1);
  // {wall_time, step (2) = 7, summary (5) {value (1) {tag (1) "loss", simple_value (2, a
  // 32-bit float: wire type 5) 0.25 = 0x3E800000}}}.
  t = split_wall_time(*reader.read(), tail);
  EXPECT_EQ(tail, bytes({0x10, 0x07, 0x2A, 0x0D, 0x0A, 0x0B, 0x0A, 0x04, 'l', 'o', 's', 's', 0x15,
                         0x00, 0x00, 0x80, 0x3E}));
  EXPECT_GE(t, before - 1);
  EXPECT_FALSE(reader.read());
}

TEST_F(EventFileTest, ScalarsHistogramsAndTextReadBack) {
  std::string file;
  {
    SummaryWriter writer(dir());
    file = writer.path();
    for (int64_t step = 0; step < 5; ++step) writer.scalar("loss", 1.0 / (step + 1), step * 100);
    writer.histogram("weights", Tensor::from_vector<float>({-1, 0, 0.5f, 2, 2}), 400);
    writer.text("notes", "**hello** from step 400", 400);
  }
  std::vector<Event> events = read_event_file(file);
  ASSERT_EQ(events.size(), 8u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  for (int64_t step = 0; step < 5; ++step) {
    const Event& e = events[1 + step];
    EXPECT_EQ(e.step, step * 100);
    ASSERT_EQ(e.values.size(), 1u);
    EXPECT_EQ(e.values[0].tag, "loss");
    EXPECT_FLOAT_EQ(*e.values[0].scalar, static_cast<float>(1.0 / (step + 1)));
  }
  const Histogram& h = *events[6].values[0].histogram;
  EXPECT_EQ(h.min, -1);
  EXPECT_EQ(h.max, 2);
  EXPECT_EQ(h.num, 5);
  EXPECT_EQ(h.sum, 3.5);
  EXPECT_EQ(h.sum_squares, 9.25);
  ASSERT_EQ(h.bucket.size(), h.bucket_limit.size());
  double total = 0;
  for (size_t i = 0; i < h.bucket.size(); ++i) {
    total += h.bucket[i];
    if (i > 0) {
      EXPECT_LT(h.bucket_limit[i - 1], h.bucket_limit[i]);
    }
    if (h.bucket[i] == 2) {  // the two 2s: the bucket whose limit is the first above 2
      EXPECT_GT(h.bucket_limit[i], 2.0);
      EXPECT_LE(h.bucket_limit[i - 1], 2.0);
    }
  }
  EXPECT_EQ(total, 5);
  EXPECT_EQ(events[7].values[0].plugin_name, "text");
  EXPECT_EQ(*events[7].values[0].text, "**hello** from step 400");
}

TEST_F(EventFileTest, FlushesOnTheIntervalAndOnClose) {
  SummaryWriterOptions rarely, often;
  rarely.flush_secs = 3600;
  often.flush_secs = 0.05;
  SummaryWriter lazy(path("lazy"), rarely);
  SummaryWriter eager(path("eager"), often);
  lazy.scalar("x", 1, 1);
  eager.scalar("x", 1, 1);
  EXPECT_EQ(read_event_file(lazy.path()).size(), 1u);  // only the version record so far
  std::vector<Event> seen;
  for (int i = 0; i < 100 && seen.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    seen = read_event_file(eager.path());
  }
  EXPECT_EQ(seen.size(), 2u);
  lazy.close();
  EXPECT_EQ(read_event_file(lazy.path()).size(), 2u);
  EXPECT_THROW(lazy.scalar("x", 2, 2), FailedPreconditionError);
}

TEST_F(EventFileTest, DamagedEventFileIsDataLoss) {
  std::string file;
  {
    SummaryWriter writer(dir());
    file = writer.path();
    writer.scalar("loss", 1, 1);
  }
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 3);
  EXPECT_THROW(read_event_file(file), DataLossError);
  EXPECT_THROW(read_event_file(path("absent")), NotFoundError);
}

}  // namespace
}  // namespace cadre::io
