// pl.jit(pipeline=pl.pipeline.PipelineConfig(sync_only=True)) (docs/language.md#pipeline): the kernel
// holds one pl.range loop whose body is a run of sections, each holding one @pl.pipeline.stage, the
// stages alternating cube and vector. A cross-core buffer (make_tile_group(fwd_ids=, bwd_ids=)) is
// written by one stage and read by a stage on the other core; every iteration takes its next slot.
// This pass gives each buffer its cross-core flags (INTRA_BLOCK):
//   producer: wait bwd[slot] (the consumer is done with the slot) ... write ... set fwd[slot]
//   consumer: wait fwd[slot] (the producer's data is there)  ... read ... set bwd[slot]
// with one bwd set per slot before the loop (every slot starts free) and one bwd wait per slot after
// it, so every event is set as often as it is waited for. A wait or set sits at the start or end of
// its stage, on the pipe of the stage's first or last access of the buffer: the pipe's other work
// before and after is not held up.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/op_registry.h"
#include "pypto_pro/ir/visitor.h"
#include "pypto_pro/passes/pass.h"

namespace pypto_pro::passes {

namespace {

using namespace ir;

[[noreturn]] void Refuse(Span span, const std::string& message, const std::string& hint = "") {
  Fail(ErrorKind::kPipeline, span, "pl.jit(pipeline=...): " + message, hint);
}

const char* CoreName(SectionKind k) { return k == SectionKind::kCube ? "cube" : "vector"; }

struct StageSite {
  const StmtNode* stage = nullptr;
  SectionKind core = SectionKind::kVector;
  std::string name;
};

// What one stage does with one cross-core buffer, in program order.
struct BufferUse {
  int stage = -1;
  int next_selects = 0;   // group.next() calls
  int other_selects = 0;  // current() / previous() / [i]
  Span select_span;
  std::vector<std::pair<Pipe, bool>> accesses;  // (pipe, writes)
  Span first_span;
};

struct Buffer {
  Var group;
  std::vector<BufferUse> uses;  // one per stage that touches it, in stage order
};

// Whether `s` is `stage` wrapped in sequences only.
bool OnlyStage(const Stmt& s, const StmtNode* stage) {
  if (!s) return true;
  if (s.get() == stage) return true;
  if (s->kind != StmtKind::kSeq) return false;
  return std::all_of(s->stmts.begin(), s->stmts.end(), [&](const Stmt& c) { return OnlyStage(c, stage); });
}

// The stage loop and its stages, with the path checks: stage in a section, section directly in the
// loop body, no run-time control flow between them (compile-time ifs are folded away by now).
struct Finder {
  const StmtNode* loop = nullptr;
  std::vector<StageSite> stages;
  std::vector<const StmtNode*> path;

  void Walk(const Stmt& s) {
    if (!s) return;
    if (s->kind == StmtKind::kStage) return Found(*s);
    path.push_back(s.get());
    for (const Stmt& child : s->stmts) Walk(child);
    Walk(s->body);
    Walk(s->orelse);
    path.pop_back();
  }

  void Found(const StmtNode& stage) {
    const std::string name = stage.attrs.at(0).text;
    auto up = path.rbegin();
    while (up != path.rend() && (*up)->kind == StmtKind::kSeq) ++up;
    if (up == path.rend() || (*up)->kind != StmtKind::kSection) {
      Refuse(stage.span, "stage '" + name + "' is not inside a pl.section_cube() / pl.section_vector() block",
             "put each stage call in its own section inside the pipeline loop");
    }
    const StmtNode* section = *up;
    if (!OnlyStage(section->body, &stage)) {
      Refuse(section->span, "the section of stage '" + name + "' holds other code as well; each section of the "
                            "pipeline loop holds one stage call");
    }
    ++up;
    while (up != path.rend() && (*up)->kind == StmtKind::kSeq) ++up;
    if (up == path.rend() || (*up)->kind != StmtKind::kFor) {
      const bool control = up != path.rend() && ((*up)->kind == StmtKind::kIf || (*up)->kind == StmtKind::kWhile);
      Refuse(stage.span, control ? "stage '" + name + "' is inside run-time control flow; conditions around "
                                   "stages must be compile-time constants"
                                 : "stage '" + name + "' is not directly in a pl.range loop",
             "call every stage, each in its own section, directly in the body of one pl.range loop");
    }
    if (loop && loop != *up) {
      Refuse(stage.span, "stage '" + name + "' is in another loop than stage '" + stages.front().name +
                             "'; all stages are in one pl.range loop");
    }
    loop = *up;
    stages.push_back({&stage, section->section, name});
  }
};

// The tile variables that hold a slot of `group` inside `body`, and what the ops do with them.
BufferUse UseOf(const Var& group, const StmtNode& stage_body_owner) {
  BufferUse use;
  std::set<int> tiles;
  bool changed = true;
  while (changed) {  // selections, then copies and views of them (to a fixed point)
    changed = false;
    ForEachStmt(stage_body_owner.body, [&](const StmtNode& s) {
      if (s.kind == StmtKind::kSelectTile && s.group->id == group->id) changed |= tiles.insert(s.var->id).second;
      const bool alias = s.kind == StmtKind::kAssign || s.kind == StmtKind::kSubview || s.kind == StmtKind::kReinterpret;
      if (alias && s.var->type.IsTile() && s.value && s.value->kind == ExprKind::kVar && tiles.count(s.value->var->id)) {
        changed |= tiles.insert(s.var->id).second;
      }
    });
  }
  ForEachStmt(stage_body_owner.body, [&](const StmtNode& s) {
    if (s.kind == StmtKind::kSelectTile && s.group->id == group->id) {
      (s.mode == SelectMode::kNext ? use.next_selects : use.other_selects)++;
      use.select_span = s.span;
    }
    // Only the data counts: set_validshape and other ops without tile data change this core's view
    // of the slot, which the other core never sees, so no flag waits for them.
    if (s.kind != StmtKind::kOp || s.op->window == WindowRule::kNone) return;
    for (size_t i = 0; i < s.args.size(); ++i) {
      const Expr& a = s.args[i];
      if (!a || a->kind != ExprKind::kVar || !tiles.count(a->var->id)) continue;
      if (use.accesses.empty()) use.first_span = s.span;
      use.accesses.emplace_back(s.op->PipeFor(TileMemories(s)), s.op->operands[i].access != Access::kRead);
    }
  });
  return use;
}

KwargValue Text(const std::string& s) { return KwargValue{KwargValue::Kind::kString, 0, s, nullptr}; }
KwargValue Int(int64_t i) { return KwargValue{KwargValue::Kind::kInt, i, {}, nullptr}; }

// set_cross_core / wait_cross_core(pipe=, event_id=id, sync_mode=INTRA_BLOCK).
Stmt CrossCoreCall(bool set, Pipe pipe, int id, Span span) {
  return BuildOpCall(set ? "system.set_cross_core" : "system.wait_cross_core", {},
                     {{"pipe", Text(std::string(Name(pipe)))}, {"event_id", Int(id)}, {"sync_mode", Text("INTRA_BLOCK")}},
                     span);
}

// The flag of the iteration's slot: a dispatch over the slots.
Stmt CrossCore(bool set, Pipe pipe, const std::vector<int>& ids, const Expr& slot, Span span) {
  Stmt chain = CrossCoreCall(set, pipe, ids.back(), span);
  for (size_t s = ids.size() - 1; s-- > 0;) {
    chain = If(Binary(BinaryOp::kEq, slot, IntConst(int64_t(s), span), span), CrossCoreCall(set, pipe, ids[s], span),
               chain, span);
  }
  return chain;
}

// Every slot's event once, on `core` (the bwd sets before the loop and the waits after it).
Stmt EverySlot(bool set, Pipe pipe, const std::vector<int>& ids, SectionKind core, Span span) {
  std::vector<Stmt> calls;
  for (int id : ids) calls.push_back(CrossCoreCall(set, pipe, id, span));
  return Section(core, Seq(std::move(calls), span), span);
}

class Rewriter : public IRMutator {
 public:
  std::map<const StmtNode*, std::pair<std::vector<Stmt>, std::vector<Stmt>>> around_stage;  // before, after
  const StmtNode* loop = nullptr;
  std::vector<Stmt> before_loop, after_loop;
  // Preload scheduling: the loop becomes this one (its body the sections, each stage guarded), and
  // each stage gets its guard and the assignment of its iteration's loop value.
  std::function<Stmt(const StmtNode& loop, Stmt body)> reschedule;
  std::map<const StmtNode*, std::function<Stmt(Stmt)>> wrap_stage;

 protected:
  Stmt MutateStmt(const Stmt& s) override {
    if (s->kind == StmtKind::kStage) {
      Stmt stage = s;
      auto it = around_stage.find(s.get());
      if (it != around_stage.end()) {
        std::vector<Stmt> body = it->second.first;
        body.push_back(Mutate(s->body));
        body.insert(body.end(), it->second.second.begin(), it->second.second.end());
        auto node = CopyNode(s);
        node->body = Seq(std::move(body), s->span);
        stage = node;
      }
      auto wrap = wrap_stage.find(s.get());
      return wrap == wrap_stage.end() ? stage : wrap->second(stage);
    }
    if (s.get() == loop) {
      std::vector<Stmt> seq = before_loop;
      Stmt mutated = IRMutator::MutateStmt(s);
      seq.push_back(reschedule ? reschedule(*s, mutated->body) : mutated);
      seq.insert(seq.end(), after_loop.begin(), after_loop.end());
      return Seq(std::move(seq), s->span);
    }
    return IRMutator::MutateStmt(s);
  }
};

// Reads of some variables become reads of others.
class VarSubstitution : public IRMutator {
 public:
  explicit VarSubstitution(std::map<int, Var> to) : to_(std::move(to)) {}

 protected:
  Expr MutateExpr(const Expr& e) override {
    if (e->kind == ExprKind::kVar) {
      auto it = to_.find(e->var->id);
      if (it != to_.end()) return VarRef(it->second, e->span);
    }
    return IRMutator::MutateExpr(e);
  }

 private:
  std::map<int, Var> to_;
};

// The delay of each stage, in iterations: the first 0, the first on the other core one more than the
// stage before it, a later stage on a core `preload` more than that core's previous stage. At beat t
// stage k works on iteration t - delay[k]: the first core runs up to `preload` iterations ahead.
std::vector<int64_t> Delays(const std::vector<StageSite>& stages, int preload) {
  std::vector<int64_t> delay(stages.size(), 0);
  std::map<SectionKind, int64_t> last;
  for (size_t k = 0; k < stages.size(); ++k) {
    auto it = last.find(stages[k].core);
    delay[k] = it != last.end() ? it->second + preload : (k == 0 ? 0 : delay[k - 1] + 1);
    last[stages[k].core] = delay[k];
  }
  return delay;
}

// Preload scheduling: `for v in range(start, stop, step)` becomes `for beat in range(0, n + D)`
// (n the iteration count, D the largest delay) whose sections run their stage for iteration
// j = beat - delay when 0 <= j < n, with v = start + j * step assigned first.
void Schedule(Function& func, const PipelineOptions& options, const Finder& finder, const std::vector<Buffer>& buffers,
              const std::vector<StageSite>& stages, Rewriter& rewrite) {
  const StmtNode& loop = *finder.loop;
  const Span at = loop.span;
  if (options.preload < 1) {
    Refuse(at, "preload=" + std::to_string(options.preload) + " overlaps no iterations; give preload >= 1, or "
               "sync_only=True for the serial loop");
  }
  if (!loop.step->IsIntConst() || loop.step->int_value <= 0) {
    Refuse(loop.step->span.valid() ? loop.step->span : at,
           "preload scheduling needs a pipeline loop with a constant positive step");
  }
  // Besides the stages' sections the loop body may compute scalars (the iteration's context): at each
  // beat that code runs once, for the newest iteration, and what each stage reads of it is kept in a
  // ring the stage reads `delay` beats later. Anything else would run once per beat, not per iteration.
  std::set<int> context_vars;
  std::function<void(const Stmt&)> check_context = [&](const Stmt& s) {
    if (!s) return;
    auto pure = [&](const Expr& e) {
      ForEachExpr(e, [&](const ExprNode& x) {
        if (x.kind == ExprKind::kElement || x.kind == ExprKind::kValidShape) {
          Refuse(x.span.valid() ? x.span : s->span,
                 "the pipeline loop's body reads a tile outside the stages; with preload the stages of an iteration "
                 "run later than the code between them, so read tiles inside a stage");
        }
      });
    };
    switch (s->kind) {
      case StmtKind::kSeq:
        for (const Stmt& c : s->stmts) check_context(c);
        return;
      case StmtKind::kSection: return;
      case StmtKind::kAssign:
        if (s->var->type.IsScalar()) {
          pure(s->value);
          context_vars.insert(s->var->id);
          return;
        }
        break;
      case StmtKind::kIf:
        pure(s->cond);
        check_context(s->body);
        check_context(s->orelse);
        return;
      default: break;
    }
    Refuse(s->span, "with preload the pipeline loop's body holds the stages' sections and scalar computations "
                    "only; do this inside a stage or before the loop");
  };
  check_context(loop.body);
  const std::vector<int64_t> delay = Delays(stages, options.preload);
  for (const Buffer& b : buffers) {
    const int64_t skew = delay[size_t(b.uses[1].stage)] - delay[size_t(b.uses[0].stage)];
    const int depth = b.group->group->depth;
    if (skew < 0 || depth < skew) {
      Refuse(b.group->span, "cross-core buffer '" + b.group->name + "' has " + std::to_string(depth) +
                                " slot(s) but with preload=" + std::to_string(options.preload) + " its producer '" +
                                stages[size_t(b.uses[0].stage)].name + "' runs " + std::to_string(skew) +
                                " iteration(s) ahead of its consumer '" + stages[size_t(b.uses[1].stage)].name +
                                "'; give it at least " + std::to_string(skew) + " slots or a smaller preload");
    }
  }
  const int64_t step = loop.step->int_value;
  const Var& v = loop.var;
  const DataType dtype = v->type.dtype;
  const Var beat = func.NewVar("pipeline_beat", Type::Scalar(dtype), at);
  // n = (stop - start + step - 1) / step (truncating; n <= 0 runs no stage)
  const bool from_zero = loop.start->IsIntConst() && loop.start->int_value == 0;
  Expr n = from_zero ? loop.stop : Binary(BinaryOp::kSub, loop.stop, loop.start, at);
  if (step != 1) {
    n = Binary(BinaryOp::kDiv, Binary(BinaryOp::kAdd, n, IntConst(step - 1, at), at), IntConst(step, at), at);
  }
  const int64_t max_delay = *std::max_element(delay.begin(), delay.end());
  auto iteration_value = [=](Expr j) {  // start + j * step, as the loop variable's type
    Expr value = step == 1 ? j : Binary(BinaryOp::kMul, j, IntConst(step, at), at);
    if (!from_zero) value = Binary(BinaryOp::kAdd, loop.start, value, at);
    return value->type.dtype != v->type.dtype ? Cast(value, v->type.dtype, at) : value;
  };

  // The context rings: for each stage, the context scalars it reads, each with depth slots (a stage
  // works on iteration beat - delay while the context code computes iteration beat).
  const int64_t depth = max_delay + 1;
  struct Ring {
    Var var;                 // the context variable
    Var copy;                // what the stage reads instead (the variable itself goes on computing)
    std::vector<Var> slots;
  };
  std::vector<std::vector<Ring>> rings(stages.size());
  for (size_t k = 0; k < stages.size(); ++k) {
    std::set<int> read;
    ForEachStmt(stages[k].stage->body, [&](const StmtNode& st) {
      auto note = [&](const Expr& e) {
        ForEachExpr(e, [&](const ExprNode& x) {
          if (x.kind == ExprKind::kVar && context_vars.count(x.var->id) && read.insert(x.var->id).second) {
            Ring ring{x.var, func.NewVar(x.var->name + "_" + stages[k].name, x.var->type, at), {}};
            for (int64_t r = 0; r < depth; ++r) {
              ring.slots.push_back(func.NewVar(x.var->name + "_ring" + std::to_string(r), x.var->type, at));
              const DataType t = x.var->type.dtype;
              rewrite.before_loop.push_back(Assign(ring.slots.back(),
                                                   IsFloat(t) ? FloatConst(0.0, at, t)
                                                   : t == DataType::kBool ? BoolConst(false, at)
                                                                          : IntConst(0, at, t), at));
            }
            rings[k].push_back(std::move(ring));
          }
        });
      };
      for (const Expr& e : {st.value, st.start, st.stop, st.step, st.cond}) note(e);
      for (const Expr& e : st.args) note(e);
    });
  }
  // Slot `index` of a ring (index = iteration % depth).
  auto slot_of = [=](const Ring& ring, const Expr& index) {
    Expr value = VarRef(ring.slots.back(), at);
    for (int64_t r = depth - 2; r >= 0; --r) {
      value = Ternary(Binary(BinaryOp::kEq, index, IntConst(r, at, index->type.dtype), at),
                      VarRef(ring.slots[size_t(r)], at), value, at);
    }
    return value;
  };
  auto store = [=](const Ring& ring, const Expr& index) {
    Stmt chain = Assign(ring.slots.back(), VarRef(ring.var, at), at);
    for (int64_t r = depth - 2; r >= 0; --r) {
      chain = If(Binary(BinaryOp::kEq, index, IntConst(r, at, index->type.dtype), at),
                 Assign(ring.slots[size_t(r)], VarRef(ring.var, at), at), chain, at);
    }
    return chain;
  };

  for (size_t k = 0; k < stages.size(); ++k) {
    const int64_t d = delay[k];
    const std::vector<Ring> stage_rings = rings[k];
    rewrite.wrap_stage[stages[k].stage] = [=](Stmt stage) -> Stmt {
      const Expr j = d == 0 ? VarRef(beat, at) : Binary(BinaryOp::kSub, VarRef(beat, at), IntConst(d, at), at);
      // beat - d in [0, n) (beat starts at 0, so the first stage needs no lower bound)
      Expr valid = Binary(BinaryOp::kLt, j, n, at);
      if (d > 0) valid = Binary(BinaryOp::kAnd, Binary(BinaryOp::kGe, VarRef(beat, at), IntConst(d, at), at), valid, at);
      std::vector<Stmt> body = {Assign(v, iteration_value(j), at)};
      const Expr index = Binary(BinaryOp::kMod, j, IntConst(depth, at, j->type.dtype), at);
      std::map<int, Var> copies;
      for (const Ring& ring : stage_rings) {
        body.push_back(Assign(ring.copy, slot_of(ring, index), at));
        copies[ring.var->id] = ring.copy;
      }
      body.push_back(copies.empty() ? stage : VarSubstitution(copies).Mutate(stage));
      return If(valid, Seq(std::move(body), at), nullptr, at);
    };
  }
  rewrite.reschedule = [=](const StmtNode&, Stmt body) -> Stmt {
    // The beat: the context code of iteration beat (when there is one), each stage's reads of it kept
    // where the stage stood, then the sections.
    std::vector<Stmt> context = {Assign(v, iteration_value(VarRef(beat, at)), at)}, sections;
    const Expr index = Binary(BinaryOp::kMod, VarRef(beat, at), IntConst(depth, at, dtype), at);
    size_t k = 0;
    std::function<void(const Stmt&)> split = [&](const Stmt& s) {
      if (!s) return;
      if (s->kind == StmtKind::kSeq) {
        for (const Stmt& c : s->stmts) split(c);
      } else if (s->kind == StmtKind::kSection) {
        for (const Ring& ring : rings[k]) context.push_back(store(ring, index));
        ++k;
        sections.push_back(s);
      } else {
        context.push_back(s);
      }
    };
    split(body);
    std::vector<Stmt> beat_body;
    if (context.size() > 1) beat_body.push_back(If(Binary(BinaryOp::kLt, VarRef(beat, at), n, at), Seq(context, at), nullptr, at));
    beat_body.insert(beat_body.end(), sections.begin(), sections.end());
    Expr stop = max_delay == 0 ? n : Binary(BinaryOp::kAdd, n, IntConst(max_delay, at), at);
    if (stop->type.dtype != dtype) stop = Cast(stop, dtype, at);
    return For(beat, IntConst(0, at, dtype), stop, IntConst(1, at, dtype), Seq(std::move(beat_body), at), at);
  };
}

}  // namespace

void CvPipeline(Function& func, const PassContext& ctx) {
  if (!ctx.pipeline) return;
  Finder finder;
  finder.Walk(func.body);
  if (finder.stages.empty()) {
    Refuse(func.body ? func.body->span : Span{},
           "the kernel has no @pl.pipeline.stage calls; the transform schedules a pl.range loop of stages",
           "split the loop body into stages, one per section, alternating cube and vector");
  }
  const std::vector<StageSite>& stages = finder.stages;
  for (size_t i = 1; i < stages.size(); ++i) {
    if (stages[i].core == stages[i - 1].core) {
      Refuse(stages[i].stage->span, "stages '" + stages[i - 1].name + "' and '" + stages[i].name + "' both run on the " +
                                        CoreName(stages[i].core) + " core; stages alternate cube and vector");
    }
  }

  // The cross-core buffers, in declaration order.
  std::vector<Buffer> buffers;
  ForEachStmt(func.body, [&](const StmtNode& s) {
    if (s.kind != StmtKind::kDeclTiles || !s.var->group) return;
    const TileGroupInfo& g = *s.var->group;
    if (g.fwd_ids.empty() && g.bwd_ids.empty()) return;
    if (std::any_of(buffers.begin(), buffers.end(), [&](const Buffer& b) { return b.group->id == s.var->id; })) return;
    buffers.push_back({s.var, {}});
  });
  std::map<int, std::pair<std::string, Span>> id_owner;  // event id -> buffer using it
  for (const Buffer& b : buffers) {
    const TileGroupInfo& g = *b.group->group;
    if (g.tile.memory != MemorySpace::kVec && g.tile.memory != MemorySpace::kMat) {
      Refuse(b.group->span, "cross-core buffer '" + b.group->name + "' is in " + std::string(Name(g.tile.memory)) +
                                "; cross-core buffers are in UB (Vec) or L1 (Mat)");
    }
    for (const std::vector<int>* ids : {&g.fwd_ids, &g.bwd_ids}) {
      for (int id : *ids) {
        auto [it, fresh] = id_owner.emplace(id, std::make_pair(b.group->name, b.group->span));
        if (!fresh && it->second.first != b.group->name) {
          Refuse(b.group->span, "cross-core event id " + std::to_string(id) + " of buffer '" + b.group->name +
                                    "' is also an id of buffer '" + it->second.first + "'; every buffer needs ids of "
                                    "its own");
        }
      }
    }
  }
  std::set<int> dispatched;  // lines of a run-time event_id= (its dispatch ends in index_fault)
  ForEachStmt(func.body, [&](const StmtNode& s) {
    if (s.kind == StmtKind::kOp && s.op->name == "index_fault") dispatched.insert(s.span.line);
  });
  ForEachStmt(func.body, [&](const StmtNode& s) {  // ids the kernel flags by hand, or a HARD barrier takes
    if (s.kind == StmtKind::kOp && s.op->name == "system.sync_all") {
      for (const Attr& a : s.attrs) {
        if (a.name != "mode" || a.value != 0) continue;  // HARD: the FFTS barrier uses cross-core ids 11..14
        for (int id = 11; id <= 14; ++id) {
          if (id_owner.count(id)) {
            Refuse(s.span, "this pl.system.sync_all (mode=HARD) uses cross-core event ids 11..14 and the pipeline's "
                           "buffer '" + id_owner.at(id).first + "' uses " + std::to_string(id) +
                           "; give the buffer ids outside 11..14");
          }
        }
      }
      return;
    }
    if (s.kind != StmtKind::kOp || (s.op->name != "system.set_cross_core" && s.op->name != "system.wait_cross_core")) {
      return;
    }
    for (const Attr& a : s.attrs) {
      if (a.name == "event_id" && id_owner.count(int(a.value))) {
        if (dispatched.count(s.span.line)) {  // one branch of a run-time event_id's dispatch
          Refuse(s.span, "this cross-core flag's event_id is computed at run time and may be " + std::to_string(a.value) +
                             ", which the pipeline's buffer '" + id_owner.at(int(a.value)).first + "' uses",
                 "give this flag a constant event_id outside the pipeline's ids");
        }
        Refuse(s.span, "cross-core event id " + std::to_string(a.value) + " is used here and by the pipeline's buffer '" +
                           id_owner.at(int(a.value)).first + "'; give the buffer other ids");
      }
    }
  });

  // Who uses each buffer: one stage writes it, one stage on the other core reads it.
  const StmtNode& loop = *finder.loop;
  for (Buffer& b : buffers) {
    int total_selects = 0;
    ForEachStmt(func.body, [&](const StmtNode& s) {
      if (s.kind == StmtKind::kSelectTile && s.group->id == b.group->id) ++total_selects;
    });
    int in_stages = 0;
    for (size_t i = 0; i < stages.size(); ++i) {
      BufferUse use = UseOf(b.group, *stages[i].stage);
      in_stages += use.next_selects + use.other_selects;
      if (use.next_selects + use.other_selects == 0) continue;
      if (use.next_selects != 1 || use.other_selects != 0) {
        Refuse(use.select_span, "stage '" + stages[i].name + "' must take a slot of cross-core buffer '" +
                                    b.group->name + "' with exactly one " + b.group->name +
                                    ".next() per iteration (the slots rotate with the iterations)");
      }
      use.stage = int(i);
      b.uses.push_back(use);
    }
    if (in_stages != total_selects) {
      Refuse(b.group->span, "cross-core buffer '" + b.group->name + "' is used outside the pipeline's stages; only "
                                "its two stages may take its slots");
    }
    if (b.uses.size() != 2) {
      Refuse(b.group->span, "cross-core buffer '" + b.group->name + "' is used by " + std::to_string(b.uses.size()) +
                                " stage(s); it needs exactly two, one on the cube core and one on the vector core "
                                "(a producer and its consumer)");
    }
    if (stages[size_t(b.uses[0].stage)].core == stages[size_t(b.uses[1].stage)].core) {
      Refuse(b.group->span, "cross-core buffer '" + b.group->name + "' is used by stages '" +
                                stages[size_t(b.uses[0].stage)].name + "' and '" + stages[size_t(b.uses[1].stage)].name +
                                "' on the same core; a cross-core buffer joins a cube stage and a vector stage");
    }
    for (const BufferUse& use : b.uses) {
      if (use.accesses.empty()) {
        Refuse(use.select_span, "stage '" + stages[size_t(use.stage)].name + "' takes a slot of '" + b.group->name +
                                    "' but no op uses it");
      }
    }
    const BufferUse& producer = b.uses[0];
    if (std::none_of(producer.accesses.begin(), producer.accesses.end(), [](const auto& a) { return a.second; })) {
      Refuse(producer.first_span, "stage '" + stages[size_t(producer.stage)].name + "' is the first to use cross-core "
                                      "buffer '" + b.group->name + "' but does not write it: it would wait for data a later stage writes, "
                                      "forever (a deadlock); the producer comes first in the loop");
    }
  }

  // The slot of the iteration: (i - start) / step modulo the depth.
  const Var& v = loop.var;
  const Span at = loop.span;
  Expr iteration = VarRef(v, at);
  if (!(loop.start->IsIntConst() && loop.start->int_value == 0)) {
    iteration = Binary(BinaryOp::kSub, iteration, loop.start, at);
  }
  if (!(loop.step->IsIntConst() && loop.step->int_value == 1)) {
    iteration = Binary(BinaryOp::kFloorDiv, iteration, loop.step, at);
  }

  Rewriter rewrite;
  rewrite.loop = finder.loop;
  for (const Buffer& b : buffers) {
    const TileGroupInfo& g = *b.group->group;
    const Expr slot = g.depth == 1 ? IntConst(0, at) : Binary(BinaryOp::kMod, iteration, IntConst(g.depth, at), at);
    const BufferUse &producer = b.uses[0], &consumer = b.uses[1];
    const StageSite &p = stages[size_t(producer.stage)], &c = stages[size_t(consumer.stage)];
    Pipe last_write = producer.accesses.front().first;
    for (const auto& [pipe, writes] : producer.accesses) {
      if (writes) last_write = pipe;
    }
    const Pipe p_first = producer.accesses.front().first, c_first = consumer.accesses.front().first;
    const Pipe c_last = consumer.accesses.back().first;
    for (const auto& [pipe, who] : {std::pair{last_write, &p}, std::pair{c_last, &c}}) {
      if (pipe == Pipe::kS || pipe == Pipe::kALL) {
        Refuse(who->stage->span, "stage '" + who->name + "' last uses cross-core buffer '" + b.group->name +
                                     "' on the scalar pipe, which cannot set a cross-core flag to the other core",
                 "end the stage's use of the buffer with a tile op (a move, a vector op, a store)");
      }
    }
    auto& [p_before, p_after] = rewrite.around_stage[p.stage];
    auto& [c_before, c_after] = rewrite.around_stage[c.stage];
    if (!g.bwd_ids.empty()) {
      p_before.push_back(CrossCore(false, p_first, g.bwd_ids, slot, p.stage->span));
      c_after.push_back(CrossCore(true, c_last, g.bwd_ids, slot, c.stage->span));
      rewrite.before_loop.push_back(EverySlot(true, c_last, g.bwd_ids, c.core, at));
      rewrite.after_loop.push_back(EverySlot(false, p_first, g.bwd_ids, p.core, at));
    }
    if (!g.fwd_ids.empty()) {
      p_after.push_back(CrossCore(true, last_write, g.fwd_ids, slot, p.stage->span));
      c_before.push_back(CrossCore(false, c_first, g.fwd_ids, slot, c.stage->span));
    }
  }
  if (!ctx.pipeline->sync_only) Schedule(func, *ctx.pipeline, finder, buffers, stages, rewrite);
  func.body = rewrite.Mutate(func.body);
}

}  // namespace pypto_pro::passes
