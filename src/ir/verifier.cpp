#include "pypto_pro/ir/verifier.h"

#include <optional>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/visitor.h"

namespace pypto_pro::ir {

namespace {

std::string MemoryList(uint32_t mask) {
  std::string s;
  for (uint32_t m = 0; m < uint32_t(MemorySpace::kCount); ++m) {
    if (mask & (1u << m)) s += (s.empty() ? "" : " or ") + std::string(Name(MemorySpace(m)));
  }
  return s;
}

std::string DTypeList(uint32_t mask) {
  std::string s;
  for (uint32_t d = 0; d < uint32_t(DataType::kCount); ++d) {
    if (mask & (1u << d)) s += (s.empty() ? "" : ", ") + std::string(Name(DataType(d)));
  }
  return s;
}

class Verifier : public IRVisitor {
 public:
  explicit Verifier(const Function& func) : func_(func) {}

  void Run() {
    for (const Var& p : func_.params) {
      if ((!p->type.IsTensor() && !p->type.IsScalar() && !p->type.IsPtr() && p->type.kind != TypeKind::kStruct) ||
          (p->type.IsTensor() && p->type.tensor->view)) {
        Fail(ErrorKind::kInternal, p->span,
             "parameter '" + p->name + "' must be a tensor, a pointer, a scalar or TilingData");
      }
      defined_.insert(p->id);
    }
    // Python scoping: a name assigned anywhere in the function may be read anywhere after it.
    ForEachStmt(func_.body, [&](const StmtNode& s) {
      if (s.var) defined_.insert(s.var->id);
      if (s.kind == StmtKind::kSubview) views_[s.var->id] = s.span.line;
    });
    // A tile variable assigned a subview is one too (to a fixed point).
    for (bool changed = true; changed;) {
      changed = false;
      ForEachStmt(func_.body, [&](const StmtNode& s) {
        if (s.kind == StmtKind::kAssign && s.var->type.IsTile() && s.value->kind == ExprKind::kVar &&
            views_.count(s.value->var->id) && !views_.count(s.var->id)) {
          views_[s.var->id] = views_[s.value->var->id];
          changed = true;
        }
      });
    }
    if (!func_.body) Fail(ErrorKind::kInternal, {}, "kernel '" + func_.name + "' has no body");
    Visit(func_.body);
    CheckSectionPlacement();
    CheckCrossCoreSync();
    CheckSyncAll();
  }

 private:
  void CheckDefined(const Expr& e, Span span) {
    ForEachExpr(e, [&](const ExprNode& node) {
      if (node.var && !defined_.count(node.var->id)) {
        Fail(ErrorKind::kUndefined, node.span.valid() ? node.span : span,
             "variable '" + node.var->name + "' is used but never assigned");
      }
    });
  }

  // A GM view variable takes views of its dtype and rank whose fixed dims agree (a view variable
  // may also copy a tensor parameter).
  static bool SameView(const TensorType& var, const TensorType& value) {
    if (var.dtype != value.dtype || var.dims.size() != value.dims.size() || !var.view) return false;
    for (size_t i = 0; i < var.dims.size(); ++i) {
      if (var.dims[i].kind == DimKind::kFixed && value.dims[i].value != var.dims[i].value) return false;
    }
    return true;
  }

  void RequireInt(const Expr& e, Span span, const std::string& what) {
    if (!e || !e->type.IsScalar() || IsFloat(e->type.dtype)) {
      Fail(ErrorKind::kType, e && e->span.valid() ? e->span : span,
           what + " must be an integer scalar, got " + (e ? e->type.ToString() : "nothing"));
    }
    CheckDefined(e, span);
  }

  void VisitStmt(const StmtNode& node) override {
    const StmtNode* s = &node;
    switch (s->kind) {
      case StmtKind::kSeq: VisitChildrenOf(node); break;
      case StmtKind::kAssign:
        if (!s->value) Fail(ErrorKind::kInternal, s->span, "assignment without a value");
        CheckDefined(s->value, s->span);
        if (s->var->type.kind != s->value->type.kind ||
            ((s->var->type.IsScalar() || s->var->type.IsPtr()) && s->var->type.dtype != s->value->type.dtype) ||
            (s->var->type.IsTile() && !(*s->var->type.tile == *s->value->type.tile)) ||
            (s->var->type.IsTensor() && !SameView(*s->var->type.tensor, *s->value->type.tensor))) {
          Fail(ErrorKind::kType, s->span,
               "cannot assign a value of type " + s->value->type.ToString() + " to '" + s->var->name + "' of type " +
                   s->var->type.ToString());
        }
        break;
      case StmtKind::kFor:
        if (!s->var->type.IsScalar() || IsFloat(s->var->type.dtype)) {
          Fail(ErrorKind::kType, s->span, "loop variable '" + s->var->name + "' must be an integer");
        }
        RequireInt(s->start, s->span, "pl.range start");
        RequireInt(s->stop, s->span, "pl.range stop");
        RequireInt(s->step, s->span, "pl.range step");
        if (s->step->IsIntConst() && s->step->int_value == 0) {
          Fail(ErrorKind::kValue, s->step->span.valid() ? s->step->span : s->span, "pl.range step must not be zero");
        }
        ++loop_depth_;
        Visit(s->body);
        --loop_depth_;
        break;
      case StmtKind::kWhile:
        CheckCond(node);
        ++loop_depth_;
        Visit(s->body);
        --loop_depth_;
        break;
      case StmtKind::kIf:
        CheckCond(node);
        Visit(s->body);
        Visit(s->orelse);
        break;
      case StmtKind::kBreak:
      case StmtKind::kContinue:
        if (loop_depth_ == 0) {
          Fail(ErrorKind::kSyntax, s->span,
               std::string("'") + (s->kind == StmtKind::kBreak ? "break" : "continue") + "' outside a loop");
        }
        break;
      case StmtKind::kReturn: break;
      case StmtKind::kOp: VisitOp(*s); break;
      case StmtKind::kDeclTiles: VisitDeclTiles(*s); break;
      case StmtKind::kSelectTile: VisitSelect(*s); break;
      case StmtKind::kSubview: VisitSubview(*s); break;
      case StmtKind::kReinterpret: VisitReinterpret(*s); break;
      case StmtKind::kStage:
      case StmtKind::kDirectRun:
      case StmtKind::kDirectLoop:
      case StmtKind::kFusedOps:
      case StmtKind::kForwardedMove:
      case StmtKind::kForwardedReads:
      case StmtKind::kInPlaceLoad:
      case StmtKind::kKLoop: Visit(s->body); break;
      case StmtKind::kSection:
        if (in_section_) Fail(ErrorKind::kSyntax, s->span, "sections cannot be nested");
        in_section_ = true;
        VisitChildrenOf(node);
        in_section_ = false;
        break;
    }
  }

  void CheckCond(const StmtNode& s) {
    if (!s.cond || !s.cond->type.IsScalar()) Fail(ErrorKind::kType, s.span, "condition must be a scalar");
    CheckDefined(s.cond, s.span);
  }

  void VisitOp(const StmtNode& s) {
    const OpDef& op = *s.op;
    std::string where = "pl." + std::string(op.PublicName());
    if (op.sync.event == SyncEvent::kValidShape && !s.args.empty() && s.args[0] && s.args[0]->var &&
        views_.count(s.args[0]->var->id)) {
      Fail(ErrorKind::kType, s.args[0]->span.valid() ? s.args[0]->span : s.span,
           where + ": '" + s.args[0]->var->name + "' is a subview (line " +
               std::to_string(views_.at(s.args[0]->var->id)) +
               "): its window is its slice, clamped to the viewed tile's; set the window of that tile instead");
    }
    if (s.args.size() != op.operands.size()) {
      Fail(ErrorKind::kType, s.span,
           where + " takes " + std::to_string(op.operands.size()) + " operands, got " + std::to_string(s.args.size()));
    }
    const ExprNode* tensor = nullptr;
    const ExprNode* first_data = nullptr;  // the operand the others of a same-dtype op must match
    std::string_view first_data_name;
    for (size_t i = 0; i < s.args.size(); ++i) {
      const OperandSpec& spec = op.operands[i];
      const Expr& arg = s.args[i];
      Span span = arg && arg->span.valid() ? arg->span : s.span;
      std::string name = where + " operand '" + std::string(spec.name) + "'";
      if (!arg) Fail(ErrorKind::kInternal, s.span, name + " is missing");
      CheckDefined(arg, s.span);
      switch (spec.kind) {
        case OperandKind::kTile:
          if (!arg->type.IsTile()) Fail(ErrorKind::kType, span, name + " must be a tile, got " + arg->type.ToString());
          if (!(spec.memories & Bit(arg->type.tile->memory))) {
            Fail(ErrorKind::kType, span,
                 name + " must be a tile in " + MemoryList(spec.memories) + " memory, got " + arg->type.ToString());
          }
          break;
        case OperandKind::kTensor:
          if (!arg->type.IsTensor()) {
            Fail(ErrorKind::kType, span, name + " must be a GM tensor, got " + arg->type.ToString());
          }
          tensor = arg.get();
          break;
        case OperandKind::kOffsets:
          if (arg->kind != ExprKind::kTuple) Fail(ErrorKind::kType, span, name + " must be a list of indices");
          for (const Expr& item : arg->operands) RequireInt(item, span, name + " entry");
          if (arg->operands.empty() || arg->operands.size() > 8) {
            Fail(ErrorKind::kType, span, name + " needs 1 to 8 entries, got " + std::to_string(arg->operands.size()));
          }
          break;
        case OperandKind::kScalar:
          if (!arg->type.IsScalar()) Fail(ErrorKind::kType, span, name + " must be a scalar, got " + arg->type.ToString());
          break;
        case OperandKind::kTiles:
          if (arg->kind != ExprKind::kTuple) Fail(ErrorKind::kType, span, name + " must be a list of tiles");
          for (const Expr& item : arg->operands) {
            if (!item->type.IsTile()) Fail(ErrorKind::kType, span, name + " must hold only tiles");
          }
          break;
        case OperandKind::kScalars:
          if (arg->kind != ExprKind::kTuple) Fail(ErrorKind::kType, span, name + " must be a list of scalars");
          break;
        case OperandKind::kIndex:
          if (arg->kind == ExprKind::kTuple) {
            for (const Expr& item : arg->operands) RequireInt(item, span, name + " entry");
          } else {
            RequireInt(arg, span, name);
          }
          break;
        case OperandKind::kWorkspaces:  // sorted out by the op's check
          if (arg->kind != ExprKind::kTuple) Fail(ErrorKind::kType, span, name + " must be a list");
          break;
        case OperandKind::kContainer:
          if (arg->type.IsTile()) {
            if (!(spec.memories & Bit(arg->type.tile->memory))) {
              Fail(ErrorKind::kType, span,
                   name + " must be a tile in " + MemoryList(spec.memories) + " memory or a GM tensor, got " +
                       arg->type.ToString());
            }
          } else if (!arg->type.IsTensor()) {
            Fail(ErrorKind::kType, span, name + " must be a tile or a GM tensor, got " + arg->type.ToString());
          }
          break;
      }
      bool is_data = spec.kind == OperandKind::kTile || spec.kind == OperandKind::kTensor ||
                     spec.kind == OperandKind::kContainer;
      if (!is_data) continue;
      uint32_t allowed = spec.dtypes ? spec.dtypes : op.dtypes;
      if (!(allowed & Bit(arg->type.dtype))) {
        Fail(ErrorKind::kType, span, name + " has dtype " + std::string(Name(arg->type.dtype)) +
                                         ", which " + where + " does not support there (it takes " +
                                         DTypeList(allowed) + ")");
      }
      if (spec.dtypes) continue;  // an operand with its own dtype rule (masks, indices, casts)
      if (op.same_dtype && first_data && first_data->type.dtype != arg->type.dtype) {
        Fail(ErrorKind::kType, span,
             where + ": dtype mismatch: operand '" + std::string(spec.name) + "' is " +
                 std::string(Name(arg->type.dtype)) + " but '" + std::string(first_data_name) + "' is " +
                 std::string(Name(first_data->type.dtype)));
      }
      if (!first_data) {
        first_data = arg.get();
        first_data_name = spec.name;
      }
    }
    CheckShapes(s, where, tensor);
    if (op.check) op.check(s);
  }

  void CheckShapes(const StmtNode& s, const std::string& where, const ExprNode* tensor) {
    const OpDef& op = *s.op;
    if (tensor) {
      size_t rank = tensor->type.tensor->dims.size();
      for (size_t i = 0; i < s.args.size(); ++i) {
        if (op.operands[i].kind != OperandKind::kOffsets) continue;
        if (s.args[i]->operands.size() != rank) {
          Fail(ErrorKind::kType, s.args[i]->span.valid() ? s.args[i]->span : s.span,
               where + ": '" + std::string(op.operands[i].name) + "' needs one entry per axis of tensor '" +
                   tensor->var->name + "' (" + std::to_string(rank) + "), got " +
                   std::to_string(s.args[i]->operands.size()));
        }
      }
      for (const Expr& arg : s.args) {
        if (arg->type.IsTile() && arg->type.tile->shape.size() > rank) {
          Fail(ErrorKind::kType, s.span,
               where + ": a " + std::to_string(arg->type.tile->shape.size()) + "-D tile cannot move to or from the " +
                   std::to_string(rank) + "-D tensor '" + tensor->var->name + "'");
        }
      }
    }
    if (op.window == WindowRule::kDestination || op.window == WindowRule::kSource || op.window == WindowRule::kPart) {
      CheckTileShapes(s, where);
    }
  }

  // Each tile operand against the reference shape (the first kSame tile) by its ShapeRole.
  void CheckTileShapes(const StmtNode& s, const std::string& where) {
    const OpDef& op = *s.op;
    const TileType* ref = nullptr;
    std::string_view ref_name;
    for (size_t i = 0; i < s.args.size(); ++i) {
      if (op.operands[i].kind != OperandKind::kTile || op.operands[i].shape != ShapeRole::kSame) continue;
      const TileType& t = *s.args[i]->type.tile;
      if (ref && ref->shape != t.shape) {
        Fail(ErrorKind::kType, ArgSpan(s, i),
             where + ": operand '" + std::string(op.operands[i].name) + "' has shape " + t.ToString() + " but '" +
                 std::string(ref_name) + "' is " + ref->ToString());
      }
      if (!ref) {
        ref = &t;
        ref_name = op.operands[i].name;
      }
    }
    if (!ref) return;
    for (size_t i = 0; i < s.args.size(); ++i) {
      const OperandSpec& spec = op.operands[i];
      if (spec.kind != OperandKind::kTile || (spec.shape != ShapeRole::kColumn && spec.shape != ShapeRole::kRow)) {
        continue;
      }
      const TileType& t = *s.args[i]->type.tile;
      bool column = spec.shape == ShapeRole::kColumn;
      int64_t rows = column ? ref->Rows() : 1, cols = column ? 1 : ref->Cols();
      if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols) {
        Fail(ErrorKind::kType, ArgSpan(s, i),
             where + ": operand '" + std::string(spec.name) + "' must have shape [" + std::to_string(rows) + ", " +
                 std::to_string(cols) + "] (one value per " + (column ? "row" : "column") + " of '" +
                 std::string(ref_name) + "' " + ref->ToString() + "), got " + t.ToString());
      }
    }
  }

  static Span ArgSpan(const StmtNode& s, size_t i) {
    return s.args[i]->span.valid() ? s.args[i]->span : s.span;
  }

  void VisitDeclTiles(const StmtNode& s) {
    const Var& var = s.var;
    if (var->type.kind != TypeKind::kTileGroup || !var->group) {
      Fail(ErrorKind::kInternal, s.span, "'" + var->name + "' is not a tile group");
    }
    const TileGroupInfo& g = *var->group;
    if (g.depth < 1 || int(g.addrs.size()) != g.depth) {
      Fail(ErrorKind::kValue, s.span,
           "tile group '" + var->name + "' has depth " + std::to_string(g.depth) + " but " +
               std::to_string(g.addrs.size()) + " addresses");
    }
    if (!g.mutex_ids.empty() && int(g.mutex_ids.size()) != g.depth) {
      Fail(ErrorKind::kValue, s.span, "tile group '" + var->name + "' needs one mutex id entry per slot");
    }
    for (const auto& ids : g.mutex_ids) {
      for (int id : ids) {
        if (id < 0 || id > 31) {
          Fail(ErrorKind::kType, s.span, "mutex id " + std::to_string(id) + " is out of range [0, 31]");
        }
      }
    }
  }

  void VisitSubview(const StmtNode& s) {
    if (!s.value || !s.value->type.IsTile() || s.value->kind != ExprKind::kVar) {
      Fail(ErrorKind::kType, s.span, "only a tile can be sliced into a subview");
    }
    CheckDefined(s.value, s.span);
    const TileType &tile = *s.value->type.tile, &view = *s.var->type.tile;
    if (tile.shape.size() != 2) {
      Fail(ErrorKind::kType, s.span, "a subview slices a 2-D tile: " + tile.ToString() + " is 1-D");
    }
    if (!(view.dtype == tile.dtype && view.shape == tile.shape && view.memory == tile.memory &&
          view.layout == tile.layout && view.pad == 0)) {
      Fail(ErrorKind::kInternal, s.span, "a subview keeps its tile's type: " + view.ToString() + " of " +
                                             tile.ToString());
    }
    if (s.args.size() != 4) Fail(ErrorKind::kInternal, s.span, "a subview takes row and column bounds");
    for (const Expr& bound : s.args) RequireInt(bound, s.span, "a subview bound");
  }

  // pl.reinterpret: the same bytes of one memory, no more of them; the simulator keeps tiles in logical
  // row-major order, which is the NPU's byte order for ND tiles only, so fractal and column-major
  // tiles are reinterpreted only as themselves.
  void VisitReinterpret(const StmtNode& s) {
    if (!s.value || !s.value->type.IsTile() || s.value->kind != ExprKind::kVar) {
      Fail(ErrorKind::kType, s.span, "pl.reinterpret takes a tile");
    }
    CheckDefined(s.value, s.span);
    const TileType &tile = *s.value->type.tile, &view = *s.var->type.tile;
    const std::string what = "pl.reinterpret of tile '" + s.value->var->name + "' (" + tile.ToString() + ") as " +
                             view.ToString();
    if (views_.count(s.value->var->id)) {
      Fail(ErrorKind::kUnsupported, s.span,
           what + ": reinterpreting a subview is not implemented yet (its bytes need not start at an address the "
                  "new dtype is aligned to); reinterpret the whole tile");
    }
    if (view.memory != tile.memory) {
      Fail(ErrorKind::kType, s.span, what + ": a view keeps its tile's memory");
    }
    const int64_t bytes = tile.Rows() * tile.Cols() * Info(tile.dtype).bits / 8;
    const int64_t view_bytes = view.Rows() * view.Cols() * Info(view.dtype).bits / 8;
    if (view_bytes > bytes) {
      Fail(ErrorKind::kValue, s.span,
           what + ": the view needs " + std::to_string(view_bytes) + " bytes but the tile has " +
               std::to_string(bytes) + "; a view may not reach past its tile");
    }
    if ((ReorderedBytes(tile) || ReorderedBytes(view)) && !ir::SameView(tile, view)) {
      Fail(ErrorKind::kUnsupported, s.span,
           what + ": reading fractal (NZ/ZN) or column-major (DN) bytes as another tile type is not implemented yet "
                  "(the simulator keeps tiles in logical order, docs/device.md#cube-layouts)");
    }
  }

  void VisitSelect(const StmtNode& s) {
    if (!s.group || s.group->type.kind != TypeKind::kTileGroup) {
      Fail(ErrorKind::kType, s.span, "tiles can only be selected from a tile group");
    }
    if (!s.var->type.IsTile() || !(*s.var->type.tile == *s.group->type.tile)) {
      Fail(ErrorKind::kType, s.span,
           "cannot bind a tile of group '" + s.group->name + "' (" + s.group->type.tile->ToString() + ") to '" +
               s.var->name + "' of type " + s.var->type.ToString());
    }
    if (s.mode == SelectMode::kIndex) {
      RequireInt(s.value, s.span, "tile group index");
      if (s.value->IsIntConst() && (s.value->int_value < 0 || s.value->int_value >= s.group->group->depth)) {
        Fail(ErrorKind::kType, s.value->span.valid() ? s.value->span : s.span,
             "index " + std::to_string(s.value->int_value) + " is out of range for tile group '" + s.group->name +
                 "' of depth " + std::to_string(s.group->group->depth));
      }
    }
  }

  // Ops on Vec tiles run on vector cores, ops on cube memories on cube cores; a move runs on the
  // core that owns its pipe (CoreSides).
  void CheckSectionPlacement() {
    bool has_sections = false;
    ForEachStmt(func_.body, [&](const StmtNode& s) { has_sections |= s.kind == StmtKind::kSection; });
    struct Placement : IRVisitor {
      bool has_sections = false;
      std::optional<bool> first_side;  // without sections every op runs on one kind of core
      void VisitStmt(const StmtNode& s) override {
        if (s.kind == StmtKind::kOp && s.op->window != WindowRule::kNone) Check(s);  // descriptors go anywhere
        VisitChildrenOf(s);
      }
      void Check(const StmtNode& s) {
        const std::optional<SectionKind> in = section();
        for (const CoreSide& side : CoreSides(s)) {
          bool cube = side.cube;
          std::string op = "pl." + std::string(s.op->PublicName());
          if (!in && !has_sections) {
            if (first_side && *first_side != cube) {
              Fail(ErrorKind::kSyntax, s.span,
                   op + " uses " + side.what + " while the kernel also uses " + (cube ? "Vec" : "cube") +
                       " memory; a kernel without sections runs on one kind of core",
                   "put vector code in 'with pl.section_vector():' and cube code in 'with pl.section_cube():'");
            }
            first_side = cube;
          }
          if (!in && has_sections) {
            Fail(ErrorKind::kSyntax, s.span, op + " on " + side.what + " is outside any section",
                 std::string("put it inside 'with pl.section_") + (cube ? "cube" : "vector") + "():'");
          }
          if (in == SectionKind::kVector && cube) {
            Fail(ErrorKind::kType, s.span,
                 op + " uses " + side.what + " inside pl.section_vector(); " +
                     (side.is_move ? "the move runs on the cube core" : "vector cores only reach Vec memory"));
          }
          if (in == SectionKind::kCube && !cube) {
            Fail(ErrorKind::kType, s.span,
                 op + " uses " + side.what + " inside pl.section_cube(); " +
                     (side.is_move ? "the move runs on the vector core"
                                   : "cube cores reach Mat/Left/Right/Acc memory"));
          }
        }
      }
    } placement;
    placement.has_sections = has_sections;
    placement.Visit(func_.body);
  }

  // Cross-core flags pair the cube core of a logical block with its two vector cores: a kernel
  // without both kinds of section has no partner to signal, and its wait would never return.
  // INTER_BLOCK pairs every core of one kind of the launch, which any kernel has.
  void CheckCrossCoreSync() {
    const StmtNode* first = nullptr;
    ForEachStmt(func_.body, [&](const StmtNode& s) {
      if (first || s.kind != StmtKind::kOp || !s.op->sync.CrossCore()) return;
      for (const Attr& a : s.attrs) {
        if (a.name == "sync_mode" && a.value == int64_t(hw::CrossCoreSyncMode::kINTER_BLOCK)) return;
      }
      first = &s;
    });
    KernelKind kind = KernelKindOf(func_);
    if (!first || kind == KernelKind::kMixed) return;
    Fail(ErrorKind::kSyntax, first->span,
         "pl." + std::string(first->op->name) + " synchronises the cube and vector cores of a mixed kernel, but '" +
             func_.name + "' is a " + Name(kind) + " kernel",
         "a kernel with both 'with pl.section_cube():' and 'with pl.section_vector():' runs 1 AIC + 2 AIV per block");
  }

  // sync_all's core_type names the cores that reach it: the kernel's own in a vector or cube kernel;
  // in a mixed kernel AIV_ONLY inside pl.section_vector(), AIC_ONLY inside pl.section_cube(), MIX in
  // either (both must call it).
  void CheckSyncAll() {
    const KernelKind kind = KernelKindOf(func_);
    struct Finder : IRVisitor {
      const Function* func = nullptr;
      KernelKind kind = KernelKind::kVector;
      void VisitStmt(const StmtNode& s) override {
        if (s.kind == StmtKind::kOp && s.op->PublicName() == "system.sync_all") Check(s);
        VisitChildrenOf(s);
      }
      void Check(const StmtNode& s) {
        static const char* const kTypes[] = {"AIV_ONLY", "AIC_ONLY", "MIX"};
        int64_t core_type = 2;
        for (const Attr& a : s.attrs) {
          if (a.name == "core_type") core_type = a.value;
        }
        const std::string what = "pl.system.sync_all(core_type=pl.SyncCoreType." + std::string(kTypes[core_type]) +
                                 ") in '" + func->name + "'";
        if (kind != KernelKind::kMixed) {
          const int64_t want = kind == KernelKind::kVector ? 0 : 1;
          if (core_type == want) return;
          Fail(ErrorKind::kValue, s.span,
               what + ", a " + Name(kind) + " kernel: its barrier would wait for cores that never reach it (the "
                      "NPU hangs); use core_type=pl.SyncCoreType." + kTypes[want]);
        }
        const std::optional<SectionKind> where = section();
        if (!where) {
          Fail(ErrorKind::kValue, s.span,
               what + " outside the sections of a mixed kernel runs on the cube and the vector cores alike; call it "
                      "inside pl.section_cube() and/or pl.section_vector()");
        }
        if ((core_type == 0 && *where != SectionKind::kVector) || (core_type == 1 && *where != SectionKind::kCube)) {
          Fail(ErrorKind::kValue, s.span,
               what + " inside pl.section_" + Name(*where) + "(): the barrier holds the " +
                   (core_type == 0 ? "vector" : "cube") + " cores, which never run this section");
        }
      }
    } finder;
    finder.func = &func_;
    finder.kind = kind;
    finder.Visit(func_.body);
  }

  const Function& func_;
  std::set<int> defined_;
  std::map<int, int> views_;  // tile variables bound to a subview -> the line of the slice
  int loop_depth_ = 0;
  bool in_section_ = false;
};

}  // namespace

void Verify(const Function& func) { Verifier(func).Run(); }

}  // namespace pypto_pro::ir
