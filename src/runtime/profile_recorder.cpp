#include "profile_recorder.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>

#include "pypto_pro/support/arch.h"

namespace pypto_pro::runtime {

namespace {

std::atomic<bool> g_profiling{false};

std::mutex& Mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::vector<ProfileLaunch*>& Running() {
  static auto* running = new std::vector<ProfileLaunch*>();
  return *running;
}
std::vector<ProfileRecord>& Done() {
  static auto* done = new std::vector<ProfileRecord>();
  return *done;
}

BlockShape ShapeOf(const PtoKernelDesc& desc) {
  if (desc.kind == PTO_KERNEL_MIXED) return BlockShape::kMixed;
  return desc.kind == PTO_KERNEL_CUBE ? BlockShape::kCube : BlockShape::kVector;
}

}  // namespace

ProfileLaunch::ProfileLaunch(const PtoKernelDesc& desc, const void* args, uint32_t block_dim)
    : desc_(desc), args_(args), active_((desc.flags & PTO_KERNEL_FLAG_PROFILE) != 0) {
  if (!active_) return;
  const size_t slots = ShapeOf(desc) == BlockShape::kMixed ? 3 : 1;
  blocks_.assign(std::max<uint32_t>(block_dim, 1), std::vector<std::vector<ProfileEvent>>(slots));
  cap_ = std::max(kMaxLaunchEvents / (blocks_.size() * slots), size_t(1024));
  std::lock_guard<std::mutex> lock(Mutex());
  Running().push_back(this);
}

ProfileLaunch::~ProfileLaunch() {
  if (!active_) return;
  std::lock_guard<std::mutex> lock(Mutex());
  auto& running = Running();
  running.erase(std::remove(running.begin(), running.end(), this), running.end());
}

ProfileLaunch* ProfileLaunch::Find(const void* args) {
  std::lock_guard<std::mutex> lock(Mutex());
  for (ProfileLaunch* l : Running()) {
    if (l->args_ == args) return l;
  }
  return nullptr;
}

std::vector<ProfileEvent>* ProfileLaunch::Events(int block, int slot) {
  if (block < 0 || size_t(block) >= blocks_.size() || slot < 0 || size_t(slot) >= blocks_[size_t(block)].size()) {
    return nullptr;
  }
  return &blocks_[size_t(block)][size_t(slot)];
}

void ProfileLaunch::Finish(bool faulted) {
  if (!active_ || faulted) return;  // a faulted launch raises; its partial program models nothing useful
  const ArchModel* arch = FindArch(desc_.arch ? desc_.arch : "");
  ProfileRecord record;
  record.kernel = desc_.name ? desc_.name : "?";
  for (int i = 0; i < desc_.source_file_count; ++i) record.source_files.emplace_back(desc_.source_files[i]);
  record.profile = ModelLaunch(arch ? *arch : DefaultArch(), ShapeOf(desc_), blocks_, record.source_files);
  for (const auto& block : blocks_) {
    for (const auto& core : block) record.profile.truncated |= core.size() >= cap_;
  }
  std::lock_guard<std::mutex> lock(Mutex());
  Done().push_back(std::move(record));
}

void SetProfiling(bool on) { g_profiling.store(on, std::memory_order_release); }
bool Profiling() { return g_profiling.load(std::memory_order_acquire); }

std::vector<ProfileRecord> TakeProfiles() {
  std::lock_guard<std::mutex> lock(Mutex());
  std::vector<ProfileRecord> out;
  out.swap(Done());
  return out;
}

}  // namespace pypto_pro::runtime
