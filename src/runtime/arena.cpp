#include "arena.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string_view>

namespace pypto_pro::runtime {

Arena::Arena() {
  size_t offset = 0;
  for (size_t m = 0; m < PTO_MEM_COUNT; ++m) {
    uint32_t largest = 0;
    for (std::string_view name : ArchNames()) largest = std::max(largest, FindArch(name)->capacity[m]);
    offsets_[m] = offset;
    offset += (largest + 4095) / 4096 * 4096;
  }
  memory_.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, offset)));
  if (!memory_) throw std::bad_alloc();
}

void Arena::Free::operator()(uint8_t* p) const { std::free(p); }

void Arena::Attach(PtoCoreCtx& ctx, const ArchModel& arch) {
  for (size_t m = 0; m < PTO_MEM_COUNT; ++m) {
    ctx.mem[m] = base(m);
    ctx.mem_size[m] = arch.capacity[m];
  }
}

}  // namespace pypto_pro::runtime
