#include <algorithm>

#include "cadre/base/errors.h"
#include "checkpoint/proto/tensor_bundle.pb.h"
#include "checkpoint/tf_bundle.h"
#include "checkpoint/tf_dtypes.h"
#include "checkpoint/tf_names.h"
#include "checkpoint/tf_table.h"
#include "core/base/crc32c.h"
#include "core/base/strings.h"

namespace cadre::checkpoint::internal {

void write_tf_bundle(Env& env, const std::string& prefix,
                     const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::vector<const std::pair<std::string, Tensor>*> sorted;
  for (const auto& named : tensors) {
    if (named.first.empty()) {
      throw InvalidArgumentError("a TensorFlow checkpoint cannot hold a tensor without a name");
    }
    sorted.push_back(&named);
  }
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  std::string data;
  TableEntries index;
  proto::bundle::BundleHeaderProto header;
  header.set_num_shards(1);
  header.mutable_version()->set_producer(1);
  index.emplace_back("", header.SerializeAsString());
  for (const auto* named : sorted) {
    const auto& [name, tensor] = *named;
    if (!index.empty() && index.back().first == name) {
      throw InvalidArgumentError(str_cat("two tensors named '", name, "'"));
    }
    Tensor host = tensor.to(Device::cpu()).contiguous();
    const size_t size = static_cast<size_t>(host.numel()) * dtype_size(host.dtype());
    proto::bundle::BundleEntryProto entry;
    entry.set_dtype(tf_dtype(host.dtype()));
    for (int64_t dim : host.shape()) entry.mutable_shape()->add_dim()->set_size(dim);
    entry.set_offset(static_cast<int64_t>(data.size()));
    entry.set_size(static_cast<int64_t>(size));
    entry.set_crc32c(mask_crc(crc32c::value(host.raw_data(), size)));
    data.append(static_cast<const char*>(host.raw_data()), size);
    index.emplace_back(name, entry.SerializeAsString());
  }
  if (size_t slash = prefix.rfind('/'); slash != std::string::npos && slash > 0) {
    env.create_dir(prefix.substr(0, slash));
  }
  write_file_atomically(env, prefix + ".data-00000-of-00001", data);
  write_file_atomically(env, prefix + ".index", build_table(index));
}

size_t write_as_tf_bundle(const CheckpointReader& checkpoint, Env& env, const std::string& prefix) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  bool has_step = false;
  for (const auto& [name, info] : checkpoint.variables()) {
    std::string tf = info.stored_name.empty() ? tf_name(name, info) : info.stored_name;
    has_step = has_step || tf == "global_step";
    tensors.emplace_back(tf, checkpoint.read(name));
  }
  if (!has_step) {
    tensors.emplace_back(
        "global_step",
        Tensor::from_vector(std::vector<int64_t>{checkpoint.global_step()}).reshape({}));
  }
  write_tf_bundle(env, prefix, tensors);
  return tensors.size();
}

}  // namespace cadre::checkpoint::internal
