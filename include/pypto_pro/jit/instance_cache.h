// The compiled instances of one kernel object, by compile-signature key: lookups count hits, each
// signature compiles once even when threads race for it (different signatures compile in
// parallel), and a changed global or closure variable drops them all. Callers serialise access to
// the map itself (the Python layer holds the GIL); only the per-signature compile locks are waited
// on without it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "pypto_pro/jit/instance.h"
#include "pypto_pro/jit/signature.h"

namespace pypto_pro::jit {

class InstanceCache {
 public:
  // The instance of `key`, or nullptr; a hit is counted.
  Instance* Lookup(const SignatureKey& key);

  // The lock every compile of `key` holds, so one compiles and the others find its instance; a
  // lock made before a fork() (possibly held by a thread the child does not have) is replaced.
  std::shared_ptr<std::timed_mutex> CompileLock(const SignatureKey& key);

  // A compile of `key` is starting (its lock is held and Lookup found nothing).
  void CountMiss() { ++misses_; }
  // The compile of `key` finished with `inst`.
  void Insert(const SignatureKey& key, std::shared_ptr<Instance> inst);

  // Every instance is stale: the next launch of each signature compiles anew (queued launches keep
  // their libraries loaded).
  void Clear();
  void CountStale() { ++stale_; }

  size_t size() const { return instances_.size(); }
  const std::vector<std::shared_ptr<Instance>>& in_order() const { return order_; }
  int64_t compiles() const { return compiles_; }
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }
  int64_t stale() const { return stale_; }

 private:
  Instance* single_ = nullptr;  // a kernel without specialisation has one key: skip the map
  std::unordered_map<SignatureKey, std::shared_ptr<Instance>, SignatureKeyHash> instances_;
  struct Lock {
    std::shared_ptr<std::timed_mutex> mutex;
    uint64_t generation = 0;  // ForkGeneration() it was made in
  };
  std::unordered_map<SignatureKey, Lock, SignatureKeyHash> compiling_;
  std::vector<std::shared_ptr<Instance>> order_;
  int64_t compiles_ = 0, hits_ = 0, misses_ = 0, stale_ = 0;
};

}  // namespace pypto_pro::jit
