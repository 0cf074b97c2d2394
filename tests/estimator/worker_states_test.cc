// worker_states: every worker's input position in a checkpoint, read back by a job of any
// number of workers.
#include "estimator/worker_states.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/writer.h"
#include "cadre/io/dataset.h"
#include "io/virtual_shards.h"
#include "tests/support/temp_dir.h"

namespace cadre::estimator_internal {
namespace {

// 80 numbers read as 8 input shards (shard v: v, v + 8, ...), one number a batch per shard.
io::VirtualShards numbers(int64_t first, int64_t last) {
  std::vector<int64_t> ids(80);
  for (int64_t i = 0; i < 80; ++i) ids[static_cast<size_t>(i)] = i;
  Dataset dataset = Dataset::from_tensor_slices(Features{{"id", Tensor::from_vector(ids)}})
                        .shard(8, first)
                        .batch(1);
  return io::read_virtual_shards(dataset, 8, first, last);
}

class WorkerStatesTest : public cadre::testing::TempDirTest {};

// A coordinator-mode client's checkpoint (or a ps chief's whose worker 0 never pushed): workers
// 1-3 of 4 sent positions, worker 0 none, so that no position is the chief's own. The shards'
// count comes from the workers', and one process resumes their shards where they were; before,
// the positions were taken for one pipeline per worker and every shard read again from its
// start.
TEST_F(WorkerStatesTest, ShardPositionsAreFoundWithoutWorkerZerosOwn) {
  checkpoint::CheckpointData data;
  data.global_step = 3;
  for (int worker = 1; worker < 4; ++worker) {
    io::Iterator it = numbers(2 * worker, 2 * worker + 2).dataset.make_iterator();
    ASSERT_TRUE(it.next().has_value());
    add_worker_state(worker, WorkerState{it.save(), {}}, &data);
  }
  set_input_pipelines(4, &data);
  checkpoint::write_checkpoint_file(path("model.ckpt-3.h5"), data);
  auto reader = checkpoint::CheckpointReader::open(path("model.ckpt-3.h5"));

  EXPECT_EQ(virtual_shards_in(reader->iterator_state(/*verify=*/false)), 8);
  std::string why;
  std::optional<SavedInput> saved = input_state_of(*reader, 0, 1, &why);
  ASSERT_TRUE(saved.has_value()) << why;
  io::Iterator one = numbers(0, 8).dataset.make_iterator();
  one.restore(saved->state);
  std::optional<Element> next = one.next();
  ASSERT_TRUE(next.has_value());
  // Shards 0-1 had no position (their beginning); 2-7 had each given their first number.
  EXPECT_EQ(next->features.at("id").to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 10, 11, 12, 13, 14, 15}));
}

}  // namespace
}  // namespace cadre::estimator_internal
