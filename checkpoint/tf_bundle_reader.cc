#include <cstdio>
#include <cstring>

#include "cadre/base/errors.h"
#include "checkpoint/proto/tensor_bundle.pb.h"
#include "checkpoint/tf_bundle.h"
#include "checkpoint/tf_dtypes.h"
#include "checkpoint/tf_names.h"
#include "checkpoint/tf_table.h"
#include "core/base/crc32c.h"
#include "core/base/strings.h"

namespace cadre::checkpoint::internal {
namespace {

std::string as_hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

}  // namespace

std::optional<std::string> tf_bundle_prefix(Env& env, const std::string& path) {
  if (path.ends_with(".index") && env.file_exists(path)) {
    return path.substr(0, path.size() - std::string_view(".index").size());
  }
  if (!path.empty() && env.file_exists(path + ".index")) return path;
  return std::nullopt;
}

TfBundleIndex parse_tf_bundle_index(std::string_view bytes, const std::string& file) {
  TableEntries table = read_table(bytes, file);
  if (table.empty() || !table.front().first.empty()) {
    throw DataLossError(str_cat(file, ": no bundle header (the entry under the empty key)"));
  }
  proto::bundle::BundleHeaderProto header;
  if (!header.ParseFromString(table.front().second) || header.num_shards() < 1 ||
      header.num_shards() > 99999) {
    throw DataLossError(str_cat(file, ": a damaged bundle header"));
  }
  if (header.endianness() != proto::bundle::BundleHeaderProto::LITTLE) {
    throw UnimplementedError(str_cat(file, ": a big-endian bundle"));
  }
  TfBundleIndex index;
  index.num_shards = header.num_shards();
  for (size_t i = 1; i < table.size(); ++i) {
    const auto& [name, value] = table[i];
    proto::bundle::BundleEntryProto entry;
    if (!entry.ParseFromString(value)) {
      throw DataLossError(str_cat(file, ": the entry of '", name, "' does not parse"));
    }
    std::optional<DType> dtype = dtype_from_tf(entry.dtype());
    // Keys of partitioned variables' slices begin with a zero byte; the variable's own entry
    // lists the slices.
    if (name.front() == '\0' || !dtype || entry.slices_size() > 0 || entry.shape().unknown_rank()) {
      ++index.skipped;
      continue;
    }
    TfBundleEntry e;
    e.info.dtype = *dtype;
    std::vector<int64_t> dims;
    int64_t elements = 1;
    for (const auto& dim : entry.shape().dim()) {
      if (dim.size() < 0 || (dim.size() > 0 && elements > (int64_t{1} << 50) / dim.size())) {
        throw DataLossError(str_cat(file, ": '", name, "' has a dimension of ", dim.size()));
      }
      dims.push_back(dim.size());
      elements *= dim.size();
    }
    e.info.shape = Shape(dims);
    e.shard = entry.shard_id();
    e.offset = static_cast<uint64_t>(entry.offset());
    e.size = static_cast<uint64_t>(entry.size());
    e.masked_crc = entry.crc32c();
    if (e.shard < 0 || e.shard >= index.num_shards || entry.offset() < 0 ||
        e.size != static_cast<uint64_t>(elements) * dtype_size(*dtype)) {
      throw DataLossError(str_cat(file, ": the entry of '", name, "' (", e.info.dtype, " ",
                                  e.info.shape, ", ", e.size, " bytes in shard ", e.shard,
                                  ") does not add up"));
    }
    index.entries.emplace(name, std::move(e));
  }
  return index;
}

TfBundleReader::TfBundleReader(std::shared_ptr<Env> env_in, const std::string& prefix)
    : env_(std::move(env_in)), prefix_(prefix) {
  Env& env = *env_;
  const std::string index_file = prefix + ".index";
  if (!env.file_exists(index_file)) {
    throw NotFoundError(str_cat("TensorFlow checkpoint ", index_file, " does not exist"));
  }
  index_ = parse_tf_bundle_index(env.read_file(index_file), index_file);
  std::map<std::string, VariableInfo> as_stored;
  for (const auto& [name, entry] : index_.entries) as_stored[name] = entry.info;
  for (const auto& [name, info] : as_stored) {
    if (name == "global_step") continue;  // global_step(), as a Cadre checkpoint has it
    std::optional<CadreName> ours = cadre_name(name, as_stored);
    VariableInfo logical = info;
    if (ours) {
      logical.slot_of = ours->slot_of;
      logical.stored_name = name;
    }
    std::string logical_name = ours ? ours->name : name;
    if (!variables_.emplace(logical_name, logical).second) {
      throw DataLossError(
          str_cat(index_file, ": both ", name, " and another tensor are '", logical_name, "'"));
    }
  }
  for (int shard = 0; shard < index_.num_shards; ++shard) {
    if (!env.file_exists(data_file(shard))) {
      throw DataLossError(str_cat(index_file, ": its data file ", data_file(shard), " is missing"));
    }
    shards_.push_back(env.new_random_access_file(data_file(shard)));
  }
  if (auto step = index_.entries.find("global_step"); step != index_.entries.end()) {
    Tensor value = load(step->first, step->second, /*verify=*/true);
    if (value.numel() == 1) global_step_ = value.cast(DType::kInt64).item<int64_t>();
  }
}

TfBundleReader::~TfBundleReader() = default;

std::string TfBundleReader::data_file(int shard) const {
  char suffix[40];
  std::snprintf(suffix, sizeof(suffix), ".data-%05d-of-%05d", shard, index_.num_shards);
  return prefix_ + suffix;
}

Tensor TfBundleReader::load(const std::string& name, const TfBundleEntry& entry,
                            bool verify) const {
  const std::string file = data_file(entry.shard);
  const RandomAccessFile& shard = *shards_[static_cast<size_t>(entry.shard)];
  Tensor value = Tensor::empty(entry.info.shape, entry.info.dtype, Device::cpu());
  char* target = static_cast<char*>(value.raw_data());
  std::string_view got = shard.read(entry.offset, entry.size, target);
  if (got.size() != entry.size) {
    throw DataLossError(str_cat(file, ": tensor '", name, "' needs ", entry.size,
                                " bytes at offset ", entry.offset, "; the file ends after ",
                                got.size(), " of them (truncated)"));
  }
  if (got.data() != target) std::memcpy(target, got.data(), got.size());
  if (verify) {
    uint32_t computed = mask_crc(crc32c::value(target, entry.size));
    if (computed != entry.masked_crc) {
      throw DataLossError(str_cat(file, ": tensor '", name, "' fails its checksum (stored ",
                                  as_hex(entry.masked_crc), ", computed ", as_hex(computed),
                                  "): the file is damaged"));
    }
  }
  return value;
}

void TfBundleReader::read(const std::string& name,
                          const std::vector<std::pair<int64_t, Tensor>>& pieces,
                          bool verify) const {
  const VariableInfo& info = variables_.at(name);
  const std::string& stored = info.stored_name.empty() ? name : info.stored_name;
  const TfBundleEntry& entry = index_.entries.at(stored);
  Tensor value = load(stored, entry, verify);
  for (const auto& [first_row, piece] : pieces) {
    Tensor target = piece;
    if (piece.rank() == 0) {
      target.assign(value);
    } else {
      target.assign(value.slice(0, first_row, first_row + piece.shape()[0]));
    }
  }
}

std::vector<DatasetProblem> TfBundleReader::verify() const {
  std::vector<DatasetProblem> problems;
  for (const auto& [name, entry] : index_.entries) {
    try {
      load(name, entry, /*verify=*/true);
    } catch (const Error& error) {
      problems.push_back({name, error.what()});
    }
  }
  return problems;
}

uint64_t TfBundleReader::bytes() const {
  uint64_t total = env_->file_size(prefix_ + ".index");
  for (int shard = 0; shard < index_.num_shards; ++shard) {
    if (env_->file_exists(data_file(shard))) total += env_->file_size(data_file(shard));
  }
  return total;
}

}  // namespace cadre::checkpoint::internal
