#include "sanitizer_hooks.h"

#include "names.h"

#include <optional>
#include <set>

#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/runtime/profile.h"

namespace pypto_pro::codegen {

using namespace ir;

namespace {

std::string PipeConstant(Pipe pipe) { return "pto::kPipe" + std::string(Name(pipe)); }

int64_t AttrOr(const StmtNode& s, std::string_view name, int64_t fallback) {
  for (const Attr& a : s.attrs) {
    if (a.name == name) return a.value;
  }
  return fallback;
}

std::string AttrText(const StmtNode& s, std::string_view name) {
  for (const Attr& a : s.attrs) {
    if (a.name == name) return a.text;
  }
  return "";
}

std::string ModeOf(Access access) {
  switch (access) {
    case Access::kRead: return "pto::san::kRead";
    case Access::kWrite: return "pto::san::kWrite";
    case Access::kReadWrite: return "pto::san::kRead | pto::san::kWrite";
  }
  return "pto::san::kRead";
}

std::string VarName(const Expr& e) { return e->var ? e->var->name : "?"; }

// The window an operand is touched in, as C++ expressions: rows x cols from (row0, col0).
struct Window {
  std::string rows, cols;
  std::string row0 = "0", col0 = "0";
};

// A tile -> tile move's windows by its MoveForm: [dst, src] (a cross-core destination is booked
// by PeerWrites instead).
std::vector<std::optional<Window>> MoveWindows(const StmtNode& s, const std::vector<std::string>& operands) {
  auto rows = [&](size_t i) { return "(" + operands[i] + ").valid_rows"; };
  auto cols = [&](size_t i) { return "(" + operands[i] + ").valid_cols"; };
  std::vector<std::optional<Window>> out(s.args.size());
  const bool at_offset = s.args.size() > 2 && s.op->operands[2].kind == OperandKind::kOffsets;
  const std::string row0 = at_offset ? "(" + operands[2] + ").v[0]" : "0";
  const std::string col0 = at_offset ? "(" + operands[2] + ").v[1]" : "0";
  if (s.args.size() > 2 && s.args[2]->type.IsTile()) out[2] = Window{"1", cols(1)};  // a per-channel scale
  switch (MoveFormOf(s)) {
    case MoveForm::kCopy: {
      // The fixpipe's split modes give AIV 0 the larger share of the source's window.
      const std::string mode = std::to_string(AttrOr(s, "acc_to_vec_mode", -1));
      out[0] = Window{"pto::AccToVecShareRows(" + mode + ", " + rows(1) + ")",
                      "pto::AccToVecShareCols(" + mode + ", " + cols(1) + ")"};
      out[1] = Window{rows(1), cols(1)};
      break;
    }
    case MoveForm::kTranspose:
      out[0] = Window{cols(1), rows(1)};
      out[1] = Window{rows(1), cols(1)};
      break;
    case MoveForm::kExtract:
      out[0] = Window{rows(0), cols(0)};
      out[1] = Window{rows(0), cols(0), row0, col0};
      break;
    case MoveForm::kInsert:
      out[0] = Window{rows(1), cols(1), row0, col0};
      out[1] = Window{rows(1), cols(1)};
      break;
    case MoveForm::kExtractTransposed:
      out[0] = Window{rows(0), cols(0)};
      out[1] = Window{cols(0), rows(0), row0, col0};
      break;
    case MoveForm::kInsertTransposed:  // the offset counts in the transposed (source's NZ) frame
      out[0] = Window{cols(1), rows(1), col0, row0};
      out[1] = Window{rows(1), cols(1)};
      break;
  }
  return out;
}

// Each tile operand's window under the op's window rule (OpDef::window), or nothing for an operand
// the op does not touch (a scratch tile the implementation never reads).
std::vector<std::optional<Window>> TileWindows(const StmtNode& s, const std::vector<std::string>& operands) {
  const OpDef& op = *s.op;
  std::vector<std::optional<Window>> out(s.args.size());
  auto rows = [&](size_t i) { return "(" + operands[i] + ").valid_rows"; };
  auto cols = [&](size_t i) { return "(" + operands[i] + ").valid_cols"; };
  auto is_tile = [&](size_t i) { return op.operands[i].kind == OperandKind::kTile; };
  switch (op.window) {
    case WindowRule::kTransferTile:
      for (size_t i = 0; i < out.size(); ++i) {
        if (!is_tile(i)) continue;
        const TileType& t = *s.args[i]->type.tile;
        // A load into a tile with a pad value writes all of it (the pad outside the window).
        const bool whole = t.pad != 0 && op.operands[i].access != Access::kRead;
        out[i] = whole ? Window{std::to_string(t.Rows()), std::to_string(t.Cols())} : Window{rows(i), cols(i)};
      }
      break;
    case WindowRule::kMove: return MoveWindows(s, operands);
    case WindowRule::kFirstRow:
      out[0] = Window{"1", cols(0)};
      break;
    case WindowRule::kPart:
      // Each source is read only where it is valid inside the destination's window.
      out[0] = Window{rows(0), cols(0)};
      for (size_t i = 1; i < 3; ++i) {
        out[i] = Window{"pto::Min(" + rows(i) + ", " + rows(0) + ")", "pto::Min(" + cols(i) + ", " + cols(0) + ")"};
      }
      break;
    case WindowRule::kTranspose:
      out[0] = Window{cols(1), rows(1)};
      out[1] = Window{rows(1), cols(1)};
      break;
    case WindowRule::kFill: {
      const TileType& out_type = *s.args[0]->type.tile;
      out[0] = Window{std::to_string(out_type.Rows()), std::to_string(out_type.Cols())};
      out[1] = Window{rows(1), cols(1)};
      break;
    }
    case WindowRule::kDestination:
    case WindowRule::kSource: {
      // The reference: the destination, or the first tile read (the source).
      size_t ref = 0;
      if (op.window == WindowRule::kSource) {
        while (ref < out.size() && !(is_tile(ref) && op.operands[ref].access == Access::kRead)) ++ref;
      }
      for (size_t i = 0; i < out.size(); ++i) {
        if (!is_tile(i)) continue;
        switch (op.operands[i].shape) {
          case ShapeRole::kSame: out[i] = Window{rows(ref), cols(ref)}; break;
          case ShapeRole::kColumn: out[i] = Window{rows(ref), "1"}; break;
          case ShapeRole::kRow: out[i] = Window{"1", cols(ref)}; break;
          case ShapeRole::kAny:  // scratch the implementation never touches, unless it is the reference
            if (i == ref) out[i] = Window{rows(ref), cols(ref)};
            break;
        }
      }
      break;
    }
    case WindowRule::kMatmul: {
      // M and K from the left matrix, N from the right one (the cube unit's reading).
      std::string m, k, n;
      for (size_t i = 0; i < out.size(); ++i) {
        MemorySpace mem = s.args[i]->type.tile->memory;
        if (mem == MemorySpace::kLeft) m = rows(i), k = cols(i);
        if (mem == MemorySpace::kRight) n = cols(i);
      }
      for (size_t i = 0; i < out.size(); ++i) {
        switch (s.args[i]->type.tile->memory) {
          case MemorySpace::kLeft: out[i] = Window{m, k}; break;
          case MemorySpace::kRight: out[i] = Window{k, n}; break;
          case MemorySpace::kBias: out[i] = Window{"1", n}; break;
          default: out[i] = Window{m, n}; break;
        }
      }
      break;
    }
    case WindowRule::kElement:
    case WindowRule::kSsbuf:  // no tiles: DataGuard books the SSBUF bytes
    case WindowRule::kGmRun:  // no tiles: DataGuard books the GM run
    case WindowRule::kDump:  // booked by DataGuard from its offsets and shapes
    case WindowRule::kNone: break;
  }
  return out;
}

// pto::san::Op(ctx, line, pipe, {accesses...}) for an op that moves or computes data.
// The accesses of a move's destination in the peer core's memory (CrossCoreWriteOf): the AIC's L1,
// or the UB of the AIV(s) acc_to_vec_mode chooses, each split mode's share at the top-left.
std::vector<std::string> PeerWrites(const StmtNode& s, CrossCoreWrite where, const std::string& dst,
                                    const std::string& src, const Window& window, const std::string& mode,
                                    const std::string& name, const std::string& var) {
  const std::string rows = "(" + src + ").valid_rows", cols = "(" + src + ").valid_cols";
  auto rect = [&](const char* peer, const Window& w) {
    return "pto::san::PeerRect(ctx, " + dst + ", " + peer + ", " + mode + ", " + w.row0 + ", " + w.col0 + ", " +
           w.rows + ", " + w.cols + ", " + name + ", " + var + ")";
  };
  if (where == CrossCoreWrite::kToCubeCore) return {rect("PTO_PEER_AIC", window)};
  const int64_t split = AttrOr(s, "acc_to_vec_mode", -1);
  const std::string share = "pto::AccToVecShare(" + std::to_string(split) + ", " + rows + ", " + cols + ")";
  switch (split) {
    case 1: return {rect("PTO_PEER_AIV1", window)};
    case 2: return {rect("PTO_PEER_AIV0", {share, cols}), rect("PTO_PEER_AIV1", {rows + " - " + share, cols})};
    case 3: return {rect("PTO_PEER_AIV0", {rows, share}), rect("PTO_PEER_AIV1", {rows, cols + " - " + share})};
    default: return {rect("PTO_PEER_AIV0", window)};
  }
}

std::string DataGuard(const StmtNode& s, const std::vector<std::string>& operands, const std::string& line,
                      KernelKind kind) {
  const OpDef& op = *s.op;
  const CrossCoreWrite peer = kind == KernelKind::kMixed ? CrossCoreWriteOf(s) : CrossCoreWrite::kNone;
  const std::string name = CString(std::string(op.PublicName()));
  const std::vector<std::optional<Window>> windows = TileWindows(s, operands);
  int tile = -1, offsets = -1;
  for (size_t i = 0; i < s.args.size(); ++i) {
    if (op.operands[i].kind == OperandKind::kTile && tile < 0) tile = int(i);
    if (op.operands[i].kind == OperandKind::kOffsets) offsets = int(i);
  }
  // Reads first: an in-place op that races reports the read-after-write, the hazard that matters.
  std::vector<size_t> order;
  for (size_t i = 0; i < s.args.size(); ++i) {
    if (op.operands[i].access == Access::kRead) order.push_back(i);
  }
  for (size_t i = 0; i < s.args.size(); ++i) {
    if (op.operands[i].access != Access::kRead) order.push_back(i);
  }
  std::vector<std::string> accesses;
  for (size_t i : order) {
    const OperandSpec& spec = op.operands[i];
    const std::string mode = ModeOf(spec.access);
    if (spec.kind == OperandKind::kTile && peer != CrossCoreWrite::kNone && spec.access != Access::kRead) {
      size_t src = 0;  // the tile the move reads
      while (src < s.args.size() && !(op.operands[src].kind == OperandKind::kTile &&
                                      op.operands[src].access == Access::kRead)) {
        ++src;
      }
      for (std::string& a : PeerWrites(s, peer, operands[i], operands[src], *windows[i], mode, name,
                                       CString(VarName(s.args[i])))) {
        accesses.push_back(std::move(a));
      }
    } else if (spec.kind == OperandKind::kTile && windows[i]) {
      const Window& w = *windows[i];
      accesses.push_back("pto::san::Rect(" + operands[i] + ", " + mode + ", " + w.row0 + ", " + w.col0 + ", " +
                         w.rows + ", " + w.cols + ", " + name + ", " + CString(VarName(s.args[i])) + ")");
    } else if (spec.kind == OperandKind::kTensor && tile >= 0 && offsets >= 0) {
      const bool by_tile = op.operands[size_t(offsets)].unit == OffsetUnit::kTiles;
      accesses.push_back(std::string(by_tile ? "pto::san::GmTile(" : "pto::san::Gm(") + operands[i] + ", " + mode +
                         ", " + operands[size_t(tile)] + ", " + operands[size_t(offsets)] + ", " +
                         std::to_string(AttrOr(s, "order", -1)) + ", " + name + ")");
    } else if (op.window == WindowRule::kGmRun) {
      if (spec.kind != OperandKind::kTensor) continue;  // offsets[1], [2]: the run's first element and length
      accesses.push_back("pto::san::GmRun(" + operands[i] + ", " + mode + ", int64_t(" + operands[1] + "), int64_t(" +
                         operands[2] + "))");
    } else if (op.window == WindowRule::kSsbuf) {
      if (i != 1) continue;  // one access for the struct's bytes; operands[0] is the offset
      // The fields are the op's operand; the SSBUF is what a load reads and a store writes.
      const std::string ssbuf_mode = ModeOf(op.name == "ssbuf_load" ? Access::kRead : Access::kWrite);
      accesses.push_back("pto::san::Ssbuf(ctx, " + ssbuf_mode + ", int64_t(" + operands[0] + "), " +
                         std::to_string(SsbufLayoutOf(s).bytes) + ", " + CString(AttrText(s, "name")) + ")");
    } else if (op.window == WindowRule::kDump) {
      // The dumped window of a tile (a GM tensor's is not booked).
      if (spec.kind != OperandKind::kContainer || !s.args[i]->type.IsTile()) continue;
      const std::string off = operands[i + 1], shape = operands[i + 2], t = "(" + operands[i] + ")";
      const std::string rows = "(" + shape + ".v[0] < 0 ? " + t + ".valid_rows - " + off + ".v[0] : " + shape + ".v[0])";
      const std::string cols = "(" + shape + ".v[1] < 0 ? " + t + ".valid_cols - " + off + ".v[1] : " + shape + ".v[1])";
      accesses.push_back("pto::san::Rect(" + operands[i] + ", " + mode + ", " + off + ".v[0], " + off + ".v[1], " + rows +
                         ", " + cols + ", " + name + ", " + CString(VarName(s.args[i])) + ")");
    } else if (spec.kind == OperandKind::kContainer) {
      // One element at the op's scalar offset (pl.setval's `offset`).
      size_t offset = i + 1;
      while (offset < s.args.size() && op.operands[offset].kind != OperandKind::kScalar) ++offset;
      accesses.push_back("pto::san::Element(" + operands[i] + ", " + mode + ", int64_t(" + operands[offset] + "), " +
                         name + ", " + CString(VarName(s.args[i])) + ")");
    }
  }
  if (accesses.empty()) return "";
  std::string list;
  for (const std::string& a : accesses) list += (list.empty() ? "" : ", ") + a;
  return "pto::san::Op(ctx, " + line + ", " + PipeConstant(op.PipeFor(TileMemories(s))) + ", {" + list + "})";
}

std::string CrossId(const StmtNode& s, const std::string& id) {
  return "(" + id + "u | " + std::to_string(AttrOr(s, "sync_mode", 2)) + "u << 8)";
}

std::string SyncCall(const std::string& line, const char* event, Pipe pipe, Pipe other, const std::string& id) {
  return std::string("pto::san::Sync(ctx, ") + line + ", " + event + ", " + PipeConstant(pipe) + ", " +
         PipeConstant(other) + ", " + id + ")";
}

}  // namespace

SanitizerHook HookFor(const StmtNode& s, const std::vector<std::string>& operands, KernelKind kind) {
  const OpDef& op = *s.op;
  const SyncSpec& sync = op.sync;
  const std::string line = std::to_string(s.span.line);
  if (op.window != WindowRule::kNone) {
    std::string guard = DataGuard(s, operands, line, kind);
    const int64_t phase = AttrOr(s, "phase", 0);
    if (phase <= 0) return {guard, ""};
    // The unit flag: every phase= op waits for what the other side last published through it, a
    // Final one publishes its own pipe's work.
    const Pipe own = op.PipeFor(TileMemories(s)), other = own == Pipe::kM ? Pipe::kFIX : Pipe::kM;
    std::string wait = SyncCall(line, "PTO_SAN_UNIT_WAIT", own, other, "0");
    return {guard.empty() ? wait : wait + " && " + guard,
            phase == 2 ? SyncCall(line, "PTO_SAN_UNIT_SET", own, other, "0") + ";" : ""};
  }
  auto pipe = [&](std::string_view attr) { return attr.empty() ? Pipe::kALL : Pipe(AttrOr(s, attr, 0)); };
  const Pipe acting = pipe(sync.pipe_attr);
  const Pipe peer = sync.peer_pipe_attr.empty() ? acting : pipe(sync.peer_pipe_attr);
  const std::string id = sync.id_attr.empty() ? "0" : std::to_string(AttrOr(s, sync.id_attr, 0));
  auto event = [&](const char* code, const std::string& ids) { return SyncCall(line, code, acting, peer, ids); };
  auto auto_mutex = [&](const char* code) {
    std::string tiles;
    for (const std::string& operand : operands) tiles += ", " + operand;
    return "pto::san::AutoMutex(ctx, " + line + ", " + code + ", " + PipeConstant(acting) + tiles + ")";
  };
  switch (sync.event) {
    case SyncEvent::kNone: return {};
    case SyncEvent::kValidShape:
      return {"pto::san::ValidShape(ctx, " + line + ", " + operands[0] + ", " + operands[1] + ")", ""};
    case SyncEvent::kAutoLock: return {auto_mutex("PTO_SAN_LOCK"), ""};
    case SyncEvent::kAutoUnlock: return {auto_mutex("PTO_SAN_UNLOCK"), ""};
    case SyncEvent::kFlagSet: return {event("PTO_SAN_FLAG_SET", id), ""};
    case SyncEvent::kFlagWait: return {event("PTO_SAN_FLAG_WAIT", id), ""};
    case SyncEvent::kLock: return {event("PTO_SAN_LOCK", "1u << " + id), ""};
    case SyncEvent::kUnlock: return {event("PTO_SAN_UNLOCK", "1u << " + id), ""};
    case SyncEvent::kBarrier:
      return {SyncCall(line, "PTO_SAN_BARRIER", sync.barrier_pipe, sync.barrier_pipe, "0"), ""};
    // Before the set: the clock must be queued when the receiving core's wait returns. The id carries
    // the sync mode above its low byte (the mode routes it).
    case SyncEvent::kCrossSet: return {event("PTO_SAN_CROSS_SET", CrossId(s, id)), ""};
    // After the wait: its set has happened by then.
    case SyncEvent::kCrossWait: return {"", event("PTO_SAN_CROSS_WAIT", CrossId(s, id)) + ";"};
  }
  return {};
}

std::string WorkOf(const StmtNode& s, const std::vector<std::string>& operands) {
  using runtime::OpClass;
  const OpDef& op = *s.op;
  if (op.window == WindowRule::kNone) return "";
  const Pipe pipe = op.PipeFor(TileMemories(s));
  const std::vector<std::optional<Window>> windows = TileWindows(s, operands);
  auto bytes = [&](size_t i) {
    const Window& w = *windows[i];
    return "int64_t(" + w.rows + ") * int64_t(" + w.cols + ") * " + std::to_string(ir::Bytes(s.args[i]->type.dtype));
  };
  OpClass op_class = OpClass::kScalar;
  std::string units = "1";
  int dtype = 0;
  bool gm = false;
  for (const Expr& arg : s.args) gm = gm || (arg && (arg->type.IsTensor() || arg->type.IsPtr()));
  if (op.window == WindowRule::kMatmul) {
    std::string m = "1", k = "1", n = "1";
    for (size_t i = 0; i < s.args.size(); ++i) {
      if (!windows[i]) continue;
      const MemorySpace mem = s.args[i]->type.tile->memory;
      if (mem == MemorySpace::kLeft) m = windows[i]->rows, k = windows[i]->cols, dtype = int(s.args[i]->type.dtype);
      if (mem == MemorySpace::kRight) n = windows[i]->cols;
    }
    op_class = OpClass::kMatmul;
    units = "int64_t(" + m + ") * int64_t(" + k + ") * int64_t(" + n + ")";
  } else if (op.window == WindowRule::kGmRun) {
    op_class = OpClass::kTransferGm;
    units = "int64_t(" + operands[2] + ") * " + std::to_string(ir::Bytes(s.args[0]->type.dtype));
  } else if (pipe != Pipe::kS) {
    // The widest window the op touches: what a transfer moves, what a vector op streams through.
    for (size_t i = 0; i < s.args.size(); ++i) {
      if (!windows[i]) continue;
      units = units == "1" ? bytes(i) : "pto::Max(" + units + ", " + bytes(i) + ")";
    }
    static const std::set<std::string_view> kSlow = {"exp", "log", "sqrt", "rsqrt", "div", "divs", "recip",
                                                    "row_expand_div", "col_expand_div", "expand_div"};
    if (pipe == Pipe::kV) {
      op_class = kSlow.count(op.name) ? OpClass::kVectorSlow : OpClass::kVector;
    } else {
      op_class = gm ? OpClass::kTransferGm : OpClass::kTransferLocal;
    }
  }
  return "pto::san::Work(ctx, " + std::to_string(s.span.line) + ", " + PipeConstant(pipe) + ", " +
         std::to_string(int(op_class)) + " /*" + runtime::Name(op_class) + "*/, " + units + ", " +
         std::to_string(dtype) + ", " + CString("pl." + std::string(op.PublicName())) + ");";
}

uint32_t SanitizerPipes(const Function& func) {
  // The pipes that touch tiles (by their S-pipe element reads, too) and GM, per kind of core:
  // code outside sections of a mixed kernel runs on both.
  struct Pipes : IRVisitor {
    KernelKind kind = KernelKind::kVector;
    uint32_t aiv_tile = 0, aiv_gm = 0, aic_tile = 0, aic_gm = 0;
    void Add(uint32_t tile, uint32_t gm) {
      const std::optional<SectionKind> in = section();
      const bool aiv = kind == KernelKind::kVector || (kind == KernelKind::kMixed && in != SectionKind::kCube);
      const bool aic = kind == KernelKind::kCube || (kind == KernelKind::kMixed && in != SectionKind::kVector);
      if (aiv) aiv_tile |= tile, aiv_gm |= gm;
      if (aic) aic_tile |= tile, aic_gm |= gm;
    }
    void VisitExpr(const ExprNode& e) override {
      const uint32_t scalar = 1u << uint32_t(Pipe::kS);
      if (e.kind == ExprKind::kElement) Add(e.var->type.IsTile() ? scalar : 0, e.var->type.IsTile() ? 0 : scalar);
      IRVisitor::VisitExpr(e);
    }
    void VisitStmt(const StmtNode& s) override {
      // Bit ALL of a core's tile byte: its moves write the other kind of core's tiles.
      const uint32_t reaches_peer = 1u << uint32_t(Pipe::kALL);
      if (kind == KernelKind::kMixed && s.kind == StmtKind::kOp) {
        const CrossCoreWrite peer = CrossCoreWriteOf(s);
        if (peer == CrossCoreWrite::kToVectorCores) aic_tile |= reaches_peer;
        if (peer == CrossCoreWrite::kToCubeCore) aiv_tile |= reaches_peer;
      }
      if (s.kind == StmtKind::kOp && s.op->window == WindowRule::kSsbuf) Add(0, 1u << uint32_t(Pipe::kS));
      if (s.kind == StmtKind::kOp && s.op->window != WindowRule::kNone) {
        const uint32_t pipe = 1u << uint32_t(s.op->PipeFor(TileMemories(s)));
        for (const Expr& arg : s.args) {
          if (arg->type.IsTile()) Add(pipe, 0);
          if (arg->type.IsTensor()) Add(0, pipe);
        }
      }
      IRVisitor::VisitStmt(s);
    }
  } pipes;
  pipes.kind = KernelKindOf(func);
  pipes.Visit(func.body);
  return pipes.aiv_tile | pipes.aiv_gm << 8 | pipes.aic_tile << 16 | pipes.aic_gm << 24;
}

}  // namespace pypto_pro::codegen
