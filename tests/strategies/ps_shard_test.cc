// A ps task's shard called in-process, without gRPC: the chief creates and others wait;
// pulls of whole variables and of rows; pushes applied by the optimizer as a local one
// would, atomically; the chief's optimizer state first; the staleness bound; every bad
// input named; reads of what it holds; and a stop that ends every wait.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "strategies/ps/shard.h"
#include "strategies/ps/tensor_data.h"
#include "tests/strategies/ps_requests.h"

namespace cadre {
namespace {

using testing::add_dense;
using testing::add_fresh_state;
using testing::create_request;
using testing::pull_request;
using testing::push_request;
using testing::set_global_step;

class ShardTest : public ::testing::Test {
 protected:
  Tensor read(const std::string& name) {
    return ps::from_proto(shard_.pull(pull_request(name)).values(0), name);
  }
  // Creates `name` with `initial` and gives it `optimizer`'s fresh state, as the chief does.
  void create_with_state(const std::string& name, const Tensor& initial,
                         const nn::Optimizer& optimizer) {
    shard_.create(create_request(name, &initial, initial.shape()));
    ps::PushRequest state = push_request(optimizer, /*from_chief=*/true);
    add_fresh_state(state, optimizer, name, initial);
    shard_.push(state);
  }

  ps::Shard shard_{"ps:0"};
};

TEST_F(ShardTest, TheChiefCreatesAndOthersWaitForItsValue) {
  Tensor value = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{3, 2});
  auto worker = std::async(std::launch::async, [&] {
    return shard_.create(create_request("w", nullptr, Shape{3, 2}));
  });
  EXPECT_EQ(worker.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  shard_.create(create_request("w", &value, Shape{3, 2}));
  EXPECT_EQ(ps::from_proto(worker.get().value(), "w").to_vector<float>(), value.to_vector<float>());

  ps::PullRequest rows = pull_request("w");
  ps::to_proto(Tensor::from_vector<int64_t>({2, 0}), rows.mutable_items(0)->mutable_rows());
  EXPECT_EQ(ps::from_proto(shard_.pull(rows).values(0), "w").to_vector<float>(),
            (std::vector<float>{5, 6, 1, 2}));
  ps::to_proto(Tensor::from_vector<int64_t>({3}), rows.mutable_items(0)->mutable_rows());
  EXPECT_THROW(shard_.pull(rows), InvalidArgumentError);
  // A different shape for the same name is a mistake, named with both shapes.
  try {
    shard_.create(create_request("w", nullptr, Shape{2, 3}));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("exists as float32 [3, 2]"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("float32 [2, 3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(shard_.pull(pull_request("nobody")), NotFoundError);
}

// A slice and its slot in chunks of rows (as the chief sends a large one): a worker waits
// for the last chunk; chunks out of order or that do not fit are refused.
TEST_F(ShardTest, AValueAndASlotInChunksAreTakenWhenTheirLastRowHasCome) {
  Tensor value = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{3, 2});
  auto chunk = [&](int64_t first, int64_t rows) {
    Tensor part = value.slice(0, first, first + rows).contiguous();
    ps::CreateRequest request = create_request("w", &part, Shape{3, 2});
    request.set_value_partial(true);
    request.set_value_first_row(first);
    return request;
  };
  auto worker = std::async(std::launch::async, [&] {
    return shard_.create(create_request("w", nullptr, Shape{3, 2}));
  });
  shard_.create(chunk(0, 2));
  EXPECT_EQ(worker.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  EXPECT_THROW(shard_.create(chunk(1, 2)), InvalidArgumentError);  // overlaps, out of order
  shard_.create(chunk(2, 1));
  EXPECT_EQ(ps::from_proto(worker.get().value(), "w").to_vector<float>(), value.to_vector<float>());

  auto adagrad = nn::optimizers::adagrad(0.1);
  for (int64_t first : {0, 1}) {
    ps::PushRequest state = push_request(*adagrad, /*from_chief=*/true);
    ps::NamedTensor* slot = state.add_slots();
    slot->set_name("w/Adagrad/accumulator");
    slot->set_slot_of("w");
    ps::to_proto(Tensor::full(Shape{first == 0 ? 1 : 2, 2}, 0.5 + first), slot->mutable_value());
    slot->set_partial(true);
    slot->set_first_row(first);
    if (first == 1) state.add_slots_for("w");
    shard_.push(state);
  }
  ps::ReadRequest read_slot;
  read_slot.add_names("w/Adagrad/accumulator");
  EXPECT_EQ(ps::from_proto(shard_.read(read_slot).variables(0).value(), "slot").to_vector<float>(),
            (std::vector<float>{0.5, 0.5, 1.5, 1.5, 1.5, 1.5}));
}

TEST_F(ShardTest, PushesApplyTheOptimizerAsALocalOneWould) {
  Tensor initial = Tensor::from_vector<float>({1, -2, 3, 0.5}, Shape{2, 2});
  shard_.create(create_request("w", &initial, Shape{2, 2}));
  EXPECT_EQ(shard_.global_step(set_global_step(0)), 0);
  auto adam = nn::optimizers::adam(0.1);
  nn::VariableStore local_store;
  nn::VariableStoreScope scope(local_store);
  nn::Variable& local = nn::get_variable("w", Shape{2, 2}, nn::initializers::zeros());
  local.assign(initial);
  for (int step = 1; step <= 3; ++step) {
    Tensor g = Tensor::from_vector<float>({0.3f * step, -1, 2, 0.1f}, Shape{2, 2});
    ps::PushRequest request = push_request(*adam, /*from_chief=*/true);
    if (step == 1) add_fresh_state(request, *adam, "w", initial);
    add_dense(request, "w", g);
    request.set_increment_global_step(true);
    EXPECT_EQ(shard_.push(request).global_step(), step);
    adam->apply_gradients({g}, {&local});
  }
  std::vector<float> here = local.tensor().to_vector<float>(), there = read("w").to_vector<float>();
  for (size_t i = 0; i < here.size(); ++i) EXPECT_NEAR(here[i], there[i], 1e-6) << i;
  ps::ReadRequest counter;
  counter.add_names("Adam/iterations");
  EXPECT_EQ(ps::from_proto(shard_.read(counter).variables(0).value(), "it").item<int64_t>(), 3);
}

TEST_F(ShardTest, SparsePushesTouchOnlyTheirRows) {
  Tensor initial = Tensor::full(Shape{5, 2}, 1.0);
  shard_.create(create_request("table", &initial, Shape{5, 2}));
  auto adagrad = nn::optimizers::adagrad(0.5);
  ps::PushRequest request = push_request(*adagrad, true);
  add_fresh_state(request, *adagrad, "table", initial);
  ps::PushItem* item = request.add_items();
  item->set_name("table");
  item->set_sparse(true);
  ps::to_proto(Tensor::from_vector<int64_t>({3, 1, 3}), item->mutable_indices());
  ps::to_proto(Tensor::full(Shape{3, 2}, 1.0), item->mutable_values());
  shard_.push(request);
  std::vector<float> rows = read("table").to_vector<float>();
  for (int r : {0, 2, 4}) {
    EXPECT_EQ(rows[2 * r], 1.0f) << "row " << r;
  }
  EXPECT_LT(rows[2], 1.0f);     // row 1: one gradient
  EXPECT_LT(rows[6], rows[2]);  // row 3: two gradients, summed
}

TEST_F(ShardTest, AWorkersFirstPushWaitsForTheChiefsOptimizerState) {
  Tensor initial = Tensor::zeros(Shape{2});
  shard_.create(create_request("b", &initial, Shape{2}));
  auto sgd = nn::optimizers::sgd(0.1, /*momentum=*/0.9);
  ps::PushRequest early = push_request(*sgd, /*from_chief=*/false, /*timeout=*/0.5);
  add_dense(early, "b", Tensor::full(Shape{2}, 1.0));
  try {
    shard_.push(early);
    FAIL() << "expected DeadlineExceededError";
  } catch (const DeadlineExceededError& e) {
    EXPECT_NE(std::string(e.what()).find("has not come from the chief"), std::string::npos)
        << e.what();
  }
  ps::PushRequest chief = push_request(*sgd, true);
  add_fresh_state(chief, *sgd, "b", initial);
  shard_.push(chief);  // state only
  early.set_timeout_seconds(5);
  shard_.push(early);
  EXPECT_NEAR(read("b").to_vector<float>()[0], -0.1, 1e-6);
}

TEST_F(ShardTest, GradientsStalerThanTheBoundAreDropped) {
  auto sgd = nn::optimizers::sgd(1.0);
  create_with_state("v", Tensor::zeros(Shape{3}), *sgd);
  shard_.global_step(set_global_step(100));
  auto push_from = [&](int64_t pulled_step) {
    ps::PushRequest request = push_request(*sgd, false);
    add_dense(request, "v", Tensor::full(Shape{3}, -1.0));
    request.set_pulled_step(pulled_step);
    request.set_max_staleness(5);
    request.set_increment_global_step(true);
    return shard_.push(request);
  };
  ps::PushResponse stale = push_from(94);  // 6 steps behind
  EXPECT_TRUE(stale.dropped());
  EXPECT_EQ(stale.global_step(), 100);
  EXPECT_EQ(read("v").to_vector<float>(), (std::vector<float>{0, 0, 0}));
  ps::PushResponse fresh = push_from(95);  // 5 behind: within the bound
  EXPECT_FALSE(fresh.dropped());
  EXPECT_EQ(fresh.global_step(), 101);
  EXPECT_EQ(read("v").to_vector<float>(), (std::vector<float>{1, 1, 1}));
}

// Coordinator mode: ps 0's ledger counts each step of a unit once. A unit runs again after
// its worker was lost (or by a worker thought lost that was not): the steps past its count
// are refused whole, and so are the steps of units an earlier client dispatched. A refused
// step's batch counts as taken from its worker's input, unless a new client replaced the
// unit's (its workers read that batch again from the checkpoint it restored).
TEST_F(ShardTest, AUnitsStepsCountOnceAndAReplacedClientsStepsAreRefused) {
  auto sgd = nn::optimizers::sgd(1.0);
  create_with_state("v", Tensor::zeros(Shape{1}), *sgd);
  shard_.global_step(set_global_step(40));
  ps::UnitsRequest begin;
  begin.set_begin(true);
  begin.set_generation(1);
  shard_.units(begin);
  bool positioned = false;
  auto step_of = [&](int64_t generation, int64_t unit, int64_t steps) {
    ps::PushRequest request = push_request(*sgd, false);
    add_dense(request, "v", Tensor::full(Shape{1}, -1.0));
    request.set_increment_global_step(true);
    request.set_unit(unit);
    request.set_unit_steps(steps);
    request.set_unit_generation(generation);
    request.set_input_pipeline(1);
    if (!positioned) {  // the worker's first push carries its position
      request.set_has_input_position(true);
      request.set_input_position("at its start");
      positioned = true;
    }
    return shard_.push(request);
  };
  auto batches_taken = [&] {
    ps::InputPositionsRequest request;
    request.set_pipeline(1);
    ps::InputPositionsResponse positions = shard_.input_positions(request);
    return positions.positions().empty() ? 0 : positions.positions(0).pushes();
  };
  // Unit 1 of 3 steps: two workers race on it (the second dispatch of a lost unit); only
  // three of the five steps apply.
  for (int i = 0; i < 5; ++i) {
    ps::PushResponse r = step_of(1, 1, 3);
    EXPECT_EQ(r.unit_closed(), i >= 3) << i;
    EXPECT_FALSE(r.unit_replaced()) << i;  // complete: its batch was taken all the same
    if (i < 3) {
      EXPECT_EQ(r.unit_applied(), i + 1);
    }
    EXPECT_EQ(r.global_step(), 40 + std::min(i + 1, 3));
  }
  EXPECT_EQ(read("v").to_vector<float>(), std::vector<float>{3});
  EXPECT_EQ(step_of(1, 2, 2).unit_applied(), 1);
  EXPECT_EQ(batches_taken(), 6);  // the refused steps' batches too
  ps::UnitsRequest query;
  query.set_generation(1);
  query.add_units(1);
  query.add_units(2);
  query.add_units(3);
  ps::UnitsResponse counts = shard_.units(query);
  EXPECT_EQ(std::vector<int64_t>(counts.applied().begin(), counts.applied().end()),
            (std::vector<int64_t>{3, 1, 0}));
  EXPECT_EQ(counts.global_step(), 44);

  // A new client (generation 2) replaces the first: unit 2 of generation 1 is refused from
  // then on, and an older or equal generation cannot begin.
  begin.set_generation(2);
  shard_.units(begin);
  ps::PushResponse old = step_of(1, 2, 2);
  EXPECT_TRUE(old.unit_closed());
  EXPECT_TRUE(old.unit_replaced());  // the worker reads its batch again
  EXPECT_EQ(old.global_step(), 44);
  EXPECT_EQ(batches_taken(), 6);
  EXPECT_EQ(step_of(2, 2, 2).unit_applied(), 1);
  EXPECT_EQ(batches_taken(), 7);
  EXPECT_EQ(read("v").to_vector<float>(), std::vector<float>{5});
  EXPECT_THROW(shard_.units(begin), InvalidArgumentError);
  EXPECT_THROW(shard_.units(query), FailedPreconditionError);  // asks about generation 1
  // A unit without steps is a malformed request.
  EXPECT_THROW(step_of(2, 3, 0), InvalidArgumentError);
}

TEST_F(ShardTest, BadGradientsAreNamedWithBothTypes) {
  Tensor initial = Tensor::zeros(Shape{2, 2});
  shard_.create(create_request("w", &initial, Shape{2, 2}));
  auto sgd = nn::optimizers::sgd(0.1);
  ps::PushRequest request = push_request(*sgd, true);
  add_fresh_state(request, *sgd, "w", initial);
  add_dense(request, "w", Tensor::zeros(Shape{3, 3}));
  try {
    shard_.push(request);
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "ps:0: the gradient for 'w' is float32 [3, 3]; the variable is float32 [2, 2]"),
              std::string::npos)
        << e.what();
  }
  ps::PushRequest twice = push_request(*sgd, false);
  add_dense(twice, "w", initial);
  add_dense(twice, "w", initial);
  EXPECT_THROW(shard_.push(twice), InvalidArgumentError);
  ps::PushRequest unknown = push_request(*sgd, false);
  add_dense(unknown, "nobody", initial);
  EXPECT_THROW(shard_.push(unknown), NotFoundError);
}

TEST_F(ShardTest, PushesToOneVariableAreAtomic) {
  auto sgd = nn::optimizers::sgd(1.0);
  create_with_state("counter", Tensor::zeros(Shape{4096}), *sgd);
  std::vector<std::future<void>> threads;
  for (int t = 0; t < 6; ++t) {
    threads.push_back(std::async(std::launch::async, [&] {
      for (int i = 0; i < 40; ++i) {
        ps::PushRequest request = push_request(*sgd, false);
        add_dense(request, "counter", Tensor::full(Shape{4096}, -1.0));
        shard_.push(request);
      }
    }));
  }
  for (auto& t : threads) t.get();
  for (float v : read("counter").to_vector<float>()) ASSERT_EQ(v, 240.0f);
}

// A listing names every variable, slot, optimizer counter and the global step, with types
// but no values; reads by name return the values.
TEST_F(ShardTest, ReadsListWhatTheShardHoldsAndReturnValuesByName) {
  auto adagrad = nn::optimizers::adagrad(0.5);
  create_with_state("w", Tensor::full(Shape{2}, 3.0), *adagrad);
  shard_.global_step(set_global_step(7));
  std::map<std::string, std::string> listed;  // name -> slot_of
  ps::ReadResponse listing = shard_.read(ps::ReadRequest());
  for (const ps::NamedTensor& t : listing.variables()) {
    EXPECT_TRUE(t.value().data().empty()) << t.name();
    listed[t.name()] = t.slot_of();
  }
  EXPECT_EQ(listed, (std::map<std::string, std::string>{{"w", ""},
                                                        {"w/Adagrad/accumulator", "w"},
                                                        {"Adagrad/iterations", ""},
                                                        {"global_step", ""}}));
  ps::ReadRequest values;
  for (const char* name : {"w", "w/Adagrad/accumulator", "global_step"}) values.add_names(name);
  ps::ReadResponse read = shard_.read(values);
  EXPECT_EQ(ps::from_proto(read.variables(0).value(), "w").to_vector<float>(),
            (std::vector<float>{3, 3}));
  EXPECT_EQ(read.variables(1).slot_of(), "w");
  EXPECT_EQ(ps::from_proto(read.variables(2).value(), "step").item<int64_t>(), 7);
  ps::ReadRequest missing;
  missing.add_names("nobody");
  EXPECT_THROW(shard_.read(missing), NotFoundError);
}

TEST_F(ShardTest, StoppingEndsEveryWait) {
  auto waiting = std::async(std::launch::async, [&] {
    return shard_.create(create_request("w", nullptr, Shape{2}, /*timeout=*/60));
  });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  shard_.stop();
  EXPECT_THROW(waiting.get(), UnavailableError);
  ps::GlobalStepRequest step;
  step.set_timeout_seconds(60);
  EXPECT_THROW(shard_.global_step(step), UnavailableError);
}

}  // namespace
}  // namespace cadre
