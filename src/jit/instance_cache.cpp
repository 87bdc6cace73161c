#include "pypto_pro/jit/instance_cache.h"

#include "pypto_pro/support/fork.h"

namespace pypto_pro::jit {

Instance* InstanceCache::Lookup(const SignatureKey& key) {
  if (single_) {
    ++hits_;
    return single_;
  }
  auto it = instances_.find(key);
  if (it == instances_.end()) return nullptr;
  ++hits_;
  return it->second.get();
}

std::shared_ptr<std::timed_mutex> InstanceCache::CompileLock(const SignatureKey& key) {
  Lock& slot = compiling_[key];
  if (!slot.mutex || slot.generation != ForkGeneration()) {
    slot.mutex = std::make_shared<std::timed_mutex>();
    slot.generation = ForkGeneration();
  }
  return slot.mutex;
}

void InstanceCache::Insert(const SignatureKey& key, std::shared_ptr<Instance> inst) {
  ++compiles_;
  order_.push_back(inst);
  if (key.count == 0) single_ = inst.get();
  instances_.emplace(key, std::move(inst));
  compiling_.erase(key);
}

void InstanceCache::Clear() {
  instances_.clear();
  order_.clear();
  single_ = nullptr;
}

}  // namespace pypto_pro::jit
