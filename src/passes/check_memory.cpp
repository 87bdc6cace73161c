// Every tile slot must sit at an address aligned for its memory and end inside that memory's
// capacity on the target arch (SIMULATOR.md "Arch models").
#include <cstdio>
#include <functional>

#include "pypto_pro/passes/pass.h"

namespace pypto_pro::passes {

namespace {
std::string Hex(int64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

void CheckMemory(ir::Function& func, const PassContext& ctx) {
  std::function<void(const ir::Stmt&)> walk = [&](const ir::Stmt& s) {
    if (!s) return;
    if (s->kind == ir::StmtKind::kDeclTiles) {
      const ir::TileGroupInfo& g = *s->var->group;
      ir::MemorySpace memory = g.tile.memory;
      std::string mem_name(ir::Name(memory));
      if (memory == ir::MemorySpace::kDDR) {
        Fail(ErrorKind::kMemory, s->span, "tiles live in a core's local memory; DDR is not a tile memory");
      }
      uint32_t capacity = ctx.arch->Capacity(memory);
      uint32_t align = TileAlignment(memory);
      int64_t bytes = g.tile.Bytes();
      for (size_t i = 0; i < g.addrs.size(); ++i) {
        int64_t addr = g.addrs[i];
        std::string what = g.single_tile ? "tile '" + s->var->name + "'"
                                         : "slot " + std::to_string(i) + " of tile group '" + s->var->name + "'";
        if (addr < 0 || addr % align != 0) {
          Fail(ErrorKind::kMemory, s->span,
               what + " is at address " + Hex(addr) + ", which is not " + std::to_string(align) + "-byte aligned as " +
                   mem_name + " memory requires");
        }
        if (addr + bytes > int64_t(capacity)) {
          Fail(ErrorKind::kMemory, s->span,
               what + " (" + g.tile.ToString() + ", " + std::to_string(bytes) + " bytes at " + Hex(addr) +
                   ") ends at " + Hex(addr + bytes) + ", outside " + mem_name + " memory (" +
                   std::to_string(capacity) + " bytes on " + std::string(ctx.arch->name) + ")");
        }
      }
    }
    for (const ir::Stmt& child : s->stmts) walk(child);
    walk(s->body);
    walk(s->orelse);
  };
  walk(func.body);
}

}  // namespace pypto_pro::passes
