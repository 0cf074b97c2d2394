// Model::save and load_model: the architecture and compile settings as protobuf text
// (model.pbtxt) beside a copy of the latest checkpoint and its state file.
#include <glog/logging.h>
#include <google/protobuf/text_format.h>

#include <chrono>
#include <filesystem>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/state_file.h"
#include "core/base/strings.h"
#include "core/nn/optimizer_config.h"
#include "keras/model_state.h"
#include "keras/proto/model.pb.h"

namespace cadre::keras {

namespace {

namespace fs = std::filesystem;
constexpr char kModelFile[] = "model.pbtxt";

proto::ModelConfig describe(const Model::State& s) {
  proto::ModelConfig config;
  config.set_name(s.name);
  config.set_sequential(s.sequential);
  std::map<const internal::Node*, int> ids;
  for (const auto& in : s.inputs) {
    proto::InputConfig* input = config.add_inputs();
    input->set_name(in->input_name);
    for (size_t i = 1; i < in->shape.size(); ++i) input->add_shape(in->shape[i]);
    input->set_dtype(std::string(dtype_name(in->dtype)));
    ids[in.get()] = static_cast<int>(ids.size());
  }
  for (const auto& layer : s.layers) {
    proto::LayerConfig* l = config.add_layers();
    l->set_name(layer->name());
    l->set_kind(layer->kind());
    for (const auto& [k, v] : layer->config()) (*l->mutable_args())[k] = v;
  }
  for (const auto& node : s.order) {
    proto::NodeConfig* n = config.add_nodes();
    n->set_layer(static_cast<int>(std::find(s.layers.begin(), s.layers.end(), node->layer) -
                                  s.layers.begin()));
    for (const auto& in : node->inbound) n->add_inbound(ids.at(in.get()));
    ids[node.get()] = static_cast<int>(ids.size());
  }
  config.set_output(ids.at(s.output.get()));
  if (s.compiled) {
    proto::CompileConfig* c = config.mutable_compile();
    c->set_loss(s.loss->name());
    for (const auto& [k, v] : s.loss->config()) (*c->mutable_loss_config())[k] = v;
    for (const Metric& m : s.metrics) c->add_metrics(m.name());
    try {
      nn::OptimizerConfig optimizer = s.optimizer()->config();
      c->set_optimizer(optimizer.kind);
      for (const auto& [k, v] : optimizer.numbers) (*c->mutable_optimizer_numbers())[k] = v;
    } catch (const Error& e) {
      LOG(WARNING) << "save: the optimizer is not recorded (" << e.what() << ")";
    }
    c->set_tf_random_seed(static_cast<int64_t>(s.config.tf_random_seed.value_or(0)));
  }
  return config;
}

// Copies `checkpoint_file` into `dir` and makes it the latest there.
void place_checkpoint(Env& env, const std::string& checkpoint_file, const std::string& dir) {
  fs::create_directories(dir);
  std::string base = fs::path(checkpoint_file).filename().string();
  fs::copy_file(checkpoint_file, fs::path(dir) / base, fs::copy_options::overwrite_existing);
  env.sync_file((fs::path(dir) / base).string());
  checkpoint::CheckpointState state;
  state.model_checkpoint_path = base;
  state.all_model_checkpoint_paths = {base};
  state.all_model_checkpoint_timestamps = {env.now_seconds()};
  checkpoint::write_state(env, dir, state);
}

}  // namespace

void Model::save(const std::string& dir) const {
  if (!state_->compiled) {
    throw FailedPreconditionError(
        str_cat("save: model '", state_->name, "' is not compiled and has no weights yet"));
  }
  std::optional<std::string> latest = checkpoint::latest_checkpoint(state_->config.model_dir);
  if (!latest) {
    throw FailedPreconditionError(str_cat("save: model '", state_->name, "' has no weights yet in ",
                                          state_->config.model_dir, "; fit it first"));
  }
  std::shared_ptr<Env> env = state_->config.file_system();
  fs::create_directories(dir);
  for (const auto& [step, file] : checkpoint::list_checkpoint_files(*env, dir, "model.ckpt")) {
    fs::remove(fs::path(dir) / file);  // an earlier save's
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(describe(*state_), &text);
  std::string path = (fs::path(dir) / kModelFile).string();
  env->write_file(path + ".tmp", text);
  env->sync_file(path + ".tmp");
  env->rename_file(path + ".tmp", path);
  place_checkpoint(*env, *latest, dir);
}

Model load_model(const std::string& dir, LoadOptions options) {
  std::string path = (fs::path(dir) / kModelFile).string();
  if (!fs::exists(path))
    throw NotFoundError(str_cat("load_model: no saved model in ", dir, " (", path, ")"));
  std::shared_ptr<Env> env = RunConfig().file_system();
  proto::ModelConfig config;
  if (!google::protobuf::TextFormat::ParseFromString(env->read_file(path), &config)) {
    throw DataLossError(str_cat("load_model: ", path, " is not a model description"));
  }
  std::vector<std::shared_ptr<internal::LayerImpl>> layers;
  for (const auto& l : config.layers()) {
    internal::Config args(l.args().begin(), l.args().end());
    layers.push_back(internal::layer_from_config(l.kind(), l.name(), args));
  }
  std::vector<std::shared_ptr<internal::Node>> nodes;
  std::vector<KerasTensor> inputs;
  for (const auto& in : config.inputs()) {
    nodes.push_back(internal::input_node({in.shape().begin(), in.shape().end()}, in.name(),
                                         parse_dtype(in.dtype())));
    inputs.emplace_back(nodes.back());
  }
  for (const auto& n : config.nodes()) {
    if (n.layer() < 0 || n.layer() >= static_cast<int>(layers.size())) {
      throw DataLossError(
          str_cat("load_model: ", path, ": a call of layer ", n.layer(), " of ", layers.size()));
    }
    std::vector<std::shared_ptr<internal::Node>> inbound;
    for (int id : n.inbound()) {
      if (id < 0 || id >= static_cast<int>(nodes.size())) {
        throw DataLossError(str_cat("load_model: ", path, ": node ", id, " is not defined yet"));
      }
      inbound.push_back(nodes[id]);
    }
    nodes.push_back(internal::call_layer(layers[n.layer()], std::move(inbound)));
  }
  if (config.output() < 0 || config.output() >= static_cast<int>(nodes.size())) {
    throw DataLossError(
        str_cat("load_model: ", path, ": output node ", config.output(), " is not defined"));
  }
  Model model(inputs, KerasTensor(nodes[config.output()]), config.name());
  model.state()->sequential = config.sequential();
  for (const auto& layer : layers) model.state()->stack.emplace_back(layer);
  if (config.has_compile()) {
    const proto::CompileConfig& c = config.compile();
    try {
      CompileOptions compile;
      compile.loss = losses::from_config(
          c.loss(), std::map<std::string, double>(c.loss_config().begin(), c.loss_config().end()));
      for (const auto& m : c.metrics()) compile.metrics.emplace_back(m);
      if (!c.optimizer().empty()) {
        nn::OptimizerConfig optimizer;
        optimizer.kind = c.optimizer();
        optimizer.numbers = {c.optimizer_numbers().begin(), c.optimizer_numbers().end()};
        compile.optimizer = nn::optimizer_from_config(optimizer);
      }
      compile.config.model_dir = options.model_dir;
      if (c.tf_random_seed() != 0) compile.config.tf_random_seed = c.tf_random_seed();
      model.compile(std::move(compile));
    } catch (const InvalidArgumentError& e) {
      LOG(WARNING) << "load_model: " << dir << " is loaded uncompiled (" << e.what()
                   << "); compile it with the same loss to train or evaluate";
      return model;
    }
    std::optional<std::string> saved = checkpoint::latest_checkpoint(dir);
    if (!saved) throw NotFoundError(str_cat("load_model: ", dir, " holds no checkpoint"));
    if (!checkpoint::latest_checkpoint(model.model_dir())) {
      place_checkpoint(*env, *saved, model.model_dir());
    }
    model.state()->weights_from_this_process = true;
  }
  return model;
}

}  // namespace cadre::keras
