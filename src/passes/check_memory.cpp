// Every tile slot must sit at an address aligned for its memory and end inside that memory's
// capacity on the target arch (docs/device.md#arch-models). Slots that share bytes of one memory
// but are not the same view are usually a placement mistake the hardware would let corrupt data
// silently: each is a warning at the later declaration (the sanitizer reports overlaps that happen).
// The same view: the same bytes read as another tile type (a DN column and a row tile over the same
// values, a tile with another valid shape or pad), the same declaration met twice (a helper inlined
// twice), or two declarations an in-place op needs at one address (pl.fillpad mode=INPLACE).
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/passes/pass.h"
#include "pypto_pro/support/source_line.h"
#include "pypto_pro/support/text.h"

namespace pypto_pro::passes {

namespace {

// pl.make_tile's group is named after the tile with "_slot" appended (made unique by a suffix).
std::string SingleTileName(const std::string& group) {
  size_t at = group.rfind("_slot");
  return at == std::string::npos || at == 0 ? group : group.substr(0, at);
}

struct Placed {
  std::string what;  // "tile 'a'", "slot 1 of tile group 'b'"
  ir::MemorySpace memory;
  int64_t begin, end;
  int line;
  ir::TileType type;
  int group = -1;  // the declaration's group variable
};

// Pairs of tile groups (by variable id, smaller first) whose tiles an in-place pl.fillpad takes as
// its destination and source: the mode requires them at the same address.
std::set<std::pair<int, int>> InPlacePairs(const ir::Function& func) {
  std::map<int, int> group_of;  // tile variable -> its group
  std::set<std::pair<int, int>> pairs;
  ir::ForEachStmt(func.body, [&](const ir::StmtNode& s) {
    if (s.kind == ir::StmtKind::kSelectTile) group_of[s.var->id] = s.group->id;
    if (s.kind != ir::StmtKind::kOp || s.op->name != "fillpad" || s.args.size() < 2) return;
    const ir::KwargSpec* mode = s.op->FindKwarg("mode");
    for (const ir::Attr& a : s.attrs) {
      if (!mode || a.name != "mode" || mode->choices.at(size_t(a.value)) != "INPLACE") continue;
      auto group = [&](const ir::Expr& e) {
        auto it = e->var ? group_of.find(e->var->id) : group_of.end();
        return it == group_of.end() ? -1 : it->second;
      };
      const int dst = group(s.args[0]), src = group(s.args[1]);
      pairs.insert({std::min(dst, src), std::max(dst, src)});
    }
  });
  return pairs;
}

void WarnOverlaps(const std::vector<Placed>& earlier, const Placed& slot, Span span,
                  const std::set<std::pair<int, int>>& in_place, std::vector<CompileWarning>& warnings) {
  for (const Placed& other : earlier) {
    if (other.memory != slot.memory || other.end <= slot.begin || slot.end <= other.begin) continue;
    const bool same_bytes = other.begin == slot.begin && other.end == slot.end;
    if (same_bytes && in_place.count({std::min(other.group, slot.group), std::max(other.group, slot.group)})) continue;
    if (other.begin == slot.begin && (ir::ReorderedBytes(other.type) || ir::ReorderedBytes(slot.type)) &&
        !ir::SameView(other.type, slot.type)) {
      // A deliberate alias (the same start) that reinterprets fractal or column-major bytes: tiles are
      // kept in logical order, so reading one view after writing the other would not give the NPU's answer.
      Fail(ErrorKind::kUnsupported, span,
           slot.what + " (" + slot.type.ToString() + ") starts at the same " + std::string(ir::Name(slot.memory)) +
               " address " + Hex(slot.begin) + " as " + other.what + " (" + other.type.ToString() + ", line " +
               std::to_string(other.line) + "): reading fractal (NZ/ZN) or column-major (DN) bytes through another tile type is not "
               "implemented yet (the simulator keeps tiles in logical order, docs/device.md#cube-layouts); give "
               "each view its own bytes");
    }
    if (same_bytes && (!(other.type == slot.type) || other.line == slot.line)) continue;  // one view
    std::string where = other.line == span.line ? "" : " (line " + std::to_string(LineNumber(other.line)) +
                                                       (LineFile(other.line) != LineFile(span.line) ? " of another file" : "") + ")";
    warnings.push_back(
        {span, slot.what + " at [" + Hex(slot.begin) + ", " + Hex(slot.end) + ") of " +
                   std::string(ir::Name(slot.memory)) + " overlaps " + other.what + where + " at [" +
                   Hex(other.begin) + ", " + Hex(other.end) + "): they share bytes [" +
                   Hex(std::max(slot.begin, other.begin)) + ", " + Hex(std::min(slot.end, other.end)) +
                   ") and writing one changes the other; if the reuse is deliberate (one is no longer used when "
                   "the other is), filter this warning category"});
    return;  // one warning per slot is enough to find it
  }
}

}  // namespace

void CheckMemory(ir::Function& func, const PassContext& ctx) {
  std::vector<Placed> placed;
  const std::set<std::pair<int, int>> in_place = InPlacePairs(func);
  ir::ForEachStmt(func.body, [&](const ir::StmtNode& decl) {
    const ir::StmtNode* s = &decl;
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
        std::string what = g.single_tile ? "tile '" + SingleTileName(s->var->name) + "'"
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
        Placed slot{what, memory, addr, addr + bytes, s->span.line, g.tile, s->var->id};
        if (ctx.warnings) WarnOverlaps(placed, slot, s->span, in_place, *ctx.warnings);
        placed.push_back(std::move(slot));
      }
    }
  });
}

}  // namespace pypto_pro::passes
