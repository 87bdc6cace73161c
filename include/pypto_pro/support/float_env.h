// The device's floating-point environment: IEEE arithmetic with subnormals, round to nearest even,
// exceptions masked (the SSE control word's defaults), whatever the host process set. A library in the
// user's process may have switched subnormals off (torch.set_flush_denormal(True) sets the flush-to-
// zero and denormals-are-zero bits on its thread, and threads started from it inherit them): kernels
// and the compiler's constant folding would then silently flush what the device keeps.
#pragma once

namespace pypto_pro {

// Sets the device's environment for its scope and gives the thread its own back at the end.
class DeviceFloatEnvironment {
 public:
#if defined(__x86_64__) || defined(__i386__)
  DeviceFloatEnvironment() : saved_(__builtin_ia32_stmxcsr()) {
    if (saved_ != kIeee) __builtin_ia32_ldmxcsr(kIeee);
  }
  ~DeviceFloatEnvironment() {
    if (saved_ != kIeee) __builtin_ia32_ldmxcsr(saved_);
  }

 private:
  static constexpr unsigned kIeee = 0x1f80;  // every exception masked, nearest even, no FTZ / DAZ
  unsigned saved_;
#else
  DeviceFloatEnvironment() = default;
#endif
  DeviceFloatEnvironment(const DeviceFloatEnvironment&) = delete;
  DeviceFloatEnvironment& operator=(const DeviceFloatEnvironment&) = delete;
};

}  // namespace pypto_pro
