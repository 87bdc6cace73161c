// Kernels whose last launch outlasted the inline budget (device.cpp): their next launch shares its
// blocks from the start. Without it a kernel of few long blocks (block_dim = the cores, each block
// looping over its share, as NPU kernels are often written) would run its first block alone, and
// with two blocks all of them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "pypto_pro/abi.h"

namespace pypto_pro::runtime {

// A fixed open-addressed table keyed by the kernel's descriptor, lock-free and allocation-free (it is
// read on every launch). Every kernel's descriptor sits at the same offset of its own page-aligned
// .so, so the key is hashed from all its bits: a table indexed by its low bits put all of them in
// one slot, and two kernels launched in turn evicted each other and ran at one thread's speed.
// With more kernels than slots one may be forgotten: that costs speed, never a result.
class LongLaunches {
 public:
  bool Contains(const PtoKernelDesc* desc) const {
    for (size_t i = 0; i < kProbes; ++i) {
      const Entry& e = entries_[Slot(desc, i)];
      const PtoKernelDesc* key = e.desc.load(std::memory_order_acquire);
      if (key == desc) return e.long_launch.load(std::memory_order_relaxed);
      if (key == nullptr) return false;
    }
    return false;
  }

  void Note(const PtoKernelDesc* desc, bool long_launch) {
    for (size_t i = 0; i < kProbes; ++i) {
      Entry& e = entries_[Slot(desc, i)];
      const PtoKernelDesc* key = e.desc.load(std::memory_order_acquire);
      if (key == nullptr) {
        if (!long_launch) return;  // only long launches need an entry
        if (e.desc.compare_exchange_strong(key, desc, std::memory_order_acq_rel)) {
          e.long_launch.store(true, std::memory_order_relaxed);
          return;
        }
      }
      if (key == desc) {
        e.long_launch.store(long_launch, std::memory_order_relaxed);
        return;
      }
    }
    if (!long_launch) return;
    Entry& home = entries_[Slot(desc, 0)];  // every probe taken: the newest kernel wins its home slot
    home.long_launch.store(true, std::memory_order_relaxed);
    home.desc.store(desc, std::memory_order_release);
  }

  static constexpr size_t kSlots = 256;
  static constexpr size_t kProbes = 8;

 private:
  struct Entry {
    std::atomic<const PtoKernelDesc*> desc{nullptr};
    std::atomic<bool> long_launch{false};
  };

  static size_t Slot(const PtoKernelDesc* desc, size_t probe) {
    const uint64_t hash = uint64_t(reinterpret_cast<uintptr_t>(desc)) * 0x9E3779B97F4A7C15ull;  // Fibonacci
    return (size_t(hash >> 56) + probe) % kSlots;
  }

  Entry entries_[kSlots];
};

}  // namespace pypto_pro::runtime
