// The local memories of one simulated core (UB on an AIV; L1, L0A, L0B, L0C on an AIC), sized for
// the largest arch: a core uses the prefix its kernel's arch has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "pypto_pro/abi.h"
#include "pypto_pro/support/arch.h"

namespace pypto_pro::runtime {

class Arena {
 public:
  Arena();
  uint8_t* base(size_t memory) { return memory_.get() + offsets_[memory]; }
  // Points `ctx` at these memories with the capacities of `arch`.
  void Attach(PtoCoreCtx& ctx, const ArchModel& arch);

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> memory_;
  size_t offsets_[PTO_MEM_COUNT] = {};
};

}  // namespace pypto_pro::runtime
