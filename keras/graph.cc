// Models as graphs of layer calls: symbolic tensors, building (naming the layers, checking
// every shape), and running the graph on a batch.
#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "cadre/base/errors.h"
#include "core/base/logging.h"
#include "core/base/strings.h"
#include "keras/model_state.h"

namespace cadre::keras {

using internal::Dims;
using internal::LayerImpl;
using internal::Node;

namespace internal {

std::shared_ptr<Node> input_node(Dims shape, std::string name, DType dtype) {
  for (int64_t d : shape) {
    if (d <= 0 && d != -1) {
      throw InvalidArgumentError(str_cat("Input: shape ", dims_string(shape),
                                         " must hold positive sizes (or -1 for unknown)"));
    }
  }
  auto node = std::make_shared<Node>();
  node->shape = {-1};
  node->shape.insert(node->shape.end(), shape.begin(), shape.end());
  node->input_name = std::move(name);
  node->dtype = dtype;
  return node;
}

namespace {
std::string source_of(const Node& node) {
  return node.layer ? node.layer->describe() : str_cat("input '", node.input_name, "'");
}
}  // namespace

std::shared_ptr<Node> call_layer(const std::shared_ptr<LayerImpl>& layer,
                                 std::vector<std::shared_ptr<Node>> inbound) {
  if (is_input_layer(*layer)) {
    throw InvalidArgumentError("an InputLayer can only be the first layer of a Sequential");
  }
  int arity = layer->arity();
  if ((arity > 0 && static_cast<int>(inbound.size()) != arity) ||
      (arity == 0 && inbound.size() < 2)) {
    throw InvalidArgumentError(str_cat(layer->describe(), " takes ",
                                       arity > 0 ? std::to_string(arity) : "2 or more",
                                       " input(s), got ", inbound.size()));
  }
  std::vector<Dims> shapes;
  std::vector<DType> dtypes;
  for (const auto& n : inbound) {
    shapes.push_back(n->shape);
    dtypes.push_back(n->dtype);
  }
  auto node = std::make_shared<Node>();
  node->layer = layer;
  try {
    node->shape = layer->output_shape(shapes);
    node->dtype = layer->output_dtype(dtypes);
  } catch (const InvalidArgumentError& e) {
    std::vector<std::string> sources;
    for (const auto& n : inbound) {
      sources.push_back(str_cat(source_of(*n), " with output shape ", dims_string(n->shape)));
    }
    throw InvalidArgumentError(str_cat(layer->describe(), " cannot take the output of ",
                                       join(sources, " and "), ": ", e.what()));
  }
  node->inbound = std::move(inbound);
  return node;
}

}  // namespace internal

namespace {

std::string snake_case(const std::string& kind) {
  std::string out;
  for (size_t i = 0; i < kind.size(); ++i) {
    char c = kind[i];
    if (std::isupper(static_cast<unsigned char>(c)) && i > 0 &&
        std::islower(static_cast<unsigned char>(kind[i - 1]))) {
      out += '_';
    }
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// Names the unnamed layers "dense", "dense_1", ... in model order, after checking that no
// two layers share a name (their variables would be one).
void assign_names(const std::vector<std::shared_ptr<LayerImpl>>& layers) {
  std::set<std::string> taken;
  for (const auto& layer : layers) {
    if (layer->name().empty()) continue;
    if (!taken.insert(layer->name()).second) {
      throw InvalidArgumentError(
          str_cat("two layers of the model are named '", layer->name(),
                  "'; layer names must be unique (they name the variables)"));
    }
  }
  std::map<std::string, int> next;
  for (const auto& layer : layers) {
    if (!layer->name().empty()) continue;
    std::string base = snake_case(layer->kind());
    std::string name;
    do {
      int n = next[base]++;
      name = n == 0 ? base : str_cat(base, "_", n);
    } while (taken.count(name));
    taken.insert(name);
    layer->set_name(name);
  }
}

void build_graph(Model::State& state, std::vector<std::shared_ptr<Node>> inputs,
                 std::shared_ptr<Node> output) {
  std::set<const Node*> input_set;
  for (const auto& in : inputs) {
    if (in->layer) {
      throw InvalidArgumentError(
          str_cat("a model input must come from Input(), not from ", in->layer->describe()));
    }
    input_set.insert(in.get());
  }
  std::vector<std::shared_ptr<Node>> order;
  std::set<const Node*> seen;
  std::function<void(const std::shared_ptr<Node>&)> visit = [&](const std::shared_ptr<Node>& n) {
    if (!seen.insert(n.get()).second) return;
    if (!n->layer) {
      if (!input_set.count(n.get())) {
        throw InvalidArgumentError(str_cat("the model's output depends on input '", n->input_name,
                                           "', which is not among the model's inputs"));
      }
      return;
    }
    for (const auto& in : n->inbound) visit(in);
    order.push_back(n);
  };
  visit(output);
  std::vector<std::shared_ptr<LayerImpl>> layers;
  for (const auto& n : order) {
    if (std::find(layers.begin(), layers.end(), n->layer) == layers.end())
      layers.push_back(n->layer);
  }
  assign_names(layers);
  state.inputs = std::move(inputs);
  state.order = std::move(order);
  state.output = std::move(output);
  state.layers = std::move(layers);
}

void build_sequential(Model::State& state) {
  if (!state.sequential_input) return;
  if (state.stack.empty()) return;
  std::vector<std::shared_ptr<LayerImpl>> impls;
  for (const Layer& l : state.stack) impls.push_back(l.impl());
  assign_names(impls);  // before the shape checks, so that their messages name the layers
  const auto& [shape, options] = *state.sequential_input;
  std::shared_ptr<Node> input = internal::input_node(shape, options.name, options.dtype);
  std::shared_ptr<Node> x = input;
  for (const auto& impl : impls) x = internal::call_layer(impl, {x});
  build_graph(state, {input}, x);
}

std::shared_ptr<Model::State> new_state(std::string name) {
  ensure_logging();  // a Keras program may log (compile, fit) before any Estimator exists
  auto state = std::make_shared<Model::State>();
  state->name = std::move(name);
  state->scope_strategy = current_strategy();
  return state;
}

}  // namespace

namespace internal {

void ensure_built(Model::State& state, const io::Dataset* dataset) {
  if (state.built()) return;
  if (state.stack.empty()) throw FailedPreconditionError("the Sequential model has no layers");
  if (!dataset) {
    throw FailedPreconditionError(str_cat("model '", state.name,
                                          "' is not built: start it with an InputLayer, call "
                                          "build(input_shape), or fit it on a Dataset first"));
  }
  io::Iterator it = dataset->make_iterator();
  std::optional<io::Element> first = it.next();
  if (!first || first->features.empty()) {
    throw InvalidArgumentError("cannot build the model from an empty Dataset");
  }
  if (first->features.size() != 1) {
    throw InvalidArgumentError(str_cat("the Dataset has ", first->features.size(),
                                       " features; build the Sequential for one of them with "
                                       "build(shape, {.name = ...})"));
  }
  const auto& [feature, tensor] = *first->features.begin();
  if (tensor.rank() < 1) throw InvalidArgumentError("the Dataset's elements are not batches");
  Dims shape(tensor.shape().begin() + 1, tensor.shape().end());
  state.sequential_input = std::make_pair(shape, InputOptions{feature, tensor.dtype()});
  build_sequential(state);
}

Tensor forward(const Model::State& state, const io::Features& features, bool training,
               Tensor* logits) {
  std::map<const Node*, Tensor> values;
  for (const auto& in : state.inputs) {
    const Tensor* value = features.find(in->input_name);
    if (value == nullptr) {
      if (state.inputs.size() == 1 && features.size() == 1) {
        value = &features.begin()->second;
      } else {
        std::vector<std::string> names;
        for (const auto& [name, t] : features) names.push_back(name);
        throw InvalidArgumentError(str_cat("model input '", in->input_name,
                                           "' is not among the batch's features: ", join(names)));
      }
    }
    values[in.get()] = *value;
  }
  Tensor result;
  for (const auto& node : state.order) {
    std::vector<Tensor> args;
    for (const auto& in : node->inbound) args.push_back(values.at(in.get()));
    Tensor* node_logits = node == state.output ? logits : nullptr;
    values[node.get()] = node->layer->call(args, training, node_logits);
  }
  return values.at(state.output.get());
}

}  // namespace internal

// --- the public handles ---

KerasTensor::KerasTensor(std::shared_ptr<Node> node) : node_(std::move(node)) {}
const std::vector<int64_t>& KerasTensor::shape() const { return node_->shape; }
DType KerasTensor::dtype() const { return node_->dtype; }
std::string KerasTensor::name() const {
  return node_->layer ? node_->layer->name() : node_->input_name;
}

KerasTensor Input(std::vector<int64_t> shape, InputOptions options) {
  return KerasTensor(internal::input_node(std::move(shape), options.name, options.dtype));
}

Layer::Layer(std::shared_ptr<LayerImpl> impl) : impl_(std::move(impl)) {}
const std::string& Layer::name() const { return impl_->name(); }
const std::string& Layer::kind() const { return impl_->kind(); }
KerasTensor Layer::operator()(const KerasTensor& input) const {
  return KerasTensor(internal::call_layer(impl_, {input.node()}));
}
KerasTensor Layer::operator()(const std::vector<KerasTensor>& inputs) const {
  std::vector<std::shared_ptr<Node>> nodes;
  for (const auto& t : inputs) nodes.push_back(t.node());
  return KerasTensor(internal::call_layer(impl_, std::move(nodes)));
}

Model::Model(std::shared_ptr<State> state) : state_(std::move(state)) {}
Model::Model(KerasTensor input, KerasTensor output, std::string name)
    : Model(std::vector<KerasTensor>{std::move(input)}, std::move(output), std::move(name)) {}
Model::Model(std::vector<KerasTensor> inputs, KerasTensor output, std::string name)
    : state_(new_state(std::move(name))) {
  if (inputs.empty()) throw InvalidArgumentError("a Model needs at least one input");
  std::vector<std::shared_ptr<Node>> nodes;
  for (const auto& t : inputs) nodes.push_back(t.node());
  build_graph(*state_, std::move(nodes), output.node());
}
Model::~Model() = default;

const std::string& Model::name() const { return state_->name; }
bool Model::built() const { return state_->built(); }

std::vector<Layer> Model::layers() const {
  std::vector<Layer> out;
  if (!state_->built()) return state_->stack;
  for (const auto& impl : state_->layers) out.emplace_back(impl);
  return out;
}

Layer Model::get_layer(const std::string& name) const {
  std::vector<std::string> names;
  for (const Layer& l : layers()) {
    if (l.name() == name) return l;
    names.push_back(l.name());
  }
  throw NotFoundError(
      str_cat("model '", state_->name, "' has no layer '", name, "'; its layers: ", join(names)));
}

Sequential::Sequential(std::vector<Layer> layers, std::string name)
    : Model(new_state(std::move(name))) {
  state_->sequential = true;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (internal::is_input_layer(*layers[i].impl())) {
      if (i != 0) {
        throw InvalidArgumentError("an InputLayer can only be the first layer of a Sequential");
      }
      state_->sequential_input = internal::input_layer_spec(*layers[i].impl());
      internal::input_node(state_->sequential_input->first, "", DType::kFloat32);  // checks
      continue;
    }
    state_->stack.push_back(layers[i]);
  }
  build_sequential(*state_);
}

namespace {

// Runs `change` on a Sequential's state; when it throws, puts back its layers, its graph and
// the names of `layers` (those of the stack and any being added), so that a refused layer is
// neither in the model nor named by it.
template <typename Change>
void change_or_restore(Model::State& s, const std::vector<Layer>& layers, Change change) {
  std::vector<std::string> names;
  for (const Layer& l : layers) names.push_back(l.name());
  auto stack = s.stack;
  auto sequential_input = s.sequential_input;
  auto inputs = s.inputs;
  auto order = s.order;
  auto output = s.output;
  auto built_layers = s.layers;
  try {
    change();
  } catch (...) {
    for (size_t i = 0; i < layers.size(); ++i) layers[i].impl()->set_name(names[i]);
    s.stack = std::move(stack);
    s.sequential_input = std::move(sequential_input);
    s.inputs = std::move(inputs);
    s.order = std::move(order);
    s.output = std::move(output);
    s.layers = std::move(built_layers);
    throw;
  }
}

}  // namespace

void Sequential::add(Layer layer) {
  if (internal::is_input_layer(*layer.impl())) {
    if (!state_->stack.empty() || state_->sequential_input) {
      throw InvalidArgumentError("an InputLayer can only be the first layer of a Sequential");
    }
    state_->sequential_input = internal::input_layer_spec(*layer.impl());
    return;
  }
  if (state_->compiled) {
    throw FailedPreconditionError("add: the model is compiled; add layers before compile");
  }
  std::vector<Layer> touched = state_->stack;
  touched.push_back(layer);
  change_or_restore(*state_, touched, [&] {
    state_->stack.push_back(layer);
    if (state_->sequential_input) {
      state_->output = nullptr;
      build_sequential(*state_);
    }
  });
}

void Sequential::build(std::vector<int64_t> input_shape, InputOptions options) {
  change_or_restore(*state_, state_->stack, [&] {
    state_->sequential_input = std::make_pair(Dims(input_shape), options);
    state_->output = nullptr;
    build_sequential(*state_);
  });
}

}  // namespace cadre::keras
