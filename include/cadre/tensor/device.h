// Devices a tensor can live on: logical CPU devices `cpu:N` (all sharing host memory, so
// that multi-replica strategies run on CPU-only machines, one thread per replica) and
// `gpu:N` when Cadre is built with CUDA and the machine has GPUs.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace cadre {

enum class DeviceType : uint8_t { kCPU = 0, kGPU = 1 };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device cpu(int index = 0) { return {DeviceType::kCPU, index}; }
  static Device gpu(int index = 0) { return {DeviceType::kGPU, index}; }
  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_gpu() const { return type == DeviceType::kGPU; }
  std::string to_string() const;  // "cpu:0", "gpu:1"
  bool operator==(const Device&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Device& device);

// Parses "cpu:0", "gpu:1", "/device:CPU:0" or "/job:worker/replica:0/task:1/device:GPU:0"
// (the task part is ignored) and checks that the device exists here. Throws
// InvalidArgumentError naming the text and listing the available devices otherwise.
Device parse_device(std::string_view text);
// Throws InvalidArgumentError listing the available devices when `device` does not exist.
void check_device(const Device& device);
// cpu:0 .. cpu:(num_cpu_devices()-1), then gpu:0 .. gpu:(num_gpus()-1).
std::vector<Device> available_devices();
int num_gpus();

// Logical CPU devices. The default is max(4, cores), enough for the usual multi-replica
// tests; set_num_cpu_devices changes it for the process (before devices are used).
int num_cpu_devices();
void set_num_cpu_devices(int count);

// The device that creation ops (zeros, random, ...) use when none is named: cpu:0 unless
// a DeviceScope on this thread says otherwise.
Device default_device();

// Makes `device` the default device of the calling thread for the scope's lifetime.
class DeviceScope {
 public:
  explicit DeviceScope(Device device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  Device previous_;
};

}  // namespace cadre
