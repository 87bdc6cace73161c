// Profile mode in the runtime (docs/profiler.md): a launch of a profiling instance records each
// core's ops and synchronisation events (through the sanitizer's hooks, which check nothing then),
// and when its blocks are done the performance model turns them into a LaunchProfile, kept for
// pypto_pro.profiler. A plain launch's ProfileLaunch is inert.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pypto_pro/abi.h"
#include "pypto_pro/runtime/profile.h"

namespace pypto_pro::runtime {

class ProfileLaunch {
 public:
  ProfileLaunch(const PtoKernelDesc& desc, const void* args, uint32_t block_dim);
  ~ProfileLaunch();
  ProfileLaunch(const ProfileLaunch&) = delete;
  ProfileLaunch& operator=(const ProfileLaunch&) = delete;

  // The launch whose argument block is `args`, or nullptr.
  static ProfileLaunch* Find(const void* args);
  // Where core `slot` of block `block` records (each core writes only its own list).
  std::vector<ProfileEvent>* Events(int block, int slot);
  // After every block has run (and not faulted): the model, kept for the profiler.
  void Finish(bool faulted);
  // Events one core may record: the launch's budget shared by its cores (the rest are dropped and
  // the profile says it is truncated).
  size_t Cap() const { return cap_; }

 private:
  const PtoKernelDesc& desc_;
  const void* args_;
  bool active_ = false;
  size_t cap_ = 0;
  std::vector<std::vector<std::vector<ProfileEvent>>> blocks_;
};

// Events a launch records at most (about 80 MiB, and the model's ops handed to Python), shared by its
// cores, each allowed between 1024 and all of them.
inline constexpr size_t kMaxLaunchEvents = size_t(1) << 21;

}  // namespace pypto_pro::runtime
