// Synchronisation between pipes and cores (docs/language.md#synchronisation): flags between the pipes of a
// core, buffer mutexes, pipe barriers, and the cross-core flags of mixed kernels.
#include <algorithm>

#include "op_tables.h"
#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

namespace {

const std::vector<std::string_view> kPipes = Choices(hw::kPipeNames);
const std::vector<std::string_view> kSyncModes = Choices(hw::kCrossCoreSyncModeNames);
constexpr int64_t kIntraBlock = int64_t(hw::CrossCoreSyncMode::kINTRA_BLOCK);
constexpr int64_t kEventIds = 16;  // flags between pipes and between cores
constexpr int64_t kMutexIds = 32;

// Pipe options hold ir::Pipe values (the choices are in Pipe order) and print as pto::kPipe<name>.
KwargSpec PipeKwarg(std::string_view name) {
  KwargSpec k{name, AttrKind::kEnum, 0, kPipes, "pto::kPipe"};
  k.required = true;
  return k;
}

KwargSpec IdKwarg(std::string_view name, int64_t count) {
  KwargSpec k;
  k.name = name;
  k.kind = AttrKind::kInt;
  k.min_value = 0;
  k.max_value = count - 1;
  k.required = true;
  k.runtime_dispatch = true;
  return k;
}

OpDef SyncOp(std::string_view name, std::string_view device_fn, std::vector<KwargSpec> kwargs,
             void (*check)(const StmtNode&), SyncSpec sync, std::string_view doc) {
  OpDef op{name, Pipe::kS, PipeRule::kFixed, WindowRule::kNone, {}, false, kAllSupportedDTypes, "", device_fn,
           std::move(kwargs), doc};
  op.check = check;
  op.sync = sync;
  return op;
}

int64_t AttrValue(const StmtNode& call, std::string_view name) {
  for (const Attr& a : call.attrs) {
    if (a.name == name) return a.value;
  }
  Fail(ErrorKind::kInternal, call.span, "pl." + std::string(call.op->name) + " has no option '" + std::string(name) + "'");
}

// Rejects the pipes `pipe_kwarg` may not name on this op, listing the ones it may.
void RequirePipe(const StmtNode& call, std::string_view pipe_kwarg, std::initializer_list<Pipe> refused) {
  Pipe pipe = Pipe(AttrValue(call, pipe_kwarg));
  if (std::find(refused.begin(), refused.end(), pipe) == refused.end()) return;
  std::string allowed;
  for (size_t p = 0; p < kPipes.size(); ++p) {
    if (std::find(refused.begin(), refused.end(), Pipe(p)) != refused.end()) continue;
    allowed += (allowed.empty() ? "" : ", ") + std::string(kPipes[p]);
  }
  Fail(ErrorKind::kValue, call.span,
       "pl." + std::string(call.op->name) + "(): " + std::string(pipe_kwarg) + "=" + std::string(Name(pipe)) +
           " is not a pipe it can use; use one of " + allowed);
}

// sync_src / sync_dst order two different concrete pipes.
void CheckFlag(const StmtNode& call) {
  RequirePipe(call, "set_pipe", {Pipe::kALL});
  RequirePipe(call, "wait_pipe", {Pipe::kALL});
  if (AttrValue(call, "set_pipe") == AttrValue(call, "wait_pipe")) {
    Fail(ErrorKind::kValue, call.span,
         "pl." + std::string(call.op->name) + "(): set_pipe and wait_pipe are both " +
             std::string(Name(Pipe(AttrValue(call, "set_pipe")))) + "; a flag orders two different pipes",
         "instructions of one pipe already run in order; use pl.system.bar_* to wait for a pipe to drain");
  }
}

void CheckMutex(const StmtNode& call) { RequirePipe(call, "pipe", {Pipe::kALL}); }

// INTRA_BLOCK, UNICAST_BLOCK and INTER_SUBBLOCK pair cores of one logical block; INTER_BLOCK every
// AIV (or AIC) of the launch (docs/language.md#cross-core-flags).
void CheckCrossCoreMode(const StmtNode& call) {
  const int64_t mode = AttrValue(call, "sync_mode"), id = AttrValue(call, "event_id");
  const std::string what = "pl." + std::string(call.op->name) + "(sync_mode=pl.CrossCoreSyncMode." +
                           std::string(kSyncModes[size_t(mode)]) + ")";
  if (id >= kEventIds && mode != int64_t(hw::CrossCoreSyncMode::kUNICAST_BLOCK)) {
    Fail(ErrorKind::kType, call.span,
         what + ": event_id=" + std::to_string(id) + " is out of range [0, 15] (ids 16..31 exist only for "
                "UNICAST_BLOCK on the AIC, where they address AIV 1)");
  }
}

// The AIC's set reaches both AIVs and each AIV's set reaches the AIC; the set side names the pipe
// whose earlier instructions must finish first: never ALL, and the scalar pipe only in UNICAST_BLOCK.
void CheckSetCrossCore(const StmtNode& call) {
  if (AttrValue(call, "sync_mode") == int64_t(hw::CrossCoreSyncMode::kUNICAST_BLOCK)) {
    RequirePipe(call, "pipe", {Pipe::kALL});
  } else {
    RequirePipe(call, "pipe", {Pipe::kS, Pipe::kALL});
  }
  CheckCrossCoreMode(call);
}

void CheckWaitCrossCore(const StmtNode& call) {
  RequirePipe(call, "pipe", {Pipe::kALL});
  CheckCrossCoreMode(call);
}

// dcci's offset: a list of one entry per axis of a GM tensor, or a linear element offset (the only
// form a Vec tile takes).
void CheckDcci(const StmtNode& call) {
  if (call.args.size() < 2) return;
  const Expr &target = call.args[0], &offset = call.args[1];
  const Span at = offset->span.valid() ? offset->span : call.span;
  if (offset->kind != ExprKind::kTuple) return;
  if (target->type.IsTile()) {
    Fail(ErrorKind::kType, at, "pl.system.dcci: a Vec tile takes a linear element offset, not a list");
  }
  const size_t rank = target->type.tensor->dims.size();
  if (offset->operands.size() != rank) {
    Fail(ErrorKind::kType, at,
         "pl.system.dcci: the offset list needs one entry per axis of tensor '" + target->var->name + "' (" +
             std::to_string(rank) + "), got " + std::to_string(offset->operands.size()));
  }
}

void CheckSyncAll(const StmtNode& call) {
  if (AttrValue(call, "mode") == 1) {
    Fail(ErrorKind::kValue, call.span,
         "pl.system.sync_all(mode=pl.SyncAllMode.SOFT) needs its workspaces: a list of the int32 GM tensor all "
         "participating cores share, plus a Vec (UB) tile for AIV_ONLY, a Mat (L1) tile for AIC_ONLY, both for MIX, "
         "and optionally used_cores",
         "pl.system.sync_all([sync_gm, sync_ub], mode=pl.SyncAllMode.SOFT, core_type=pl.SyncCoreType.AIV_ONLY)");
  }
}

// sync_all(workspaces, ...): the list holds at most one GM tensor, one Vec tile, one Mat tile and one
// integer (used_cores), in any order; SOFT mode needs the GM tensor plus the local tile(s) of its
// core_type, HARD mode none (an empty list is allowed).
void CheckSyncAllWorkspaces(const StmtNode& call) {
  static const char* const kTypes[] = {"AIV_ONLY", "AIC_ONLY", "MIX"};
  const int64_t core_type = AttrValue(call, "core_type");
  const bool soft = AttrValue(call, "mode") == 1;
  const Expr& list = call.args.at(0);
  const Span at = list->span.valid() ? list->span : call.span;
  const std::string what = "pl.system.sync_all(workspaces, core_type=pl.SyncCoreType." +
                           std::string(kTypes[core_type]) + ", mode=pl.SyncAllMode." + (soft ? "SOFT" : "HARD") + ")";
  if (list->kind != ExprKind::kTuple) Fail(ErrorKind::kType, at, what + ": workspaces must be a list");
  if (!soft) {
    if (list->operands.empty()) return;
    Fail(ErrorKind::kValue, at, what + ": the hardware barrier takes no workspaces; pass none (or an empty list)",
         "SOFT mode is the barrier through a GM workspace: mode=pl.SyncAllMode.SOFT");
  }
  const ExprNode *gm = nullptr, *ub = nullptr, *l1 = nullptr, *used = nullptr;
  for (const Expr& item : list->operands) {
    const ExprNode** slot = nullptr;
    std::string kind;
    if (item->type.IsTensor()) {
      slot = &gm, kind = "GM tensor";
      if (item->type.dtype != DataType::kInt32) {
        Fail(ErrorKind::kType, at, what + ": the GM workspace '" + item->var->name + "' must be int32, got " +
                                       std::string(Name(item->type.dtype)));
      }
    } else if (item->type.IsTile()) {
      const MemorySpace m = item->type.tile->memory;
      if (m != MemorySpace::kVec && m != MemorySpace::kMat) {
        Fail(ErrorKind::kType, at, what + ": a workspace tile is a Vec (UB) or Mat (L1) tile, got " +
                                       item->type.ToString());
      }
      if (item->type.dtype != DataType::kInt32) {
        Fail(ErrorKind::kType, at, what + ": workspace tiles must be int32, got " + item->type.ToString());
      }
      if (item->type.tile->Bytes() < 32) {
        Fail(ErrorKind::kValue, at, what + ": a workspace tile holds at least 32 bytes, got " + item->type.ToString());
      }
      slot = m == MemorySpace::kVec ? &ub : &l1;
      kind = m == MemorySpace::kVec ? "Vec (UB) tile" : "Mat (L1) tile";
    } else if (item->type.IsScalar() && IsInteger(item->type.dtype)) {
      slot = &used, kind = "used_cores";
      if (item->IsIntConst() && item->int_value < 0) {
        Fail(ErrorKind::kValue, at, what + ": used_cores must be >= 0 (0: every core of core_type), got " +
                                       std::to_string(item->int_value));
      }
    } else {
      Fail(ErrorKind::kType, at, what + ": workspaces hold a GM tensor, UB / L1 tiles and an integer used_cores, got " +
                                     item->type.ToString());
    }
    if (*slot) Fail(ErrorKind::kValue, at, what + ": workspaces hold at most one " + kind);
    *slot = item.get();
  }
  const bool wants_ub = core_type != 1, wants_l1 = core_type != 0;
  const std::string combo = core_type == 0   ? "[gm_workspace, ub_workspace(, used_cores)]"
                            : core_type == 1 ? "[gm_workspace, l1_workspace(, used_cores)]"
                                             : "[gm_workspace, ub_workspace, l1_workspace(, used_cores)]";
  if (!gm || (wants_ub && !ub) || (wants_l1 && !l1) || (!wants_ub && ub) || (!wants_l1 && l1)) {
    Fail(ErrorKind::kValue, at, what + " takes the workspaces " + combo);
  }
}

}  // namespace

void AddSyncOps(std::vector<OpDef>& ops) {
  // auto_mutex: lock / unlock, on the pipe of the guarded op, every TileGroup mutex id its tile
  // operands carry. The pipe is always printed (a required option), MTE1 included.
  for (auto [name, fn, event, doc] :
       {std::tuple{"auto_mutex_lock", "pto::auto_mutex_lock", SyncEvent::kAutoLock, "lock the tiles' mutex ids"},
        std::tuple{"auto_mutex_unlock", "pto::auto_mutex_unlock", SyncEvent::kAutoUnlock, "unlock them"}}) {
    OpDef op{name, Pipe::kS, PipeRule::kFixed, WindowRule::kNone,
             {{"tiles", OperandKind::kTiles, Access::kRead, kAnyTileMemory}},
             false, kAllSupportedDTypes, "", fn, {PipeKwarg("pipe")}, doc};
    op.internal = true;
    op.sync = {event, "pipe"};
    ops.push_back(op);
  }

  auto flag_kwargs = [] {
    return std::vector<KwargSpec>{PipeKwarg("set_pipe"), PipeKwarg("wait_pipe"), IdKwarg("event_id", kEventIds)};
  };
  ops.push_back(SyncOp("system.sync_src", "pto::sync_src", flag_kwargs(), &CheckFlag,
                       {SyncEvent::kFlagSet, "set_pipe", "wait_pipe", "event_id", Pipe::kALL, "system.sync_dst"},
                       "set_pipe raises flag event_id once its earlier instructions are done"));
  ops.push_back(SyncOp("system.sync_dst", "pto::sync_dst", flag_kwargs(), &CheckFlag,
                       {SyncEvent::kFlagWait, "wait_pipe", "set_pipe", "event_id", Pipe::kALL, "system.sync_src"},
                       "wait_pipe waits for flag event_id raised by set_pipe"));

  auto mutex_kwargs = [] { return std::vector<KwargSpec>{PipeKwarg("pipe"), IdKwarg("mutex_id", kMutexIds)}; };
  ops.push_back(SyncOp("system.mutex_lock", "pto::mutex_lock", mutex_kwargs(), &CheckMutex,
                       {SyncEvent::kLock, "pipe", "", "mutex_id", Pipe::kALL, "system.mutex_unlock"},
                       "pipe takes buffer mutex mutex_id, waiting while another pipe holds it"));
  ops.push_back(SyncOp("system.mutex_unlock", "pto::mutex_unlock", mutex_kwargs(), &CheckMutex,
                       {SyncEvent::kUnlock, "pipe", "", "mutex_id", Pipe::kALL, "system.mutex_lock"},
                       "pipe releases buffer mutex mutex_id"));

  for (auto [name, fn, pipe, doc] : {
           std::tuple{"system.bar_all", "pto::pipe_barrier<pto::kPipeALL>", Pipe::kALL, "wait until every pipe has drained"},
           std::tuple{"system.bar_v", "pto::pipe_barrier<pto::kPipeV>", Pipe::kV, "wait until the vector pipe has drained"},
           std::tuple{"system.bar_m", "pto::pipe_barrier<pto::kPipeM>", Pipe::kM, "wait until the cube pipe has drained"},
           std::tuple{"system.bar_mte1", "pto::pipe_barrier<pto::kPipeMTE1>", Pipe::kMTE1, "wait until MTE1 has drained"},
           std::tuple{"system.bar_mte2", "pto::pipe_barrier<pto::kPipeMTE2>", Pipe::kMTE2, "wait until MTE2 has drained"},
           std::tuple{"system.bar_mte3", "pto::pipe_barrier<pto::kPipeMTE3>", Pipe::kMTE3, "wait until MTE3 has drained"},
           std::tuple{"system.bar_fix", "pto::pipe_barrier<pto::kPipeFIX>", Pipe::kFIX, "wait until FIX has drained"},
       }) {
    ops.push_back(SyncOp(name, fn, {}, nullptr, {SyncEvent::kBarrier, "", "", "", pipe}, doc));
  }

  // The fixpipe reads L0C along N while enabled. The simulator's fixpipe reads Acc tiles in logical
  // order either way, so results do not depend on it (docs/language.md#the-unit-flag).
  OpDef layout = SyncOp("system.set_mm_layout_transform", "pto::set_mm_layout_transform",
                        {KwargSpec{"enabled", AttrKind::kBool, 0, {}, {}, INT64_MIN, INT64_MAX, true}}, nullptr,
                        {}, "switch the fixpipe's L0C read direction (K-split accumulation with phase=)");
  layout.pipe = Pipe::kFIX;
  ops.push_back(layout);

  // dcci: write back and invalidate the data cache over a GM tensor or Vec tile. Host memory is
  // coherent, so only the target and offset are checked (a fault when the offset leaves the target).
  const std::vector<KwargSpec> dcci_kwargs = {
      KwargSpec{"cache_line", AttrKind::kEnum, 1, {"SINGLE_CACHE_LINE", "ENTIRE_DATA_CACHE"}},
      KwargSpec{"dst", AttrKind::kEnum, 0, {"AUTO", "CACHELINE_OUT", "CACHELINE_UB", "CACHELINE_ALL", "CACHELINE_ATOMIC"}}};
  OpDef dcci = SyncOp("system.dcci", "pto::dcci", dcci_kwargs, &CheckDcci, {},
                      "write back and invalidate the data cache for a GM tensor or Vec tile (coherent here)");
  dcci.operands = {{"target", OperandKind::kContainer, Access::kRead, kVecOnly}};
  dcci.kwargs.insert(dcci.kwargs.begin(), KwargSpec{"offset", AttrKind::kOperand, -1, {"system.dcci_at"}});
  ops.push_back(dcci);
  OpDef dcci_at = dcci;
  dcci_at.name = "system.dcci_at";
  dcci_at.public_name = "system.dcci";
  dcci_at.operands.push_back({"offset", OperandKind::kIndex, Access::kRead});
  dcci_at.kwargs = dcci_kwargs;
  dcci_at.device_fn = "pto::dcci_at";
  ops.push_back(dcci_at);

  // sync_all: HARD mode is the FFTS barrier, SOFT mode one through a GM workspace (the same barrier
  // here, its workspaces checked). core_type must match the kernel's sections (the verifier).
  const std::vector<KwargSpec> sync_all_kwargs = {KwargSpec{"core_type", AttrKind::kEnum, 2, {"AIV_ONLY", "AIC_ONLY", "MIX"}},
                                                   KwargSpec{"mode", AttrKind::kEnum, 0, {"HARD", "SOFT"}}};
  OpDef sync_all = SyncOp("system.sync_all", "pto::sync_all", sync_all_kwargs, &CheckSyncAll, {},
                          "a barrier of every block of the launch");
  sync_all.kwargs.insert(sync_all.kwargs.begin(),
                         KwargSpec{"workspaces", AttrKind::kOperand, -1, {"system.sync_all_soft"}});
  ops.push_back(sync_all);
  // With its workspaces list (SOFT mode: the barrier through a GM workspace; HARD takes an empty one).
  OpDef sync_all_soft = SyncOp("system.sync_all_soft", "pto::sync_all_soft", sync_all_kwargs, &CheckSyncAllWorkspaces,
                               {}, "a barrier of every block (or used_cores cores) of the launch through a GM workspace");
  sync_all_soft.public_name = "system.sync_all";
  sync_all_soft.operands = {{"workspaces", OperandKind::kWorkspaces, Access::kReadWrite}};
  ops.push_back(sync_all_soft);

  auto cross_core_kwargs = [] {
    // UNICAST_BLOCK's AIC ids reach 31 (CheckCrossCoreMode narrows the others to 0..15).
    return std::vector<KwargSpec>{PipeKwarg("pipe"), IdKwarg("event_id", 2 * kEventIds),
                                  KwargSpec{"sync_mode", AttrKind::kEnum, kIntraBlock, kSyncModes, "PTO_SYNC_"}};
  };
  ops.push_back(SyncOp("system.set_cross_core", "pto::set_cross_core", cross_core_kwargs(), &CheckSetCrossCore,
                       {SyncEvent::kCrossSet, "pipe", "", "event_id", Pipe::kALL, "system.wait_cross_core"},
                       "signal event_id to the other side of the logical block (AIC -> both AIVs, AIV -> AIC)"));
  ops.push_back(SyncOp("system.wait_cross_core", "pto::wait_cross_core", cross_core_kwargs(), &CheckWaitCrossCore,
                       {SyncEvent::kCrossWait, "pipe", "", "event_id", Pipe::kALL, "system.set_cross_core"},
                       "wait for event_id from the other side (the AIC waits for both AIVs)"));
}

}  // namespace pypto_pro::ir
