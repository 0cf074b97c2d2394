// Per-device dispatch of kernels.
//
// Each kernel is a KernelSlot: a named table with one function per device type. Op
// definitions (core/ops) check arguments, allocate outputs and call the slot with the
// device of their inputs through call(), which times the kernel under the slot's name while
// a profiler session records (cadre/runtime/profiler.h); backends fill the slots when they
// register (the CPU backend always; the CUDA backend when built). A new backend plugs in by
// filling slots: op definitions do not change.
#pragma once

#include <array>
#include <string_view>
#include <utility>

#include "cadre/base/errors.h"
#include "cadre/runtime/profiler.h"
#include "cadre/tensor/device.h"

namespace cadre::kernels {

// Registers every built backend once per process; cheap after the first call. Defined by the
// backends (core/backend/backends.cc), which this interface does not name: the tables are
// declared here, and the backends fill them.
void ensure_backends_registered();
[[noreturn]] void throw_missing_kernel(std::string_view kernel, Device device);

template <typename Fn>
class KernelSlot {
 public:
  explicit constexpr KernelSlot(std::string_view name) : name_(name) {}
  KernelSlot(const KernelSlot&) = delete;
  KernelSlot& operator=(const KernelSlot&) = delete;

  void set(DeviceType type, Fn* fn) { fns_[static_cast<int>(type)] = fn; }
  // The implementation for `device`; throws UnimplementedError naming the kernel and the
  // device when the device's backend has none.
  Fn* get(Device device) const {
    ensure_backends_registered();
    Fn* fn = fns_[static_cast<int>(device.type)];
    if (fn == nullptr) throw_missing_kernel(name_, device);
    return fn;
  }
  // Whether `device`'s backend fills this slot.
  bool has(Device device) const {
    ensure_backends_registered();
    return fns_[static_cast<int>(device.type)] != nullptr;
  }
  // Runs the implementation for `device` on `args`: get(device)(args...), as one profiler
  // event named after the slot (category "op") while a session records. A GPU kernel's
  // event covers its launch, not its run on the device.
  template <typename... Args>
  decltype(auto) call(Device device, Args&&... args) const {
    Fn* fn = get(device);
    profiler::Scope scope(name_, profiler::kOp);
    return fn(std::forward<Args>(args)...);
  }
  std::string_view name() const { return name_; }

 private:
  std::string_view name_;
  std::array<Fn*, kNumDeviceTypes> fns_{};
};

}  // namespace cadre::kernels
