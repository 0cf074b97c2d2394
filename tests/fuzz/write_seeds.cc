// Writes the seed corpora of the fuzz targets that need real files (tests/fuzz/corpus/*),
// small but complete examples of each format made by Cadre's own writers:
//
//   write_fuzz_seeds tests/fuzz/corpus
//
// Run by hand when a format changes; the seeds are checked in.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cadre/checkpoint/writer.h"
#include "cadre/io/example.h"
#include "cadre/io/summary_writer.h"
#include "cadre/io/tfrecord.h"
#include "cadre/nn/nn.h"
#include "estimator/export_format.h"
#include "io/element_codec.h"
#include "strategies/ps/optimizer_proto.h"
#include "strategies/ps/ps.pb.h"
#include "strategies/ps/tensor_data.h"

namespace fs = std::filesystem;
using namespace cadre;

namespace {

void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

io::Element sample_element() {
  io::Element element;
  element.features.set("image", Tensor::from_vector<float>({0.5f, -1, 2, 3}, Shape{2, 2}));
  element.features.set("name", Tensor::from_vector<uint8_t>({'a', 'b'}));
  element.labels = Tensor::scalar<int64_t>(3);
  return element;
}

// One record of ps_shard_fuzz's input: kind, 2-byte length, the serialized request.
void add_request(std::string& out, int kind, const google::protobuf::MessageLite& request) {
  std::string body = request.SerializeAsString();
  out += static_cast<char>(kind);
  out += static_cast<char>(body.size() & 0xFF);
  out += static_cast<char>(body.size() >> 8);
  out += body;
}

std::string ps_session() {
  std::string out;
  ps::CreateRequest create;
  create.mutable_variable()->set_name("bias");
  create.mutable_variable()->set_dtype(static_cast<int>(DType::kFloat32));
  create.mutable_variable()->add_shape(3);
  create.mutable_variable()->set_trainable(true);
  ps::to_proto(Tensor::zeros(Shape{3}), create.mutable_initial_value());
  add_request(out, 0, create);
  ps::PushRequest push;
  ps::to_proto(nn::optimizers::adam(0.01)->config(), push.mutable_optimizer());
  push.set_from_chief(true);
  push.set_increment_global_step(true);
  ps::PushItem* item = push.add_items();
  item->set_name("dense/kernel");
  ps::to_proto(Tensor::full(Shape{4, 3}, 0.1), item->mutable_dense());
  for (const char* slot : {"dense/kernel/Adam/m", "dense/kernel/Adam/v"}) {
    ps::NamedTensor* t = push.add_slots();
    t->set_name(slot);
    t->set_slot_of("dense/kernel");
    ps::to_proto(Tensor::zeros(Shape{4, 3}), t->mutable_value());
  }
  push.add_slots_for("dense/kernel");
  push.set_has_initial_iterations(true);
  push.set_input_pipeline(1);
  push.set_has_input_position(true);
  push.set_input_position("position");
  add_request(out, 2, push);
  ps::PushRequest sparse;
  ps::to_proto(nn::optimizers::sgd(0.1)->config(), sparse.mutable_optimizer());
  ps::PushItem* rows = sparse.add_items();
  rows->set_name("emb/embeddings");
  rows->set_sparse(true);
  ps::to_proto(Tensor::from_vector<int64_t>({1, 5}), rows->mutable_indices());
  ps::to_proto(Tensor::full(Shape{2, 2}, 1.0), rows->mutable_values());
  add_request(out, 2, sparse);
  ps::PullRequest pull;
  pull.add_items()->set_name("dense/kernel");
  ps::PullItem* pulled_rows = pull.add_items();
  pulled_rows->set_name("emb/embeddings");
  ps::to_proto(Tensor::from_vector<int64_t>({0, 15}), pulled_rows->mutable_rows());
  add_request(out, 1, pull);
  add_request(out, 3, ps::GlobalStepRequest());
  add_request(out, 4, ps::ReadRequest());
  ps::ReadRequest named;
  named.add_names("dense/kernel/Adam/m");
  named.add_names("global_step");
  add_request(out, 4, named);
  ps::InputPositionsRequest positions;
  positions.set_at_step(8);
  add_request(out, 5, positions);
  positions.set_pipeline(1);
  positions.set_ended(true);
  add_request(out, 5, positions);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_fuzz_seeds CORPUS_DIR\n");
    return 2;
  }
  fs::path out(argv[1]);

  // A tf.train.Example with every kind of feature, alone and framed as TFRecords.
  std::string example = io::ExampleBuilder()
                            .add_floats("image", {1, 2, 3, 4})
                            .add_int64s("label", {5})
                            .add_bytes("name", {"seed"})
                            .add_int64s("ids", {1, 2, 3})
                            .add_floats("weights", {0.5})
                            .serialize();
  write(out / "example" / "full", example);
  write(out / "tfrecord" / "two_records", io::frame_record(example) + io::frame_record(""));

  write(out / "element_codec" / "two", io::encode_elements({sample_element(), sample_element()}));

  fs::path scratch = fs::temp_directory_path() / "cadre_fuzz_seeds";
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  {
    io::SummaryWriter writer(scratch.string());
    writer.scalar("loss", 0.5, 10);
    writer.text("note", "seed", 10);
    writer.histogram("w", Tensor::from_vector<double>({1, 2, 3}), 10);
    writer.close();
    write(out / "event_file" / "scalars", read(writer.path()));
  }

  checkpoint::CheckpointData data;
  data.global_step = 42;
  data.variables["dense/kernel"] = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  data.variables["dense/kernel/Adam/m"] = Tensor::zeros(Shape{2, 3});
  data.slot_of["dense/kernel/Adam/m"] = "dense/kernel";
  data.variables["Adam/iterations"] = Tensor::scalar<int64_t>(42);
  data.rng_states["global"] = Generator(1, 0).state();
  data.iterator_state["shuffle/position"] = Tensor::scalar<int64_t>(7);
  data.attributes["strategy"] = "one_device";
  checkpoint::write_checkpoint_file((scratch / "seed.h5").string(), data);
  write(out / "checkpoint" / "small.h5", read(scratch / "seed.h5"));

  estimator_internal::ExportedModel model;
  model.global_step = 42;
  model.source_checkpoint = "model.ckpt-42.h5";
  model.inputs["x"] = {DType::kFloat32, {8}};
  model.outputs["class"] = {DType::kInt64, {}};
  model.outputs["probabilities"] = {DType::kFloat32, {3}};
  model.signatures["serving_default"] = {"class", "probabilities"};
  write(out / "export_description" / "export.json",
        estimator_internal::export_description_json(model));
  write(out / "ps_shard" / "session", ps_session());
  fs::remove_all(scratch);
  return 0;
}
