#include "cadre/tensor/device.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>

#include "cadre/base/errors.h"
#include "cadre/runtime/threading.h"
#include "core/base/strings.h"
#include "core/tensor/device_backend.h"

namespace cadre {
namespace {

std::atomic<int>& cpu_device_count() {
  static std::atomic<int> count{std::max(4, hardware_threads())};
  return count;
}

thread_local Device current_default = Device::cpu(0);

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

[[noreturn]] void throw_unknown(std::string_view text, std::string_view why) {
  std::vector<std::string> names;
  for (const Device& d : available_devices()) names.push_back(d.to_string());
  throw InvalidArgumentError(
      str_cat("unknown device '", text, "': ", why, "; available devices: ", join(names)));
}

}  // namespace

std::string Device::to_string() const {
  return str_cat(type == DeviceType::kCPU ? "cpu:" : "gpu:", index);
}

std::ostream& operator<<(std::ostream& out, const Device& device) {
  return out << device.to_string();
}

int num_gpus() {
  DeviceBackend* backend = device_backend(DeviceType::kGPU);
  return backend == nullptr ? 0 : backend->device_count();
}

int num_cpu_devices() { return cpu_device_count().load(std::memory_order_relaxed); }

void set_num_cpu_devices(int count) {
  if (count < 1) {
    throw InvalidArgumentError(str_cat("set_num_cpu_devices: need at least 1, got ", count));
  }
  cpu_device_count().store(count, std::memory_order_relaxed);
}

std::vector<Device> available_devices() {
  std::vector<Device> devices;
  for (int i = 0; i < num_cpu_devices(); ++i) devices.push_back(Device::cpu(i));
  for (int i = 0, n = num_gpus(); i < n; ++i) devices.push_back(Device::gpu(i));
  return devices;
}

void check_device(const Device& device) {
  if (device.index < 0) throw_unknown(device.to_string(), "negative index");
  if (device.is_cpu()) {
    if (device.index >= num_cpu_devices()) {
      throw_unknown(device.to_string(),
                    str_cat("this process has ", num_cpu_devices(), " logical CPU devices"));
    }
    return;
  }
  if (device_backend(DeviceType::kGPU) == nullptr) {
    throw_unknown(device.to_string(), "Cadre was built without CUDA");
  }
  int gpus = num_gpus();
  if (device.index >= gpus) {
    std::string reason = device_backend(DeviceType::kGPU)->unavailable_reason();
    throw_unknown(device.to_string(),
                  gpus == 0 && !reason.empty()
                      ? str_cat("this machine has no usable GPU (", reason, ")")
                      : str_cat("this machine has ", gpus, gpus == 1 ? " GPU" : " GPUs"));
  }
}

Device parse_device(std::string_view text) {
  std::string s = lower(text);
  // Keep only what follows the last "device:" of a TensorFlow-style full name.
  if (auto pos = s.rfind("device:"); pos != std::string::npos) s = s.substr(pos + 7);
  auto colon = s.find(':');
  if (colon == std::string::npos) throw_unknown(text, "expected TYPE:INDEX such as cpu:0");
  std::string type = s.substr(0, colon);
  std::string_view number = std::string_view(s).substr(colon + 1);
  int index = -1;
  auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), index);
  if (error != std::errc() || end != number.data() + number.size() || number.empty()) {
    throw_unknown(text, "the index is not a number");
  }
  Device device;
  if (type == "cpu") {
    device = Device::cpu(index);
  } else if (type == "gpu" || type == "cuda") {
    device = Device::gpu(index);
  } else {
    throw_unknown(text, "the type must be cpu or gpu");
  }
  check_device(device);
  return device;
}

Device default_device() { return current_default; }

DeviceScope::DeviceScope(Device device) : previous_(current_default) {
  check_device(device);
  current_default = device;
}

DeviceScope::~DeviceScope() { current_default = previous_; }

}  // namespace cadre
