#include "strategies/ps/ps_server.h"

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/variable_store.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/math.h"
#include "core/base/strings.h"
#include "core/nn/optimizer_config.h"
#include "strategies/ps/optimizer_proto.h"
#include "strategies/ps/ps.grpc.pb.h"
#include "strategies/ps/tensor_data.h"

namespace cadre::ps {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kGlobalStep[] = "global_step";

// Runs a handler, turning Cadre's errors into statuses with the same code.
template <typename F>
grpc::Status guarded(F&& handler) {
  try {
    handler();
    return grpc::Status::OK;
  } catch (const Error& e) {
    return {static_cast<grpc::StatusCode>(e.code()), e.what()};
  } catch (const std::exception& e) {
    return {grpc::StatusCode::INTERNAL, e.what()};
  }
}

std::string describe(DType dtype, const Shape& shape) {
  return str_cat(dtype_name(dtype), " ", shape);
}

// A variable (or slice) as this ps holds it.
struct Entry {
  VariableDef def;
  DType dtype = DType::kFloat32;
  Shape shape;
  std::shared_ptr<nn::Variable> variable;  // set once the chief has initialised it
  // Serialises updates and reads of the variable and its slots.
  std::mutex mutex;
  // Optimizers whose state (slots) the chief has sent for this variable. GUARDED_BY the
  // server's mutex_.
  std::set<std::string> optimizer_state;
};

struct OptimizerState {
  std::string config;  // serialised, to notice a changed configuration
  std::shared_ptr<nn::Optimizer> optimizer;
  int64_t iterations = 0;
};

class Server final : public ParameterServer, public ParameterServerService::Service {
 public:
  explicit Server(ServerOptions options) : options_(std::move(options)), store_(0) {}
  ~Server() override { stop(); }

  void start(const std::string& address) {
    grpc::ServerBuilder builder;
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    int limit = static_cast<int>(std::min<int64_t>(options_.max_message_bytes, INT32_MAX));
    builder.SetMaxReceiveMessageSize(limit);
    builder.SetMaxSendMessageSize(limit);
    int port = 0;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    if (!server_ || port == 0) {
      throw UnavailableError(str_cat(options_.task, ": the parameter server cannot listen on ",
                                     address,
                                     " (the port is in use, or the address is not this host's)"));
    }
    address_ = address.substr(0, address.rfind(':') + 1) + std::to_string(port);
    logger_ = std::thread([this] { log_progress(); });
    LOG(INFO) << options_.task << ": parameter server on " << address_;
  }

  std::string address() const override { return address_; }

  void wait() override {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return stopping_; });
  }

  void stop() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    changed_.notify_all();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    if (logger_.joinable()) logger_.join();
  }

  grpc::Status Create(grpc::ServerContext*, const CreateRequest* request,
                      CreateResponse* response) override {
    return guarded([&] {
      const VariableDef& def = request->variable();
      std::string what = str_cat(options_.task, ": variable '", def.name(), "'");
      if (def.name().empty())
        throw InvalidArgumentError(str_cat(options_.task, ": a variable without a name"));
      DType dtype = checked_dtype(def.dtype(), what);
      Shape shape = checked_shape(def.shape(), what);
      std::unique_lock<std::mutex> lock(mutex_);
      std::unique_ptr<Entry>& slot = entries_[def.name()];
      if (!slot) {
        slot = std::make_unique<Entry>();
        slot->def = def;
        slot->dtype = dtype;
        slot->shape = shape;
      } else if (slot->dtype != dtype || slot->shape != shape) {
        throw InvalidArgumentError(str_cat(what, " exists as ", describe(slot->dtype, slot->shape),
                                           "; a worker asked for it as ", describe(dtype, shape),
                                           " (do all workers run the same model_fn?)"));
      }
      Entry& entry = *slot;
      if (request->has_initial_value()) {
        Tensor value = from_proto(request->initial_value(), what);
        if (value.dtype() != entry.dtype || value.shape() != entry.shape) {
          throw InvalidArgumentError(
              str_cat(what, ": the initial value is ", describe(value.dtype(), value.shape()),
                      "; the variable is ", describe(entry.dtype, entry.shape)));
        }
        std::lock_guard<std::mutex> hold(entry.mutex);
        if (entry.variable) {
          entry.variable->assign(value);
        } else {
          nn::VariableSpec spec;
          spec.name = def.name();
          spec.shape = entry.shape;
          spec.dtype = entry.dtype;
          spec.trainable = def.trainable();
          entry.variable = std::make_shared<nn::Variable>(spec, value);
        }
        // The chief (again) owns the optimizer state: it sends it with its first push.
        entry.optimizer_state.clear();
        changed_.notify_all();
      } else {
        wait_for(
            lock, request->timeout_seconds(), [&] { return entry.variable != nullptr; },
            str_cat(what, ": the chief has not initialised it"));
      }
      lock.unlock();
      if (request->want_value()) {
        std::lock_guard<std::mutex> hold(entry.mutex);
        to_proto(entry.variable->tensor(), response->mutable_value());
      }
      check_size(*response, what);
    });
  }

  grpc::Status Pull(grpc::ServerContext*, const PullRequest* request,
                    PullResponse* response) override {
    return guarded([&] {
      ++pulls_;
      for (const PullItem& item : request->items()) {
        Entry& entry = initialised(item.name());
        std::string what = str_cat(options_.task, ": pull of '", item.name(), "'");
        Tensor ids;
        if (item.has_rows()) ids = row_ids(from_proto(item.rows(), what), entry, what);
        std::lock_guard<std::mutex> hold(entry.mutex);
        NoGradScope no_grad;
        const Tensor& value = entry.variable->tensor();
        to_proto(item.has_rows() ? gather(value, ids, 0) : value, response->add_values());
      }
      check_size(*response, str_cat(options_.task, ": the pulled values"));
    });
  }

  grpc::Status Push(grpc::ServerContext*, const PushRequest* request,
                    PushResponse* response) override {
    return guarded([&] { push(*request, response); });
  }

  grpc::Status GlobalStep(grpc::ServerContext*, const GlobalStepRequest* request,
                          GlobalStepResponse* response) override {
    return guarded([&] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (request->set()) {
        global_step_ = request->value();
        changed_.notify_all();
      } else {
        wait_for(
            lock, request->timeout_seconds(), [&] { return global_step_.has_value(); },
            str_cat(options_.task, ": the chief has not set the global step"));
      }
      response->set_value(*global_step_);
    });
  }

  grpc::Status Read(grpc::ServerContext*, const ReadRequest* request,
                    ReadResponse* response) override {
    return guarded([&] {
      if (request->names().empty()) {
        list(response);
        return;
      }
      for (const std::string& name : request->names()) read_one(name, response->add_variables());
      check_size(*response, str_cat(options_.task, ": the values read"));
    });
  }

 private:
  template <typename Pred>
  void wait_for(std::unique_lock<std::mutex>& lock, double timeout_seconds, Pred ready,
                const std::string& what) {
    if (timeout_seconds <= 0) timeout_seconds = 300;
    if (!changed_.wait_for(lock, std::chrono::duration<double>(timeout_seconds),
                           [&] { return ready() || stopping_; })) {
      throw DeadlineExceededError(
          str_cat(what, " within ", timeout_seconds, " s (is the chief running?)"));
    }
    if (stopping_) throw UnavailableError(str_cat(options_.task, " is shutting down"));
  }

  template <typename Message>
  void check_size(const Message& message, const std::string& what) const {
    int64_t bytes = static_cast<int64_t>(message.ByteSizeLong());
    if (bytes > options_.max_message_bytes) {
      throw ResourceExhaustedError(str_cat(
          what, " take ", bytes, " bytes, over the message limit of ", options_.max_message_bytes,
          " (ParameterServerOptions.max_message_bytes; partition large variables with "
          "smaller PlacementOptions.min_slice_bytes)"));
    }
  }

  Entry& initialised(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      throw NotFoundError(str_cat(options_.task, " holds no variable '", name,
                                  "' (do all workers run the same model_fn and placement?)"));
    }
    if (!it->second->variable) {
      throw FailedPreconditionError(
          str_cat(options_.task, ": variable '", name, "' is not initialised yet"));
    }
    return *it->second;
  }

  // `ids` as int64 row ids within the entry's rows; InvalidArgumentError naming a bad one.
  static Tensor row_ids(const Tensor& ids, const Entry& entry, const std::string& what) {
    if (ids.dtype() != DType::kInt64 || ids.rank() != 1) {
      throw InvalidArgumentError(
          str_cat(what, ": row ids must be int64 [n], got ", describe(ids.dtype(), ids.shape())));
    }
    int64_t rows = entry.shape.rank() == 0 ? 1 : entry.shape[0];
    const int64_t* p = ids.data<int64_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) {
      if (p[i] < 0 || p[i] >= rows) {
        throw InvalidArgumentError(str_cat(what, ": row ", p[i], " is outside [0, ", rows, ")"));
      }
    }
    return ids;
  }

  // The state of the optimizer a push describes, made when first seen or changed.
  OptimizerState& optimizer_for(const OptimizerSpec& spec) {  // EXCLUSIVE_LOCKS_REQUIRED(mutex_)
    // Keyed by the config in a canonical order: protobuf serialises maps in any order, and
    // workers must be recognised as using the same optimizer.
    nn::OptimizerConfig parsed = from_proto(spec);
    std::string config = parsed.kind;
    for (const auto& [key, value] : parsed.numbers) config += str_cat(";", key, "=", value);
    if (parsed.schedule) {
      config += str_cat(";schedule=", parsed.schedule->kind);
      for (const auto& [key, value] : parsed.schedule->numbers) {
        config += str_cat(";", key, "=", value);
      }
      for (const auto& [key, values] : parsed.schedule->lists) {
        config += str_cat(";", key, "=[", join(values), "]");
      }
    }
    if (auto known = names_.find(config); known != names_.end()) {
      return optimizers_.at(known->second);
    }
    std::shared_ptr<nn::Optimizer> made = nn::optimizer_from_config(parsed);
    OptimizerState& state = optimizers_[made->name()];
    names_[config] = made->name();
    state.config = config;
    state.optimizer = made;
    return state;
  }

  // The gradient of `entry` an item carries, checked against the variable.
  Gradient gradient_of(const PushItem& item, const Entry& entry) const {
    std::string what = str_cat(options_.task, ": the gradient for '", item.name(), "'");
    if (!item.sparse()) {
      Tensor dense = from_proto(item.dense(), what);
      if (dense.shape() != entry.shape || dense.dtype() != entry.dtype) {
        throw InvalidArgumentError(str_cat(what, " is ", describe(dense.dtype(), dense.shape()),
                                           "; the variable is ",
                                           describe(entry.dtype, entry.shape)));
      }
      return dense;
    }
    Tensor ids = row_ids(from_proto(item.indices(), what), entry, what);
    Tensor values = from_proto(item.values(), what);
    Shape expected =
        entry.shape.rank() == 0 ? Shape{ids.numel()} : entry.shape.with_dim(0, ids.numel());
    if (values.shape() != expected || values.dtype() != entry.dtype) {
      throw InvalidArgumentError(
          str_cat(what, " has rows ", describe(values.dtype(), values.shape()), " for ",
                  ids.numel(), " ids; the variable is ", describe(entry.dtype, entry.shape)));
    }
    return IndexedSlices{ids, values, entry.shape};
  }

  void push(const PushRequest& request, PushResponse* response) {
    ++pushes_;
    std::vector<Entry*> entries;
    std::vector<Gradient> gradients;
    std::shared_ptr<nn::Optimizer> optimizer;
    int64_t step = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      OptimizerState& state = optimizer_for(request.optimizer());
      const std::string name = state.optimizer->name();
      if (request.from_chief()) take_optimizer_state(request, name, state);
      if (request.max_staleness() > 0 && global_step_ &&
          *global_step_ - request.pulled_step() > request.max_staleness()) {
        ++dropped_;
        response->set_dropped(true);
        response->set_global_step(*global_step_);
        return;
      }
      std::set<std::string> seen;
      for (const PushItem& item : request.items()) {
        if (!seen.insert(item.name()).second) {
          throw InvalidArgumentError(
              str_cat(options_.task, ": a push names '", item.name(), "' twice"));
        }
        auto it = entries_.find(item.name());
        if (it == entries_.end() || !it->second->variable) {
          throw NotFoundError(str_cat(options_.task, " holds no initialised variable '",
                                      item.name(), "' to update"));
        }
        Entry* entry = it->second.get();
        wait_for(
            lock, request.timeout_seconds(), [&] { return entry->optimizer_state.count(name) > 0; },
            str_cat(options_.task, ": the ", name, " state of '", item.name(),
                    "' has not come from the chief"));
        entries.push_back(entry);
      }
      optimizer = state.optimizer;
      if (!request.items().empty()) step = ++state.iterations;
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      gradients.push_back(gradient_of(request.items(static_cast<int>(i)), *entries[i]));
    }
    if (!entries.empty()) apply(*optimizer, entries, gradients, step);
    for (const NamedTensor& delta : request.deltas()) add_delta(delta);
    if (request.increment_global_step()) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!global_step_) {
        throw FailedPreconditionError(str_cat(options_.task, " holds no global step yet"));
      }
      response->set_global_step(++*global_step_);
    }
  }

  // The chief's slots and step counter for the variables it names.
  void take_optimizer_state(const PushRequest& request, const std::string& optimizer,
                            OptimizerState& state) {  // EXCLUSIVE_LOCKS_REQUIRED(mutex_)
    for (const NamedTensor& slot : request.slots()) {
      auto owner = entries_.find(slot.slot_of());
      if (owner == entries_.end() || !owner->second->variable) {
        throw NotFoundError(str_cat(options_.task, ": slot '", slot.name(),
                                    "' belongs to an unknown variable '", slot.slot_of(), "'"));
      }
      Tensor value = from_proto(slot.value(), str_cat(options_.task, ": slot '", slot.name(), "'"));
      std::lock_guard<std::mutex> hold(owner->second->mutex);
      if (nn::Variable* existing = store_.find(slot.name())) {
        existing->assign(value);
        continue;
      }
      nn::VariableSpec spec;
      spec.name = slot.name();
      spec.shape = value.shape();
      spec.dtype = value.dtype();
      spec.trainable = false;
      spec.slot_of = slot.slot_of();
      store_.add(std::make_shared<nn::Variable>(spec, value));
    }
    for (const std::string& name : request.slots_for()) {
      auto it = entries_.find(name);
      if (it != entries_.end()) it->second->optimizer_state.insert(optimizer);
    }
    if (request.has_initial_iterations()) state.iterations = request.initial_iterations();
    changed_.notify_all();
  }

  // variable += delta, for a non-trainable variable.
  void add_delta(const NamedTensor& delta) {
    Entry& entry = initialised(delta.name());
    std::string what = str_cat(options_.task, ": the update of '", delta.name(), "'");
    if (entry.def.trainable()) {
      throw InvalidArgumentError(str_cat(what,
                                         " adds to a trainable variable; those take "
                                         "gradients through the optimizer"));
    }
    Tensor value = from_proto(delta.value(), what);
    if (value.shape() != entry.shape || value.dtype() != entry.dtype) {
      throw InvalidArgumentError(str_cat(what, " is ", describe(value.dtype(), value.shape()),
                                         "; the variable is ", describe(entry.dtype, entry.shape)));
    }
    std::lock_guard<std::mutex> hold(entry.mutex);
    NoGradScope no_grad;
    entry.variable->assign(entry.variable->tensor() + value);
  }

  // One update of the entries, each locked (in name order, so that pushes sharing
  // variables cannot deadlock) for the whole update.
  void apply(nn::Optimizer& optimizer, const std::vector<Entry*>& entries,
             const std::vector<Gradient>& gradients, int64_t step) {
    std::vector<size_t> order(entries.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return entries[a]->def.name() < entries[b]->def.name(); });
    std::vector<std::unique_lock<std::mutex>> locks;
    for (size_t i : order) locks.emplace_back(entries[i]->mutex);
    std::vector<nn::Variable*> variables;
    for (Entry* e : entries) variables.push_back(e->variable.get());
    nn::VariableStoreScope scope(store_);
    optimizer.apply_updates(gradients, variables, step);
  }

  void list(ReadResponse* response) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto add = [&](const std::string& name, DType dtype, const Shape& shape,
                   const std::string& slot_of) {
      NamedTensor* t = response->add_variables();
      t->set_name(name);
      t->set_slot_of(slot_of);
      t->mutable_value()->set_dtype(static_cast<int>(dtype));
      for (int64_t d : shape) t->mutable_value()->add_shape(d);
    };
    for (const auto& [name, entry] : entries_) {
      if (entry->variable) add(name, entry->dtype, entry->shape, "");
    }
    for (nn::Variable* slot : store_.variables()) {
      add(slot->name(), slot->dtype(), slot->shape(), slot->spec().slot_of);
    }
    for (const auto& [name, state] : optimizers_) {
      add(name + "/iterations", DType::kInt64, Shape{}, "");
    }
    if (global_step_) add(kGlobalStep, DType::kInt64, Shape{}, "");
  }

  void read_one(const std::string& name, NamedTensor* out) {
    out->set_name(name);
    std::unique_lock<std::mutex> lock(mutex_);
    if (name == kGlobalStep && global_step_) {
      to_proto(Tensor::scalar<int64_t>(*global_step_), out->mutable_value());
      return;
    }
    if (name.ends_with("/iterations")) {
      auto it = optimizers_.find(name.substr(0, name.size() - 11));
      if (it != optimizers_.end()) {
        to_proto(Tensor::scalar<int64_t>(it->second.iterations), out->mutable_value());
        return;
      }
    }
    if (auto it = entries_.find(name); it != entries_.end() && it->second->variable) {
      Entry& entry = *it->second;
      lock.unlock();
      std::lock_guard<std::mutex> hold(entry.mutex);
      to_proto(entry.variable->tensor(), out->mutable_value());
      return;
    }
    if (nn::Variable* slot = store_.find(name)) {
      Entry& owner = *entries_.at(slot->spec().slot_of);
      lock.unlock();
      std::lock_guard<std::mutex> hold(owner.mutex);
      out->set_slot_of(slot->spec().slot_of);
      to_proto(slot->tensor(), out->mutable_value());
      return;
    }
    throw NotFoundError(str_cat(options_.task, " holds nothing named '", name, "'"));
  }

  void log_progress() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!changed_.wait_for(lock, std::chrono::duration<double>(options_.log_every_seconds),
                              [&] { return stopping_; })) {
      int64_t bytes = 0;
      for (const auto& [name, entry] : entries_) {
        if (entry->variable) bytes += static_cast<int64_t>(entry->variable->tensor().nbytes());
      }
      LOG(INFO) << options_.task << ": serving " << entries_.size() << " variable(s) ("
                << bytes / 1024 << " KiB) and " << store_.variables().size()
                << " slot(s); global step "
                << (global_step_ ? std::to_string(*global_step_) : std::string("unset")) << "; "
                << pushes_.exchange(0) << " pushes, " << pulls_.exchange(0) << " pulls and "
                << dropped_.exchange(0) << " stale pushes dropped in the last "
                << options_.log_every_seconds << " s";
    }
  }

  ServerOptions options_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::thread logger_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;  // GUARDED_BY(mutex_)
  std::map<std::string, OptimizerState> optimizers_;       // GUARDED_BY(mutex_), by name
  std::map<std::string, std::string> names_;               // GUARDED_BY(mutex_), config -> name
  std::optional<int64_t> global_step_;                     // GUARDED_BY(mutex_)
  bool stopping_ = false;                                  // GUARDED_BY(mutex_)
  nn::VariableStore store_;  // the slots, which optimizers find by name
  std::atomic<int64_t> pushes_{0}, pulls_{0}, dropped_{0};
};

}  // namespace

std::unique_ptr<ParameterServer> ParameterServer::start(const std::string& address,
                                                        ServerOptions options) {
  auto server = std::make_unique<Server>(std::move(options));
  server->start(address);
  return server;
}

}  // namespace cadre::ps
