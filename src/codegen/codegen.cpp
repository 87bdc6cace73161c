#include "pypto_pro/codegen/codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/support/source_line.h"
#include "pypto_pro/ir/visitor.h"
#include "launcher_writer.h"
#include "names.h"
#include "sanitizer_hooks.h"
#include "pypto_pro/op_lists.h"

namespace pypto_pro::codegen {

using namespace ir;

namespace {

// The device functor (vector_ops.h) of an element-wise op of op_lists.h.
std::string ElementwiseFunctor(std::string_view op) {
#define PTO_FUNCTOR_(name, functor) {#name, #functor},
  static const std::map<std::string_view, std::string_view> functors = {
      PTO_BINARY_OPS(PTO_FUNCTOR_) PTO_SCALAR_OPS(PTO_FUNCTOR_) PTO_UNARY_OPS(PTO_FUNCTOR_)};
#undef PTO_FUNCTOR_
  return std::string(functors.at(op));
}

std::string CommaList(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// `checks` joined by && (one per line, continued at `indent`), or "true".
std::string Conjunction(const std::vector<std::string>& checks, int indent) {
  std::string out;
  for (const std::string& check : checks) out += (out.empty() ? "" : " &&\n" + std::string(2 * indent, ' ')) + check;
  return out.empty() ? "true" : out;
}

// Whether tile `tile` (a C++ expression) has the rows x cols valid window.
std::string HasWindow(const std::string& tile, const std::string& rows, const std::string& cols) {
  return tile + ".valid_rows == " + rows + " && " + tile + ".valid_cols == " + cols;
}

// The functor of row_expand_<op> / col_expand_<op> (vector_broadcast.h).
std::string ExpandFunctor(std::string_view op) {
  static const std::map<std::string_view, std::string_view> functors = {
      {"add", "AddF"}, {"sub", "SubF"}, {"mul", "MulF"}, {"div", "DivF"}, {"max", "MaxF"}, {"min", "MinF"}};
  return std::string(functors.at(op));
}

const char* KindConstant(KernelKind kind) {
  switch (kind) {
    case KernelKind::kVector: return "PTO_KERNEL_VECTOR";
    case KernelKind::kCube: return "PTO_KERNEL_CUBE";
    case KernelKind::kMixed: return "PTO_KERNEL_MIXED";
  }
  return "PTO_KERNEL_VECTOR";
}

class KernelWriter {
 public:
  KernelWriter(const Function& func, const ArchModel& arch, const CodegenOptions& options)
      : func_(func),
        arch_(arch),
        instrument_(!options.sanitizer_report.empty() || options.profile),
        profile_(options.profile),
        debug_(options.debug),
        report_(options.sanitizer_report),
        dump_dir_(options.dump_dir) {}

  GeneratedSources Run() {
    kind_ = KernelKindOf(func_);
    CollectDecls(func_.body);
    GeneratedSources out;
    out.kind = kind_;
    if (const Var* tiling = TilingParam(func_)) {
      out.tiling_header_name = (*tiling)->type.strct->name + "_tiling.h";
      out.tiling_header = TilingHeader(*(*tiling)->type.strct);
    }
    out.kernel_cpp = KernelSource(out.tiling_header_name);
    out.call_kernel_cpp = LauncherSource(func_);
    return out;
  }

 private:
  // ---- names and types ----
  std::string TileTypeName(const TileType& t) {
    for (size_t i = 0; i < tile_types_.size(); ++i) {
      if (tile_types_[i] == t) return "Tile" + std::to_string(i);
    }
    tile_types_.push_back(t);
    return "Tile" + std::to_string(tile_types_.size() - 1);
  }
  std::string VarName(const Var& v) const { return CppIdent("v_", v.get()->name); }
  std::string GroupName(const Var& v) const { return CppIdent("g_", v->name); }
  // Its own prefix: a group named "a_cursor" must not meet group "a"'s cursor.
  std::string CursorName(const Var& v) const { return CppIdent("cur_", v->name); }
  std::string TensorName(const Var& v) const { return CppIdent("t_", v->name); }
  std::string ViewName(const Var& v) const { return CppIdent("view_", v->name); }
  std::string PtrName(const Var& v) const { return CppIdent("p_", v->name); }

  void CollectDecls(const Stmt& body) {
    ForEachStmt(body, [&](const StmtNode& s) {
      switch (s.kind) {
        case StmtKind::kAssign:
        case StmtKind::kFor:
        case StmtKind::kSelectTile:
        case StmtKind::kSubview:
        case StmtKind::kReinterpret:
          if (s.kind == StmtKind::kSubview || s.kind == StmtKind::kReinterpret) views_.insert(s.var->id);
          if (!IsParam(s.var) && declared_.insert(s.var->id).second) locals_.push_back(s.var);
          break;
        case StmtKind::kDeclTiles:
          if (declared_.insert(s.var->id).second) groups_.push_back(s.var);
          break;
        case StmtKind::kOp:
          // An op that moves no data but takes a GM tensor changes its descriptor (pl.set_stride).
          for (size_t i = 0; i < s.args.size(); ++i) {
            if (s.op->window == WindowRule::kNone && s.op->operands[i].kind == OperandKind::kTensor &&
                s.args[i]->kind == ExprKind::kVar) {
              restrided_.insert(s.args[i]->var->id);
            }
          }
          break;
        default: break;
      }
    });
  }

  // Only a kernel that dumps carries its dump directory: the others' code does not depend on where
  // they are built.
  bool HasDumps() const {
    bool found = false;
    ForEachStmt(func_.body, [&](const StmtNode& s) {
      found = found || (s.kind == StmtKind::kOp && s.op->PublicName() == "dump_data");
    });
    return found;
  }

  // pl.system.sync_all and INTER_BLOCK cross-core flags hold every block of the launch at once.
  bool IsParam(const Var& v) const {
    for (const Var& p : func_.params) {
      if (p->id == v->id) return true;
    }
    return false;
  }

  // ---- expressions ----
  std::string Const(const ExprNode& e) {
    if (e.type.dtype == DataType::kBool) return e.int_value ? "true" : "false";
    if (IsFloat(e.type.dtype)) {
      float f = float(e.float_value);
      if (std::isnan(f)) return "__builtin_nanf(\"\")";
      if (std::isinf(f)) return f > 0 ? "__builtin_inff()" : "(-__builtin_inff())";
      char buf[64];
      std::snprintf(buf, sizeof buf, "%af", f);
      return std::string("float(") + buf + ")";
    }
    if (e.type.dtype == DataType::kInt64) return "int64_t(" + std::to_string(e.int_value) + "LL)";
    return ScalarCType(e.type.dtype) + "(" + std::to_string(e.int_value) + ")";
  }

  std::string Expr_(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kConst: return Const(*e);
      case ExprKind::kVar:
        if (e->var->type.IsTensor()) return TensorName(e->var);
        if (e->var->type.IsPtr()) return PtrName(e->var);
        return VarName(e->var);
      case ExprKind::kMakeView: return MakeView(*e, "view");
      case ExprKind::kPtrOffset:
        if (e->type.dtype != e->operands[0]->type.dtype) {  // pl.make_ptr(ptr, dtype): the same address
          return "pto::CastPtr<" + DeviceType(e->type.dtype) + ">(ctx, " + std::to_string(e->span.line) + ", " +
                 Expr_(e->operands[0]) + ")";
        }
        return "pto::AddPtr(ctx, " + std::to_string(e->span.line) + ", " + Expr_(e->operands[0]) + ", int64_t(" +
               Expr_(e->operands[1]) + "))";
      case ExprKind::kBuiltin:
        switch (e->builtin) {
          case Builtin::kBlockIdx: return "ctx.block_idx";
          case Builtin::kBlockNum: return "ctx.block_num";
          case Builtin::kSubblockIdx: return "ctx.subblock_idx";
          case Builtin::kSubblockNum: return "ctx.subblock_num";
          case Builtin::kSpr: return "pto::get_spr(ctx)";
          case Builtin::kCtrlSpr:
            return "pto::get_ctrl_spr(ctx, " + std::to_string(e->operands[0]->int_value) + ", " +
                   std::to_string(e->operands[1]->int_value) + ")";
          case Builtin::kSaturationFlag:
            return "pto::get_saturation_flag(ctx, " + std::to_string(e->operands[0]->int_value) + ")";
        }
        break;
      case ExprKind::kShapeDim:
        return "int32_t(" + TensorName(e->var) + ".shape[" + std::to_string(e->axis) + "])";
      case ExprKind::kUnary:
        if (e->unary == UnaryOp::kBitNot) {  // in the result type: ~ of an int8 operand is an int32
          return "(~" + ScalarCType(e->type.dtype) + "(" + Expr_(e->operands[0]) + "))";
        }
        return std::string("(") + (e->unary == UnaryOp::kNeg ? "-" : "!") + Expr_(e->operands[0]) + ")";
      case ExprKind::kTernary: {
        std::string t = ScalarCType(e->type.dtype);
        return "(" + Expr_(e->operands[0]) + " ? " + t + "(" + Expr_(e->operands[1]) + ") : " + t + "(" +
               Expr_(e->operands[2]) + "))";
      }
      case ExprKind::kCast: return "static_cast<" + ScalarCType(e->type.dtype) + ">(" + Expr_(e->operands[0]) + ")";
      case ExprKind::kBinary: return Binary(*e);
      case ExprKind::kField: {
        const StructField& f = e->var->type.strct->fields[size_t(e->axis)];
        std::string base = VarName(e->var) + "." + CppIdent("", f.name);
        if (e->operands.empty()) return base;
        if (e->operands[0]->IsIntConst()) return base + "[" + std::to_string(e->operands[0]->int_value) + "]";
        return "pto::ArrayAt(ctx, " + std::to_string(e->span.line) + ", " + base + ", " + std::to_string(f.count) +
               ", " + Expr_(e->operands[0]) + ")";
      }
      case ExprKind::kElement: {
        std::string container = e->var->type.IsTile() ? "*" + VarName(e->var) : TensorName(e->var);
        std::string args = std::to_string(e->span.line) + ", " + container + ", int64_t(" + Expr_(e->operands[0]) + ")";
        if (instrument_) return "pto::san::getval(ctx, " + args + ", " + CString(e->var->name) + ")";
        return "pto::getval(ctx, " + args + ")";
      }
      case ExprKind::kValidShape:
        return VarName(e->var) + (e->axis == 0 ? "->valid_rows" : "->valid_cols");
      case ExprKind::kTuple: {
        std::string s = "pto::Idx<" + std::to_string(e->operands.size()) + ">{{";
        for (size_t i = 0; i < e->operands.size(); ++i) {
          s += (i ? ", " : "") + std::string("int64_t(") + Expr_(e->operands[i]) + ")";
        }
        return s + "}}";
      }
    }
    Fail(ErrorKind::kInternal, e->span, "codegen: unhandled expression");
  }

  // pl.make_tensor: pto::MakeView<T, N>(ctx, line, source, shape, has_stride, stride, name).
  std::string MakeView(const ExprNode& e, const std::string& name) {
    const size_t rank = size_t(e.axis);
    const bool has_stride = e.operands.size() > 1 + rank;
    auto list = [&](size_t first, bool given) {
      std::string s = "pto::Idx<" + std::to_string(rank) + ">{{";
      for (size_t i = 0; i < rank; ++i) {
        s += (i ? ", " : "") + (given ? "int64_t(" + Expr_(e.operands[first + i]) + ")" : std::string("0"));
      }
      return s + "}}";
    };
    return "pto::MakeView<" + DeviceType(e.type.dtype) + ", " + std::to_string(rank) + ">(ctx, " +
           std::to_string(e.span.line) + ", " + Expr_(e.operands[0]) + ", " + list(1, true) + ", " +
           (has_stride ? "true" : "false") + ", " + list(1 + rank, has_stride) + ", " + CString(name) + ")";
  }

  std::string Binary(const ExprNode& e) {
    const Expr& a = e.operands[0];
    const Expr& b = e.operands[1];
    DataType math = IsComparison(e.binary) || e.binary == BinaryOp::kAnd || e.binary == BinaryOp::kOr
                        ? PromoteScalar(a->type.dtype, b->type.dtype)
                        : e.type.dtype;
    std::string t = ScalarCType(math);
    // Operands already of the math type need no conversion (keeps kernel.cpp readable).
    auto as_math = [&](const Expr& e) {
      return e->type.dtype == math ? Expr_(e) : t + "(" + Expr_(e) + ")";
    };
    std::string x = as_math(a), y = as_math(b);
    std::string line = std::to_string(e.span.line);
    bool is_float = IsFloat(math);
    switch (e.binary) {
      case BinaryOp::kAdd: return "(" + x + " + " + y + ")";
      case BinaryOp::kSub: return "(" + x + " - " + y + ")";
      case BinaryOp::kMul: return "(" + x + " * " + y + ")";
      case BinaryOp::kDiv:
      case BinaryOp::kFloorDiv:
        if (is_float) return e.binary == BinaryOp::kDiv ? "(" + x + " / " + y + ")" : "pto::FloorDiv(" + x + ", " + y + ")";
        if (b->IsIntConst() && b->int_value != 0 && b->int_value != -1) return "(" + x + " / " + y + ")";
        return "pto::IntDiv<" + t + ">(ctx, " + line + ", " + x + ", " + y + ")";
      case BinaryOp::kMod:
        if (is_float) return "pto::FloatMod(" + x + ", " + y + ")";
        if (b->IsIntConst() && b->int_value != 0 && b->int_value != -1) return "(" + x + " % " + y + ")";
        return "pto::IntMod<" + t + ">(ctx, " + line + ", " + x + ", " + y + ")";
      case BinaryOp::kMin: return "pto::Min<" + t + ">(" + x + ", " + y + ")";
      case BinaryOp::kMax: return "pto::Max<" + t + ">(" + x + ", " + y + ")";
      case BinaryOp::kEq: return "(" + x + " == " + y + ")";
      case BinaryOp::kNe: return "(" + x + " != " + y + ")";
      case BinaryOp::kLt: return "(" + x + " < " + y + ")";
      case BinaryOp::kLe: return "(" + x + " <= " + y + ")";
      case BinaryOp::kGt: return "(" + x + " > " + y + ")";
      case BinaryOp::kGe: return "(" + x + " >= " + y + ")";
      case BinaryOp::kAnd: return "(bool(" + Expr_(a) + ") && bool(" + Expr_(b) + "))";
      case BinaryOp::kOr: return "(bool(" + Expr_(a) + ") || bool(" + Expr_(b) + "))";
      case BinaryOp::kBitAnd: return t + "(" + x + " & " + y + ")";
      case BinaryOp::kBitOr: return t + "(" + x + " | " + y + ")";
      case BinaryOp::kBitXor: return t + "(" + x + " ^ " + y + ")";
      case BinaryOp::kShl:
      case BinaryOp::kShr:
        // The amount is checked against the type's width (C++ leaves larger ones undefined).
        return std::string(e.binary == BinaryOp::kShl ? "pto::Shl<" : "pto::Shr<") + t + ">(ctx, " + line + ", " + x +
               ", " + y + ")";
    }
    Fail(ErrorKind::kInternal, e.span, "codegen: unhandled binary operator");
  }

  // ---- statements ----
  void Line(int indent, const std::string& text) { body_ << std::string(indent * 2, ' ') << text << "\n"; }

  void Stmt_(const Stmt& s, int indent) {
    if (!s) return;
    if (debug_ && s->kind != StmtKind::kSeq && s->span.line > 0) {
      // Debug builds: gdb and the compiler's messages name the kernel's Python line, not kernel.cpp's.
      body_ << "#line " << LineNumber(s->span.line) << " "
            << CString(LineFileName(s->span.line, func_.source_file, func_.other_files)) << "\n";
    }
    switch (s->kind) {
      case StmtKind::kSeq:
        for (const Stmt& child : s->stmts) Stmt_(child, indent);
        break;
      case StmtKind::kAssign:
        if (s->var->type.IsTile()) Line(indent, VarName(s->var) + " = " + Expr_(s->value) + ";");
        else if (s->var->type.IsPtr()) Line(indent, PtrName(s->var) + " = " + Expr_(s->value) + ";");
        else if (s->var->type.IsTensor() && s->value->kind == ExprKind::kMakeView)
          Line(indent, TensorName(s->var) + " = " + MakeView(*s->value, s->var->name) + ";");
        else if (s->var->type.IsTensor()) Line(indent, TensorName(s->var) + " = " + Expr_(s->value) + ";");
        else Line(indent, VarName(s->var) + " = " + ScalarCType(s->var->type.dtype) + "(" + Expr_(s->value) + ");");
        break;
      case StmtKind::kFor: EmitFor(*s, indent); break;
      case StmtKind::kWhile:
        Line(indent, "while (" + Expr_(s->cond) + ") {");
        Line(indent + 1, "pto::Poll(ctx, " + std::to_string(s->span.line) + ");  // cancellable at every back-edge");
        LoopBody(s->body, indent + 1);
        Line(indent, "}");
        break;
      case StmtKind::kIf:
        Line(indent, "if (" + Expr_(s->cond) + ") {");
        Stmt_(s->body, indent + 1);
        if (s->orelse) {
          Line(indent, "} else {");
          Stmt_(s->orelse, indent + 1);
        }
        Line(indent, "}");
        break;
      case StmtKind::kBreak: Line(indent, "break;"); break;
      case StmtKind::kContinue: Line(indent, "continue;"); break;
      case StmtKind::kReturn: Line(indent, "return;"); break;
      case StmtKind::kOp: EmitOp(*s, indent); break;
      case StmtKind::kDeclTiles: EmitDeclTiles(*s, indent); break;
      case StmtKind::kSelectTile: EmitSelect(*s, indent); break;
      case StmtKind::kSubview:
        Line(indent, ViewName(s->var) + " = pto::Subview<" + TileTypeName(*s->var->type.tile) + ">(ctx, " +
                         std::to_string(s->span.line) + ", *" + Expr_(s->value) + ", " + Expr_(s->args[0]) + ", " +
                         Expr_(s->args[1]) + ", " + Expr_(s->args[2]) + ", " + Expr_(s->args[3]) + ");");
        Line(indent, VarName(s->var) + " = &" + ViewName(s->var) + ";");
        break;
      case StmtKind::kDirectRun: EmitDirectRun(*s, indent); break;
      case StmtKind::kDirectLoop: EmitDirectLoop(*s, indent); break;
      case StmtKind::kKLoop: EmitKLoop(*s, indent); break;
      case StmtKind::kFusedOps: EmitFusedOps(*s, indent); break;
      case StmtKind::kForwardedMove:  // its locks stay (auto_mutex): the move itself is not run
        skip_forwarded_move_ = true;
        Stmt_(s->body, indent);
        skip_forwarded_move_ = false;
        break;
      case StmtKind::kForwardedReads:
        for (size_t i = 0; i + 1 < s->args.size(); i += 2) {
          const int64_t in_place = s->attrs.at(i / 2).value;
          const std::string mat = "*" + Expr_(s->args[i + 1]);
          forwarded_[s->args[i]->var->id] =
              in_place < 0 ? mat : "pto::ReadInPlace(" + mat + ", " + InPlaceName(in_place) + ")";
        }
        Stmt_(s->body, indent);
        forwarded_.clear();
        break;
      case StmtKind::kInPlaceLoad:  // its locks stay (auto_mutex): the load leaves its window in GM
        in_place_load_ = s->attrs.at(0).value;
        Stmt_(s->body, indent);
        in_place_load_ = -1;
        break;
      case StmtKind::kStage:
        Line(indent, "{  // pipeline stage " + s->attrs.at(0).text);
        Stmt_(s->body, indent + 1);
        Line(indent, "}");
        break;
      case StmtKind::kReinterpret:
        Line(indent, ViewName(s->var) + " = pto::Reinterpret<" + TileTypeName(*s->var->type.tile) + ">(*" +
                         Expr_(s->value) + ");");
        Line(indent, VarName(s->var) + " = &" + ViewName(s->var) + ";");
        break;
      case StmtKind::kSection:
        Line(indent, std::string("if (ctx.core_type == ") +
                         (s->section == SectionKind::kVector ? "PTO_CORE_AIV" : "PTO_CORE_AIC") + ") {  // section " +
                         Name(s->section) + " (line " + std::to_string(LineNumber(s->span.line)) + ")");
        LoopBody(s->body, indent + 1);
        Line(indent, "}");
        break;
    }
  }

  // A loop's (or a section's) body, its stores cached when it computes at least 3 vector ops per store
  // (data_movement.h, kStreamingStoreBytes: a streaming store stalls the core until its lines reach
  // memory; a kernel that computes between its stores overlaps cached stores' write-backs instead).
  void LoopBody(const Stmt& body, int indent) {
    int ops = 0, stores = 0;
    ForEachStmt(body, [&](const StmtNode& st) {
      if (st.kind != StmtKind::kOp || !st.op || st.op->internal) return;
      if (st.op->name == "store" || st.op->name == "store_tile") ++stores;
      else if (st.op->pipe_rule == PipeRule::kFixed && st.op->pipe == Pipe::kV) ++ops;
    });
    const bool outer = cached_stores_;
    cached_stores_ = !instrument_ && stores > 0 && ops >= 3 * stores;
    Stmt_(body, indent);
    cached_stores_ = outer;
  }

  // Whether an element-wise op after `op` in `stmts` reads tile `id` before one writes it.
  static bool ReadBeforeWritten(const std::vector<const StmtNode*>& stmts, const StmtNode* op, int id) {
    auto it = std::find(stmts.begin(), stmts.end(), op);
    for (++it; it != stmts.end(); ++it) {
      const StmtNode& s = **it;
      if (s.op->name.substr(0, 4) == "load" || s.op->name.substr(0, 5) == "store") continue;
      for (size_t i = 1; i < s.args.size(); ++i) {
        if (s.args[i]->var && s.args[i]->var->id == id) return true;
      }
      if (s.args[0]->var->id == id) return false;
    }
    return false;
  }

  // A scalar operand of a fused body (op `step`'s operand `i`), evaluated as the element type before
  // the body runs: the name of its local.
  std::string HoistedScalar(const std::string& prefix, size_t step, size_t i, const Expr& arg,
                            const std::string& elem, int indent) {
    const std::string local = prefix + std::to_string(step) + "_" + std::to_string(i);
    Line(indent, ScalarDecl(local, arg, elem));
    return local;
  }
  // The declaration of such a local.
  std::string ScalarDecl(const std::string& local, const Expr& arg, const std::string& elem) {
    return "const auto " + local + " = pto::detail::ScalarAs<" + elem + ">(" + Expr_(arg) + ");";
  }

  // What a direct run computes: its windows' element types, its windows (C++ expressions: in and out), the
  // lines of its body (in[] -> out[]), the loads of tiles a later statement reads, and its tiles in
  // order of first mention. `window(op, load, tensor, tile, offsets)` declares a load's or store's
  // window and names it; `scalar(step, i, arg, elem)` evaluates an op's scalar operand as the element
  // type and names it; both in program order.
  struct DirectPlan {
    std::string in_elem, out_elem;  // the element types of the input and output windows
    bool native_half = false;       // fp16 windows and ops whose fp16 lanes give their bits (DirectRows)
    std::vector<std::string> ins, outs, body;
    std::vector<const StmtNode*> kept_loads;
    std::vector<Expr> tiles;
  };
  using WindowFn = std::function<std::string(const StmtNode&, bool, const Expr&, const Expr&, const Expr&)>;
  using ScalarFn = std::function<std::string(size_t, size_t, const Expr&, const std::string&)>;
  // The op statements of a direct run, without auto_mutex's brackets (no-ops in a plain kernel).
  static std::vector<const StmtNode*> RunOps(const StmtNode& run) {
    std::vector<const StmtNode*> ops;
    for (const Stmt& child : run.body->stmts) {
      if (child->kind == StmtKind::kOp && !child->op->internal) ops.push_back(child.get());
    }
    return ops;
  }
  // The tiles of a direct run, in order of first mention.
  static std::vector<Expr> RunTiles(const StmtNode& run) {
    std::vector<Expr> tiles;
    std::set<int> seen;
    for (const StmtNode* op : RunOps(run)) {
      for (const Expr& arg : op->args) {
        if (arg->type.IsTile() && seen.insert(arg->var->id).second) tiles.push_back(arg);
      }
    }
    return tiles;
  }
  DirectPlan PlanDirectRun(const StmtNode& s, const WindowFn& window, const ScalarFn& scalar) {
    std::set<int> unwritten;
    for (const Attr& attr : s.attrs) unwritten.insert(int(attr.value));
    const std::vector<const StmtNode*> stmts = RunOps(s);
    DirectPlan plan;
    plan.tiles = RunTiles(s);
    for (const StmtNode* op : stmts) {
      const std::string_view name = op->op->name;
      if (name == "load" || name == "load_tile") plan.in_elem = DeviceType(op->args[0]->type.dtype);
      if (name == "store" || name == "store_tile") plan.out_elem = DeviceType(op->args[1]->type.dtype);
    }
    std::map<int, std::string> value;  // a tile's current value in the body
    std::map<int, Expr> computed;      // tiles an op writes
    plan.native_half = plan.in_elem == "pto::half" && plan.out_elem == "pto::half";
    for (const StmtNode* op : stmts) {
      const std::string_view name = op->op->name;
      const bool moves = name == "load" || name == "load_tile" || name == "store" || name == "store_tile";
      if (!moves) plan.native_half = plan.native_half && HalfLanesExact(*op);
      if (name == "load" || name == "load_tile") {
        const Expr& tile = op->args[0];
        value[tile->var->id] = "in[" + std::to_string(plan.ins.size()) + "]";
        plan.ins.push_back(window(*op, true, op->args[1], tile, op->args[2]));
        if (!unwritten.count(tile->var->id)) plan.kept_loads.push_back(op);
      } else if (name == "store" || name == "store_tile") {
        const Expr& tile = op->args[1];
        const std::string w = window(*op, false, op->args[0], tile, op->args[2]);
        plan.body.push_back("out[" + std::to_string(plan.outs.size()) + "] = " + value.at(tile->var->id) + ";");
        plan.outs.push_back(w);
      } else if (name == "cast") {  // its source is the run's (fuse_direct): rounded to the target by its mode
        std::string mode;
        for (const auto& [spec, attr] : OpOptions(*op)) {
          if (spec->name == "mode") mode = std::string(spec->cpp_prefix) + std::string(spec->choices[size_t(attr.value)]);
        }
        const std::string result = "x" + std::to_string(plan.body.size());
        plan.body.push_back("const auto " + result + " = pto::DirectCast<" +
                            DeviceType(op->args[0]->type.dtype) + ", " + mode + ">(" +
                            value.at(op->args[1]->var->id) + ");  // cast, line " +
                            std::to_string(LineNumber(op->span.line)));
        value[op->args[0]->var->id] = result;
        computed[op->args[0]->var->id] = op->args[0];
      } else {
        const std::string elem = DeviceType(op->args[0]->type.dtype);
        std::string call = "<" + elem + ">(pto::detail::" + ElementwiseFunctor(name) + "{}";
        std::string lanes;  // a tile operand's value: the fp16 lanes a scalar operand goes on (LanesLike)
        for (size_t i = 1; i < op->args.size(); ++i) {
          const Expr& arg = op->args[i];
          if (op->op->operands[i].kind == OperandKind::kScalar) {
            const std::string value = scalar(plan.body.size(), i, arg, elem);
            const bool wrap = plan.native_half && !lanes.empty();  // (the run may still go on fp16 lanes)
            call += ", " + (wrap ? "pto::LanesLike(" + lanes + ", " + value + ")" : value);
            continue;
          }
          if (!value.count(arg->var->id)) {  // a tile the run reads before writing it: from local memory
            value[arg->var->id] = "in[" + std::to_string(plan.ins.size()) + "]";
            plan.ins.push_back("pto::DirectTile(*" + Expr_(arg) + ")");
          }
          call += ", " + value.at(arg->var->id);
          lanes = value.at(arg->var->id);
        }
        const std::string result = "x" + std::to_string(plan.body.size());
        const bool read_later = ReadBeforeWritten(stmts, op, op->args[0]->var->id);
        plan.body.push_back("const auto " + result + " = " +
                            (read_later ? "pto::DirectOp" : "pto::DirectOpStored") + call + ");  // " +
                            std::string(name) + ", line " + std::to_string(LineNumber(op->span.line)));
        value[op->args[0]->var->id] = result;
        computed[op->args[0]->var->id] = op->args[0];
      }
    }
    for (const auto& [id, tile] : computed) {  // tiles a later statement reads get their values
      if (unwritten.count(id)) continue;
      plan.body.push_back("out[" + std::to_string(plan.outs.size()) + "] = " + value.at(id) + ";");
      plan.outs.push_back("pto::DirectTile(*" + Expr_(tile) + ")");
    }
    return plan;
  }

  // Whether an op of a direct run gives the same bits on fp16 lanes as on fp32 lanes rounded to fp16
  // (direct_run.h, DirectRowsHalf; FusedRowsHalf): the ops of vector_ops.h's kHalfLanesExact and their
  // scalar forms, on fp16 tiles.
  static bool HalfLanesExact(const StmtNode& op) {
    static const std::set<std::string_view> exact = {"add",  "sub",  "mul",  "div",  "maximum", "minimum", "adds",
                                                     "subs", "muls", "divs", "maxs", "mins",    "neg",     "abs",
                                                     "relu"};
    if (!exact.count(op.op->name)) return false;
    for (size_t i = 0; i < op.args.size(); ++i) {
      if (op.op->operands[i].kind == OperandKind::kScalar) continue;  // rounded to fp16 (ScalarAs)
      if (!op.args[i]->type.IsTile() || op.args[i]->type.dtype != DataType::kFP16) return false;
    }
    return true;
  }

  // The window arrays of a plan and the pass over rows x cols with its body.
  void EmitDirectRows(const DirectPlan& plan, const std::string& rows, const std::string& cols, int indent) {
    if (plan.native_half) {  // a body for fp16 lanes too, which DirectRows takes where the host has them
      Line(indent, "pto::DirectRows<true>(" + rows + ", " + cols +
                       ", direct_in, direct_out, [&](const auto* in, auto* out) {");
    } else {
      Line(indent, "pto::DirectRows(" + rows + ", " + cols +
                       ", direct_in, direct_out, [&](const pto::f32x16* in, pto::f32x16* out) {");
    }
    for (const std::string& line : plan.body) Line(indent + 1, line);
    Line(indent, "});");
  }
  void EmitDirectWindows(const DirectPlan& plan, int indent) {
    Line(indent, "const pto::DirectWindow<" + plan.in_elem + "> direct_in[] = {" + CommaList(plan.ins) + "};");
    Line(indent, "const pto::DirectWindow<" + plan.out_elem + "> direct_out[] = {" + CommaList(plan.outs) + "};");
  }

  // A direct run (fuse_direct; docs/device.md#direct-runs): the loads' and stores' windows checked and
  // the ops' scalar operands evaluated in program order, then one pass over the window from GM through
  // registers to GM; the statements as written when a store's window overlaps another of the run.
  void EmitDirectRun(const StmtNode& s, int indent) {
    const std::vector<const StmtNode*> ops = RunOps(s);
    const StmtNode& first_op = *ops.front();
    const StmtNode& last_op = *ops.back();
    Line(indent, "{  // direct run, lines " + std::to_string(LineNumber(first_op.span.line)) + "-" +
                     std::to_string(LineNumber(last_op.span.line)) + ": GM -> registers -> GM");
    size_t windows = 0;
    bool stored = false;
    std::vector<std::string> later_stores;  // op by op, the stores before them write GM before they fault
    const DirectPlan plan = PlanDirectRun(
        s,
        [&](const StmtNode& op, bool load, const Expr& tensor, const Expr& tile, const Expr& offsets) {
          const std::string name = "dw" + std::to_string(windows++);
          if (!load && stored) {
            later_stores.push_back(name + ".at");
            Line(indent + 1, "const auto " + name + " = pto::direct_" + std::string(op.op->name) + "_after(" +
                                 Expr_(tensor) + ", *" + Expr_(tile) + ", " + Expr_(offsets) + ");");
            return name;
          }
          stored |= !load;
          Line(indent + 1, "const auto " + name + " = pto::direct_" + std::string(op.op->name) + "(ctx, " +
                               std::to_string(op.span.line) +
                               (load ? ", *" + Expr_(tile) + ", " + Expr_(tensor) : ", " + Expr_(tensor) + ", *" + Expr_(tile)) +
                               ", " + Expr_(offsets) + ");");
          return name;
        },
        [&](size_t step, size_t i, const Expr& arg, const std::string& elem) {
          return HoistedScalar("ds", step, i, arg, elem, indent + 1);
        });
    EmitDirectWindows(plan, indent + 1);
    // The run's window: every tile's valid window, when they agree (set_validshape may have set them).
    const std::string first = "(*" + Expr_(plan.tiles.front()) + ")";
    std::vector<std::string> same_window;
    for (size_t i = 1; i < plan.tiles.size(); ++i) same_window.push_back(HasWindow("(*" + Expr_(plan.tiles[i]) + ")", "dr", "dc"));
    Line(indent + 1, "const int64_t dr = " + first + ".valid_rows, dc = " + first + ".valid_cols;");
    same_window.insert(same_window.end(), later_stores.begin(), later_stores.end());
    same_window.push_back("pto::DirectDisjoint(dr, dc, direct_in, direct_out)");
    Line(indent + 1, "if (" + Conjunction(same_window, indent + 3) + ") {");
    for (const StmtNode* load : plan.kept_loads) EmitOp(*load, indent + 2);
    EmitDirectRows(plan, "dr", "dc", indent + 2);
    Line(indent + 1, "} else {  // windows differ, overlap or fault: op by op");
    Stmt_(s.body, indent + 2);
    Line(indent + 1, "}");
    Line(indent, "}");
  }

  // A direct loop (fuse_direct_loops; docs/device.md#direct-loops): when the loop runs two or more
  // iterations, every slot its run may use has the same valid rows and all its columns, every
  // iteration's windows fit (checked together, without faulting) and no store's merged window partly
  // shares bytes with another, its iterations' runs go as one run over their windows side by side and
  // its tile selections replay in order; otherwise the loop runs as written.
  // A loop body's statements (one statement or a Seq of them).
  static const std::vector<Stmt>& BodyStmts(const StmtNode& loop, std::vector<Stmt>& single) {
    single = {loop.body};
    return loop.body->kind == StmtKind::kSeq ? loop.body->stmts : single;
  }

  // Tile variable -> the group a loop body selects it from.
  static std::map<int, Var> SelectedGroups(const std::vector<Stmt>& body) {
    std::map<int, Var> group_of;
    for (const Stmt& child : body) {
      if (child->kind == StmtKind::kSelectTile) group_of[child->var->id] = child->group;
    }
    return group_of;
  }

  // A tile as the slots it may be show it: slot 0 of the group the loop selects it from, or itself.
  std::string SlotWitness(const std::map<int, Var>& group_of, const Expr& tile) {
    auto it = group_of.find(tile->var->id);
    return it != group_of.end() ? GroupName(it->second) + "[0]" : "(*" + Expr_(tile) + ")";
  }

  // After a loop run as one (direct loops, K loops): every iteration's tile selections in order, so the
  // groups' cursors, the tile variables and the loop variable end as the loop leaves them.
  void EmitSelectionReplay(const StmtNode& loop, const std::vector<Stmt>& body, const std::string& lo,
                           const std::string& hi, int indent) {
    Line(indent, "for (int64_t it = " + lo + "; it < " + hi + "; ++it) {  // the iterations' tile selections");
    Line(indent + 1, VarName(loop.var) + " = " + ScalarCType(loop.var->type.dtype) + "(it);");
    for (const Stmt& child : body) {
      if (child->kind == StmtKind::kSelectTile) EmitSelect(*child, indent + 1);
    }
    Line(indent, "}");
  }

  void EmitDirectLoop(const StmtNode& s, int indent) {
    const StmtNode& loop = *s.body;
    std::vector<Stmt> single;
    const std::vector<Stmt>& body = BodyStmts(loop, single);
    const StmtNode* run = nullptr;
    for (const Stmt& child : body) {
      if (child->kind == StmtKind::kDirectRun) run = child.get();
    }
    const std::map<int, Var> group_of = SelectedGroups(body);
    auto witness = [&](const Expr& tile) { return SlotWitness(group_of, tile); };
    const std::string n = std::to_string(loop_counter_++);
    const std::string lo = "dlo" + n, hi = "dhi" + n, done = "dl" + n + "_done";
    Line(indent, "{  // direct loop, line " + std::to_string(LineNumber(loop.span.line)) +
                     ": the iterations' direct runs as one run over their windows side by side");
    Line(indent + 1, "const int64_t " + lo + " = " + Expr_(loop.start) + ", " + hi + " = " + Expr_(loop.stop) + ";");
    Line(indent + 1, "bool " + done + " = false;");
    Line(indent + 1, "if (" + hi + " - " + lo + " >= 2) {");
    const int in = indent + 2;
    std::vector<std::string> checks, scalars;
    // Every slot the run may use: the first one's valid rows, all columns valid.
    const std::vector<Expr> tiles = RunTiles(*run);
    const TileType& type = *tiles.front()->type.tile;
    const std::string cols = std::to_string(type.Cols());
    Line(in, "const int64_t dr = " + witness(tiles.front()) + ".valid_rows, dc = (" + hi + " - " + lo + ") * " + cols + ";");
    for (const Expr& tile : tiles) {
      auto it = group_of.find(tile->var->id);
      if (it == group_of.end()) {
        checks.push_back(HasWindow("(*" + Expr_(tile) + ")", "dr", cols));
        continue;
      }
      for (int k = 0; k < it->second->group->depth; ++k) {
        checks.push_back(HasWindow(GroupName(it->second) + "[" + std::to_string(k) + "]", "dr", cols));
      }
    }
    Line(in, VarName(loop.var) + " = " + ScalarCType(loop.var->type.dtype) + "(" + lo + ");  // the first iteration's windows");
    size_t windows = 0;
    const DirectPlan plan = PlanDirectRun(
        *run,
        [&](const StmtNode& op, bool, const Expr& tensor, const Expr& tile, const Expr& offsets) {
          const std::string name = "dw" + std::to_string(windows++);
          const bool tile_units = op.op->name == "load_tile" || op.op->name == "store_tile";
          Line(in, "const auto " + name + " = pto::direct_loop_window(" + witness(tile) + ", " + Expr_(tensor) + ", " +
                       (tile_units ? "true, " : "false, ") + Expr_(offsets) + ", dr, dc);");
          checks.push_back(name + ".at");
          return name;
        },
        [&](size_t step, size_t i, const Expr& arg, const std::string& elem) {
          const std::string local = "ds" + std::to_string(step) + "_" + std::to_string(i);
          scalars.push_back(ScalarDecl(local, arg, elem));  // evaluated once the run goes directly
          return local;
        });
    EmitDirectWindows(plan, in);
    checks.push_back("pto::DirectDisjoint(dr, dc, direct_in, direct_out)");
    Line(in, "if (" + Conjunction(checks, in + 2) + ") {");
    Line(in + 1, "pto::Poll(ctx, " + std::to_string(loop.span.line) + ");");
    for (const std::string& line : scalars) Line(in + 1, line);
    EmitDirectRows(plan, "dr", "dc", in + 1);
    EmitSelectionReplay(loop, body, lo, hi, in + 1);
    Line(in + 1, done + " = true;");
    Line(in, "}");
    Line(indent + 1, "}");
    Line(indent + 1, "if (!" + done + ") {");
    EmitFor(loop, indent + 2);
    Line(indent + 1, "}");
    Line(indent, "}");
  }

  // K loops (fuse_k_loops; docs/device.md#k-loops): the steps as one GEMM when pto::k_loop_matmul can
  // give their bits (it checks every step's windows first and changes nothing when it declines), then
  // the steps' tile selections replayed in order; else the loop as written. A K loop that took in the
  // store after it (its body a Seq) asks pto::k_loop_matmul_store, which writes the store's window too
  // when it can (2); else the store's statements run as written after the loop.
  void EmitKLoop(const StmtNode& s, int indent) {
    const bool with_store = s.body->kind == StmtKind::kSeq;
    const StmtNode& loop = with_store ? *s.body->stmts.front() : *s.body;
    const std::map<int, Var> group_of = SelectedGroups(loop.body->stmts);
    auto witness = [&](const Expr& tile) { return SlotWitness(group_of, tile); };  // one whole window
    const Expr& a = s.args[2];
    const Expr& b = s.args[5];
    steady_params_.insert(a->var->id);
    steady_params_.insert(b->var->id);
    const std::string n = std::to_string(loop_counter_++), lo = "klo" + n, hi = "khi" + n;
    const std::string line = std::to_string(loop.span.line);
    Line(indent, "{  // K loop, line " + std::to_string(LineNumber(loop.span.line)) +
                     ": its matmul steps as one GEMM over k (docs/device.md#k-loops), else as written");
    Line(indent + 1, "const int64_t " + lo + " = " + Expr_(loop.start) + ", " + hi + " = " + Expr_(loop.stop) + ";");
    const std::string operands = "ctx, *" + Expr_(s.args[0]) + ", " + witness(s.args[1]) + ", " + witness(s.args[4]) +
                                 ", " + Expr_(a) + ", int64_t(" + Expr_(s.args[3]) + "), " + Expr_(b) + ", int64_t(" +
                                 Expr_(s.args[6]) + "), " + lo + ", " + hi + ", " + SteadyName(a->var) + ", " +
                                 SteadyName(b->var);
    const std::string done = "kdone" + n;
    if (with_store) {
      bool tile_units = false;  // store_tile, else store (the body's other statements: auto_mutex's)
      for (const Stmt& st : s.body->stmts) {
        tile_units = tile_units || (st->kind == StmtKind::kOp && st->op->name == "store_tile");
      }
      const std::string units = tile_units ? "true" : "false";
      Line(indent + 1, "const int " + done + " = pto::k_loop_matmul_store<" + units + ">(" + operands + ", " +
                           Expr_(s.args[7]) + ", pto::Idx<2>{{int64_t(" + Expr_(s.args[8]) + "), int64_t(" +
                           Expr_(s.args[9]) + ")}});");
      Line(indent + 1, "if (" + done + " != 0) {");
    } else {
      Line(indent + 1, "if (pto::k_loop_matmul(" + operands + ")) {");
    }
    Line(indent + 2, "pto::Poll(ctx, " + line + ");");
    EmitSelectionReplay(loop, loop.body->stmts, lo, hi, indent + 2);
    Line(indent + 1, "} else {");
    EmitFor(loop, indent + 2);
    Line(indent + 1, "}");
    if (with_store) {
      Line(indent + 1, "if (" + done + " != 2) {  // the store as written");
      for (size_t i = 1; i < s.body->stmts.size(); ++i) Stmt_(s.body->stmts[i], indent + 2);
      Line(indent + 1, "}");
    }
    Line(indent, "}");
  }

  // Fused ops (fuse_ops; docs/device.md#fused-ops): scalar operands evaluated in program order, then,
  // when every op's destination has the first one's valid window and no tile an op writes shares a
  // byte with another tile of the run, one pass over the window; else the statements as written. A
  // run ending in a strip store asks the store where the strip's rows go (<store>_target, which checks
  // its window) and the pass writes them too; when the store is not to write them now, it runs after
  // the pass as written.
  void EmitFusedOps(const StmtNode& s, int indent) {
    std::vector<const StmtNode*> stmts;  // without auto_mutex's brackets: no-ops in a plain kernel
    for (const Stmt& child : s.body->stmts) {
      if (child->kind == StmtKind::kOp && child->op->name.substr(0, 11) != "auto_mutex_") stmts.push_back(child.get());
    }
    const StmtNode* tail_store = stmts.back()->op->name.substr(0, 5) == "store" ? stmts.back() : nullptr;
    if (tail_store) stmts.pop_back();
    const std::string elem = DeviceType(stmts.front()->args[0]->type.tile->dtype);
    const std::string first = "(*" + Expr_(stmts.front()->args[0]) + ")";
    Line(indent, "{  // fused ops, lines " + std::to_string(LineNumber(stmts.front()->span.line)) + "-" +
                     std::to_string(LineNumber(stmts.back()->span.line)) + ": one pass over the window");
    Line(indent + 1, "const int64_t fr = " + first + ".valid_rows, fc = " + first + ".valid_cols;");
    // fp16 element-wise ops of HalfLanesExact only, no broadcast, no sum: a body for fp16 lanes too
    bool native_half = elem == "pto::half" && !tail_store;
    for (const StmtNode* op : stmts) native_half = native_half && HalfLanesExact(*op);
    enum Role { kWindow, kColumn, kRow };
    std::vector<std::string> lists[3], body, checks;
    std::map<std::pair<int, int>, std::string> read;  // (tile id, role) -> its lanes in the body
    std::map<int, std::string> value;                 // a written tile's current value in the body
    std::map<int, Expr> written;
    std::set<std::pair<int, int>> spans;              // (tile id, role) of every operand
    std::map<std::pair<int, int>, Expr> operand_of;
    std::vector<std::string> sums;  // the row sums' column tiles (written: apart from every other tile)
    std::vector<std::pair<int, int>> sum_columns;  // their (tile id, role)
    const char* lanes[3] = {"t", "c", "w"};
    auto note = [&](const Expr& arg, int role) {  // an operand whose bytes the run's checks cover
      spans.insert({arg->var->id, role});
      operand_of[{arg->var->id, role}] = arg;
    };
    auto lanes_of = [&](const Expr& arg, int role) {  // an operand's current lanes in the body
      note(arg, role);
      if (role == kWindow && value.count(arg->var->id)) return value.at(arg->var->id);
      const std::pair<int, int> key{arg->var->id, role};
      if (!read.count(key)) {
        read[key] = std::string(lanes[role]) + "[" + std::to_string(lists[role].size()) + "]";
        lists[role].push_back("pto::FusedTile(*" + Expr_(arg) + ")");
      }
      return read.at(key);
    };
    for (const StmtNode* op : stmts) {
      const std::string_view name = op->op->name;
      if (name == "row_sum") {  // row_sum(out, src, tmp): src's lanes summed, out[r] at the row's end
        const Expr& src = op->args[1];
        checks.push_back(HasWindow("(*" + Expr_(src) + ")", "fr", "fc"));
        body.push_back("s[" + std::to_string(sums.size()) + "] = " + lanes_of(src, kWindow) + ";  // row_sum, line " +
                       std::to_string(LineNumber(op->span.line)));
        note(op->args[0], kColumn);
        sums.push_back("pto::FusedTile(*" + Expr_(op->args[0]) + ")");
        sum_columns.push_back({op->args[0]->var->id, kColumn});
        continue;
      }
      const bool broadcast = name.substr(0, 11) == "row_expand_" || name.substr(0, 11) == "col_expand_";
      const std::string functor = broadcast ? ExpandFunctor(name.substr(11)) : ElementwiseFunctor(name);
      // row_expand_div divides as the op does (by the reciprocal where the divisor allows: the same bits)
      const bool column_div = name == "row_expand_div";
      std::string call = "<" + elem + ">(" + (column_div ? "" : "pto::detail::" + functor + "{}");
      std::string tile_lanes;  // the fp16 lanes a scalar operand goes on (LanesLike)
      for (size_t i = 1; i < op->args.size(); ++i) {
        const Expr& arg = op->args[i];
        if (op->op->operands[i].kind == OperandKind::kScalar) {
          const std::string value = HoistedScalar("fs", body.size(), i, arg, elem, indent + 1);
          call += ", " + (native_half && !tile_lanes.empty() ? "pto::LanesLike(" + tile_lanes + ", " + value + ")" : value);
          continue;
        }
        const int role = broadcast && i == 2 ? (name[0] == 'r' ? kColumn : kRow) : kWindow;
        tile_lanes = lanes_of(arg, role);
        call += (column_div && i == 1 ? "" : ", ") + tile_lanes;
        if (column_div && i == 2) call += ", r" + lanes_of(arg, role);  // its reciprocal: rc[...]
      }
      const Expr& dst = op->args[0];
      note(dst, kWindow);
      const std::string result = "x" + std::to_string(body.size());
      const bool read_later = ReadBeforeWritten(stmts, op, dst->var->id);
      const std::string fn = column_div ? "pto::FusedColumnDiv" : read_later ? "pto::DirectOp" : "pto::DirectOpStored";
      body.push_back("const auto " + result + " = " + fn + call + ");  // " + std::string(name) + ", line " +
                     std::to_string(LineNumber(op->span.line)));
      value[dst->var->id] = result;
      if (!written.count(dst->var->id)) {
        written[dst->var->id] = dst;
        if (op != stmts.front()) {
          checks.push_back(HasWindow("(*" + Expr_(dst) + ")", "fr", "fc"));
        }
      }
    }
    auto span = [&](const std::pair<int, int>& key) {
      const std::string tile = "*" + Expr_(operand_of.at(key));
      if (key.second == kColumn) return "pto::FusedColumnSpan(" + tile + ", fr)";
      if (key.second == kRow) return "pto::FusedRowSpan(" + tile + ", fc)";
      return "pto::FusedWindowSpan(" + tile + ", fr, fc)";
    };
    // Each written tile (an op's destination, a sum's column) apart from every other tile of the run.
    std::vector<std::pair<int, int>> outputs;
    for (const auto& [id, tile] : written) outputs.push_back({id, kWindow});
    outputs.insert(outputs.end(), sum_columns.begin(), sum_columns.end());
    for (size_t a = 0; a < outputs.size(); ++a) {
      const auto earlier = outputs.begin() + long(a);
      for (const auto& key : spans) {
        const bool earlier_output = std::find(outputs.begin(), earlier, key) != earlier;
        if (key.first == outputs[a].first || earlier_output) continue;
        checks.push_back("pto::FusedApart(" + span(outputs[a]) + ", " + span(key) + ")");
      }
    }
    std::vector<std::string> outs;
    int stored_out = -1;  // the output the tail store stores
    for (const auto& [id, tile] : written) {
      if (tail_store && tail_store->args[1]->var->id == id) stored_out = int(outs.size());
      body.push_back("out[" + std::to_string(outs.size()) + "] = " + value.at(id) + ";");
      outs.push_back("pto::FusedTile(*" + Expr_(tile) + ")");
    }
    Line(indent + 1, "if (" + Conjunction(checks, indent + 3) + ") {");
    std::string gm = "static_cast<const pto::FusedGm<" + elem + ">*>(nullptr)";
    if (tail_store) {
      std::string target = "const auto fused_gm = pto::" + std::string(tail_store->op->device_fn).substr(5) +
                           "_target(ctx, " + std::to_string(tail_store->span.line);
      for (const Expr& arg : tail_store->args) target += ", " + OpArg(arg);
      Line(indent + 2, target + ");  // where the pass stores the strip's rows (line " +
                           std::to_string(LineNumber(tail_store->span.line)) + ")");
      gm = "&fused_gm";
    }
    std::string args;  // FusedRows' operand arrays, in its order (null for an empty one)
    const std::pair<const char*, const std::vector<std::string>*> arrays[] = {
        {"fused_tiles", &lists[kWindow]}, {"fused_columns", &lists[kColumn]}, {"fused_rows", &lists[kRow]},
        {"fused_out", &outs}, {"fused_sums", &sums}};
    for (const auto& [name, list] : arrays) {
      if (list->empty()) {
        args += ", static_cast<const pto::FusedOperand<" + elem + ">*>(nullptr)";
        continue;
      }
      Line(indent + 2, "const pto::FusedOperand<" + elem + "> " + name + "[] = {" + CommaList(*list) + "};");
      args += std::string(", ") + name;
    }
    Line(indent + 2, "pto::FusedRows<" + elem + ", " + std::to_string(lists[kWindow].size()) + ", " +
                         std::to_string(lists[kColumn].size()) + ", " + std::to_string(lists[kRow].size()) + ", " +
                         std::to_string(outs.size()) + ", " + std::to_string(sums.size()) + ", " +
                         std::to_string(stored_out) + (native_half ? ", true" : "") + ">(ctx, fr, fc" + args + ", " +
                         gm +
                         (native_half ? ", [&](const auto* t, const auto* c, const auto* rc, const auto* w, auto* out, "
                                        "auto* s) {"
                                      : ", [&](const pto::f32x16* t, const pto::f32x16* c, const pto::f32x16* rc, "
                                        "const pto::f32x16* w, pto::f32x16* out, pto::f32x16* s) {"));
    for (const std::string& line : body) Line(indent + 3, line);
    Line(indent + 2, "});");
    if (tail_store) {
      Line(indent + 2, "if (fused_gm.at == nullptr) {  // the store's rows are not this strip's to write now");
      EmitOp(*tail_store, indent + 3);
      Line(indent + 2, "}");
    }
    Line(indent + 1, "} else {  // windows differ or overlap: op by op");
    Stmt_(s.body, indent + 2);
    Line(indent + 1, "}");
    Line(indent, "}");
  }

  void EmitFor(const StmtNode& s, int indent) {
    std::string n = std::to_string(loop_counter_++);
    std::string lo = "lo" + n, hi = "hi" + n, st = "st" + n, it = "it" + n;
    Line(indent, "{  // for " + s.var->name + " in pl.range (line " + std::to_string(LineNumber(s.span.line)) + ")");
    Line(indent + 1, "const int64_t " + lo + " = " + Expr_(s.start) + ", " + hi + " = " + Expr_(s.stop) + ", " + st +
                         " = " + Expr_(s.step) + ";");
    std::string cond;
    if (s.step->IsIntConst()) {
      cond = it + (s.step->int_value > 0 ? " < " : " > ") + hi;
    } else {
      Line(indent + 1, "if (" + st + " == 0) pto::Fault(ctx, " + std::to_string(s.span.line) +
                           ", \"pl.range\", \"pl.range step is zero\");");
      cond = "(" + st + " > 0 ? " + it + " < " + hi + " : " + it + " > " + hi + ")";
    }
    Line(indent + 1, "for (int64_t " + it + " = " + lo + "; " + cond + "; " + it + " += " + st + ") {");
    Line(indent + 2, "pto::Poll(ctx, " + std::to_string(s.span.line) + ");  // cancellable at every back-edge");
    Line(indent + 2, VarName(s.var) + " = " + ScalarCType(s.var->type.dtype) + "(" + it + ");");
    LoopBody(s.body, indent + 2);
    Line(indent + 1, "}");
    Line(indent, "}");
  }

  std::string OpArg(const Expr& arg) {
    if (arg->type.IsTile()) return "*" + Expr_(arg);
    // kTiles and kWorkspaces: one argument per entry (tiles, GM tensors, scalars).
    const bool data_list = arg->kind == ExprKind::kTuple &&
                           std::any_of(arg->operands.begin(), arg->operands.end(),
                                       [](const Expr& e) { return e->type.IsTile() || e->type.IsTensor(); });
    if (data_list) {
      std::string list;
      for (size_t i = 0; i < arg->operands.size(); ++i) list += (i ? ", " : "") + OpArg(arg->operands[i]);
      return list;
    }
    return Expr_(arg);
  }

  // device_fn(ctx, line, attrs..., operands...); in sanitizer mode under its hook (sanitizer_hooks.h),
  // with scalar and offset operands evaluated once, ahead of both.
  void EmitOp(const StmtNode& s, int indent) {
    if (skip_forwarded_move_ && s.op->name == "move") {
      Line(indent, "// line " + std::to_string(s.span.line) + ": move(" + s.args[0]->var->name + ", " +
                       s.args[1]->var->name + ") forwarded: its matmuls read the source (docs/device.md#forwarded-moves)");
      return;
    }
    std::vector<std::string> operands;
    std::vector<std::string> hoisted;
    for (size_t i = 0; i < s.args.size(); ++i) {
      const OperandKind kind = s.op->operands[i].kind;
      if (kind == OperandKind::kScalars) {  // variadic, each with its own type
        for (const Expr& item : s.args[i]->operands) operands.push_back(Expr_(item));
        continue;
      }
      operands.push_back(ForwardedArg(s, s.args[i]));
      if (instrument_ && (kind == OperandKind::kOffsets || kind == OperandKind::kScalar) && !s.args[i]->IsConst()) {
        std::string local = "op" + std::to_string(i);
        hoisted.push_back("const auto " + local + " = " + operands.back() + ";");
        operands.back() = local;
      }
    }
    const bool in_place = in_place_load_ >= 0 && (s.op->name == "load" || s.op->name == "load_tile");
    std::string call = (in_place ? "const auto " + InPlaceName(in_place_load_) + " = " : "") +
                       std::string(s.op->device_fn) +
                       (cached_stores_ && (s.op->name == "store" || s.op->name == "store_tile") ? "_cached" : "") +
                       (in_place ? "_in_place" : "") + "(ctx, " + std::to_string(s.span.line);
    // Every implemented option in declaration order (a default when the IR carries none), so each
    // device function has one signature however the statement was built.
    for (const auto& [spec, attr] : OpOptions(s)) {
      if (attr.is_string) {
        call += ", " + CString(attr.text);
      } else if (spec->kind == AttrKind::kEnum && attr.value >= 0 && attr.value < int64_t(spec->choices.size())) {
        std::string choice(spec->choices[size_t(attr.value)]);
        call += spec->cpp_prefix.empty() ? ", " + std::to_string(attr.value) + " /*" + choice + "*/"
                                        : ", " + std::string(spec->cpp_prefix) + choice;
      } else {
        call += ", " + std::to_string(attr.value);
      }
    }
    for (const std::string& operand : operands) call += ", " + operand;
    if (in_place) {  // whether the launch writes nothing over the tensor (what Gemm derives from it lasts)
      const Expr& src = s.args.at(1);
      steady_params_.insert(src->var->id);
      call += ", " + SteadyName(src->var);
    }
    call += ");";
    EmitCompactChecks(s, indent);
    if (!instrument_) {
      Line(indent, call);
      return;
    }
    SanitizerHook hook = HookFor(s, operands, kind_);
    if (!hoisted.empty()) {
      Line(indent, "{");
      ++indent;
      for (const std::string& h : hoisted) Line(indent, h);
    }
    if (profile_) {
      const std::string work = WorkOf(s, operands);
      if (!work.empty()) Line(indent, work);
    }
    Line(indent, hook.guard.empty() ? call : "if (" + hook.guard + ") " + call);
    if (!hook.after.empty()) Line(indent, hook.after);
    if (!hoisted.empty()) Line(indent - 1, "}");
  }

  // On the NPU a fractal (NZ/ZN) tile's partial valid window is placed only in compact mode
  // (TileType(compact=1)); the data paths that move such a tile check, at run time, that its window
  // is whole otherwise.
  void EmitCompactChecks(const StmtNode& s, int indent) {
    for (const auto& [arg, what] : CompactWindowChecks(s)) {
      Line(indent, "pto::RequireCompactWindow(ctx, " + std::to_string(s.span.line) + ", " + OpArg(arg) + ", " +
                       CString(std::string(s.op->PublicName())) + ", " + CString(what) + ");");
    }
  }

  void EmitDeclTiles(const StmtNode& s, int indent) {
    const TileGroupInfo& g = *s.var->group;
    std::string name = GroupName(s.var);
    auto window = [&](size_t axis) {
      int64_t full = axis == 0 ? g.tile.Rows() : g.tile.Cols();
      size_t rank = g.tile.shape.size();
      int64_t declared = rank == 2 ? g.tile.valid_shape[axis] : (axis == 0 ? 1 : g.tile.valid_shape[0]);
      return std::to_string(declared < 0 ? full : declared);
    };
    for (int i = 0; i < g.depth; ++i) {
      uint32_t mask = 0;
      if (!g.mutex_ids.empty()) {
        for (int id : g.mutex_ids[size_t(i)]) mask |= 1u << id;
      }
      char addr[32];
      std::snprintf(addr, sizeof addr, "0x%llx", static_cast<unsigned long long>(g.addrs[size_t(i)]));
      Line(indent, "pto::InitTile(ctx, " + name + "[" + std::to_string(i) + "], " + addr + ", " + window(0) + ", " +
                       window(1) + ", " + std::to_string(mask) + "u);");
    }
    Line(indent, CursorName(s.var) + " = " + std::to_string(g.depth - 1) + ";");
    if (instrument_) {
      Line(indent, "pto::san::Declare(ctx, " + std::to_string(s.span.line) + ", " + CString(s.var->name) + ", " +
                       std::to_string(s.var->id) + ", " + name + ");");
    }
  }

  void EmitSelect(const StmtNode& s, int indent) {
    std::string group = GroupName(s.group);
    std::string cursor = CursorName(s.group);
    std::string depth = std::to_string(s.group->group->depth);
    std::string target = VarName(s.var) + " = ";
    switch (s.mode) {
      case SelectMode::kNext:
        Line(indent, target + "&" + group + "[pto::CursorNext(" + cursor + ", " + depth + ")];");
        break;
      case SelectMode::kCurrent: Line(indent, target + "&" + group + "[" + cursor + "];"); break;
      case SelectMode::kPrevious:
        Line(indent, target + "&" + group + "[pto::CursorPrevious(" + cursor + ", " + depth + ")];");
        break;
      case SelectMode::kIndex:
        if (s.value->IsIntConst()) {
          Line(indent, target + "&" + group + "[" + std::to_string(s.value->int_value) + "];");
        } else {
          Line(indent, target + "pto::SelectSlot(ctx, " + std::to_string(s.span.line) + ", " + group + ", " +
                           Expr_(s.value) + ", " + depth + ");");
        }
        break;
    }
  }

  // ---- files ----
  static std::string StructMemberType(DataType dtype) {
    return dtype == DataType::kInt64 ? "int64_t" : dtype == DataType::kFP32 ? "float" : "bool";
  }

  std::string TilingHeader(const StructType& t) {
    std::ostringstream os;
    os << "// " << t.name << "_tiling.h: the TilingData struct of kernel '" << func_.name
       << "', generated by pypto_pro.\n// The host packs launches with the same layout (fields in order, natural "
          "alignment).\n#pragma once\n\n#include <stdint.h>\n\n";
    std::string type = CppIdent("", t.name);
    os << "struct " << type << " {\n";
    for (const StructField& f : t.fields) {
      os << "  " << StructMemberType(f.dtype) << " " << CppIdent("", f.name);
      if (f.count > 0) os << "[" << f.count << "]";
      os << ";\n";
    }
    os << "};\n\n";
    os << "static_assert(sizeof(" << type << ") == " << t.size << ", \"" << type
       << " differs from the host layout\");\n";
    for (const StructField& f : t.fields) {
      os << "static_assert(__builtin_offsetof(" << type << ", " << CppIdent("", f.name) << ") == " << f.offset
         << ", \"" << type << "." << f.name << " differs from the host layout\");\n";
    }
    return os.str();
  }

  // The bytes of a tensor parameter's buffer (row-major: its dims times its element's size), or of a
  // pointer parameter's (the launcher's count), as an expression over the kernel's arguments.
  static std::string BufferBytes(const Var& p) {
    if (p->type.IsPtr()) return "args." + BytesFieldName(p);
    std::string bytes = "int64_t(sizeof(" + DeviceType(p->type.tensor->dtype) + "))";
    for (const Dim& d : p->type.tensor->dims) {
      bytes += " * " + (d.kind == DimKind::kDynamic ? "int64_t(args.dyn" + std::to_string(d.dyn_slot) + ")"
                                                   : std::to_string(d.value));
    }
    return bytes;
  }

  // Per tensor parameter an in-place load reads: whether no buffer the launch writes overlaps it, so
  // its values cannot change during the launch (gemm::Reuse). Never where a tensor is restrided (its
  // reads and writes leave shape x dtype bytes) or blocks synchronise (a SOFT sync_all's workspaces).
  std::string SteadyFlags(const std::vector<bool>& written) {
    const bool never = !restrided_.empty() || NeedsResidentBlocks(func_);
    std::string buffers;
    for (size_t i = 0; i < func_.params.size(); ++i) {
      const Var& p = func_.params[i];
      if (written[i] && (p->type.IsTensor() || p->type.IsPtr())) {
        buffers += std::string(buffers.empty() ? "" : ", ") + "PtoRange{args." + FieldName(p) + ", " + BufferBytes(p) + "}";
      }
    }
    std::ostringstream os;
    if (!never && !buffers.empty()) os << "  const PtoRange written_buffers[] = {" << buffers << "};\n";
    for (const Var& p : func_.params) {
      if (!steady_params_.count(p->id)) continue;
      os << "  const bool " << SteadyName(p) << " = ";
      if (never) {
        os << "false;\n";
      } else if (buffers.empty()) {
        os << "true;\n";
      } else {
        os << "pto::detail::ApartFrom(PtoRange{args." << FieldName(p) << ", " << BufferBytes(p)
           << "}, written_buffers);\n";
      }
    }
    return os.str();
  }

  std::string KernelSource(const std::string& tiling_header) {
    // Body first: it registers the tile types the declarations need.
    int indent = 1;
    std::ostringstream decls;
    const std::vector<bool> written = ir::WrittenParams(func_);
    std::ostringstream outputs;  // KernelOutputs' body: the written tensors' buffers
    for (size_t i_param = 0; i_param < func_.params.size(); ++i_param) {
      const Var& p = func_.params[i_param];
      if (p->type.IsTensor()) {
        const TensorType& t = *p->type.tensor;
        std::string dims;
        for (size_t i = 0; i < t.dims.size(); ++i) {
          const Dim& d = t.dims[i];
          dims += (i ? ", " : "") + (d.kind == DimKind::kDynamic ? "int64_t(args.dyn" + std::to_string(d.dyn_slot) + ")"
                                                                : std::to_string(d.value));
        }
        // pl.set_stride changes a tensor in place; the others stay const (their loads can be hoisted).
        // An output is marked with whether its buffer is still untouched (MarkFresh: the runtime faults
        // an untouched output in first where it can; else its stores go through the caches).
        const std::string gm = "pto::MakeGm<" + DeviceType(t.dtype) + ", " + std::to_string(t.dims.size()) +
                               ">(args." + FieldName(p) + ", pto::Idx<" + std::to_string(t.dims.size()) + ">{{" +
                               dims + "}}, " + CString(p->name) + ")";
        decls << (restrided_.count(p->id) ? "  auto " : "  const auto ") << TensorName(p) << " = "
              << (written[i_param] ? "pto::detail::MarkFresh(ctx, " + gm + ")" : gm) << ";\n";
        if (written[i_param]) {
          outputs << "  if (n < max) out[n++] = PtoRange{args." << FieldName(p) << ", " << BufferBytes(p) << "};\n";
        }
      } else if (p->type.IsPtr()) {
        decls << "  const auto " << PtrName(p) << " = pto::MakeGmPtr<" << DeviceType(p->type.dtype) << ">(args."
              << FieldName(p) << ", args." << BytesFieldName(p) << ", " << CString(p->name) << ");\n";
      } else if (p->type.kind == TypeKind::kStruct) {
        decls << "  const " << CppIdent("", p->type.strct->name) << "& " << VarName(p) << " = args." << FieldName(p)
              << ";\n";
      } else {
        decls << "  " << ScalarCType(p->type.dtype) << " " << VarName(p) << " = args." << FieldName(p) << ";\n";
      }
    }
    Stmt_(func_.body, indent);
    if (!steady_params_.empty()) decls << SteadyFlags(written);
    for (const Var& g : groups_) {
      decls << "  " << TileTypeName(g->group->tile) << " " << GroupName(g) << "[" << g->group->depth << "];\n";
      decls << "  int32_t " << CursorName(g) << " = 0;\n";
    }
    for (const Var& v : locals_) {
      if (v->type.IsTile()) {
        decls << "  " << TileTypeName(*v->type.tile) << "* " << VarName(v) << " = nullptr;\n";
        // A subview's descriptor lives here; the tile variable points at it.
        if (views_.count(v->id)) decls << "  " << TileTypeName(*v->type.tile) << " " << ViewName(v) << "{};\n";
      } else if (v->type.IsTensor()) {
        decls << "  pto::GmTensor<" << DeviceType(v->type.dtype) << ", " << v->type.tensor->dims.size() << "> "
              << TensorName(v) << "{};\n";
      } else if (v->type.IsPtr()) {
        decls << "  pto::GmPtr<" << DeviceType(v->type.dtype) << "> " << PtrName(v) << "{};\n";
      } else {
        decls << "  " << ScalarCType(v->type.dtype) << " " << VarName(v) << " = 0;\n";
      }
    }

    std::ostringstream os;
    os << "// kernel.cpp: device code of kernel '" << func_.name << "' (" << Name(kind_) << ", arch "
       << arch_.name << "), generated by pypto_pro from\n// " << func_.source_file << ". Do not edit.\n";
    os << "#include \"pypto_pro/device.h\"\n";
    if (instrument_) os << "#include \"pypto_pro/sanitizer.h\"\n";
    if (!tiling_header.empty()) os << "#include \"" << tiling_header << "\"\n";
    os << "\nnamespace {\n\n";
    for (size_t i = 0; i < tile_types_.size(); ++i) {
      const TileType& t = tile_types_[i];
      os << "using Tile" << i << " = pto::Tile<" << DeviceType(t.dtype) << ", " << t.Rows() << ", " << t.Cols()
         << ", pto::k" << Name(t.memory) << ", pto::k" << Name(t.layout)
         << (t.pad || t.compact ? ", " + std::to_string(t.pad) : "") << (t.compact ? ", " + std::to_string(t.compact) : "")
         << ">;  // " << t.ToString() << "\n";
    }
    os << "\n" << ArgsStruct(func_) << "\n";
    os << "void KernelEntry(PtoCoreCtx* ctx_ptr, const void* raw_args) {\n";
    os << "  pto::CoreCtx& ctx = *ctx_ptr;\n";
    os << "  const KernelArgs& args = *static_cast<const KernelArgs*>(raw_args);\n";
    if (instrument_) {
      char pipes[16];
      std::snprintf(pipes, sizeof pipes, "0x%08xu", SanitizerPipes(func_));
      os << "  pto::san::CoreScope sanitizer(ctx, raw_args, " << pipes << ");  // pipes reaching tiles and GM\n";
    }
    os << decls.str() << body_.str() << "}\n\n";
    if (debug_) {  // back to kernel.cpp's own lines for what follows the body
      const std::string so_far = os.str();
      os << "#line " << std::count(so_far.begin(), so_far.end(), '\n') + 2 << " \"kernel.cpp\"\n";
    }
    // The written tensors' buffers, for the runtime's look at fresh outputs before the blocks start.
    os << "int32_t KernelOutputs(const void* raw_args, PtoRange* out, int32_t max) {\n";
    os << "  const KernelArgs& args = *static_cast<const KernelArgs*>(raw_args);\n";
    os << "  int32_t n = 0;\n" << outputs.str() << "  (void)args;\n  (void)out;\n  (void)max;\n  return n;\n}\n\n";
    // Lines name their file (support/source_line.h): the kernel's, then those of helpers from other modules.
    os << "const char* const kSourceFiles[] = {" << CString(func_.source_file);
    for (const std::string& file : func_.other_files) os << ", " << CString(file);
    os << "};\n\n";
    os << "const PtoKernelDesc kKernelDesc = {PTO_ABI_VERSION, " << KindConstant(kind_) << ", " << CString(func_.name)
       << ", " << CString(func_.source_file) << ", " << CString(std::string(arch_.name)) << ", &KernelEntry, "
       << (report_.empty() ? "nullptr" : CString(report_)) << ", "
       << (NeedsResidentBlocks(func_) ? "PTO_KERNEL_FLAG_RESIDENT" : "0u") << (profile_ ? " | PTO_KERNEL_FLAG_PROFILE" : "")
       << (debug_ ? " | PTO_KERNEL_FLAG_DEBUG" : "")
       << ", " << (dump_dir_.empty() || !HasDumps() ? "nullptr" : CString(dump_dir_)) << ", kSourceFiles, "
       << 1 + func_.other_files.size() << ", &KernelOutputs};\n\n";
    os << "}  // namespace\n";
    return os.str();
  }

  const Function& func_;
  const ArchModel& arch_;
  // forward_moves: inside a kForwardedMove its move is not emitted; inside a kForwardedReads its
  // matmul reads each forwarded L0 operand (by var id) from the Mat tile moved into it.
  // Inside a kInPlaceLoad its load keeps its window where it is, for the matmuls to read (the number
  // names the local holding it).
  bool skip_forwarded_move_ = false;
  std::map<int, std::string> forwarded_;
  int64_t in_place_load_ = -1;
  static std::string InPlaceName(int64_t number) { return "in_place_" + std::to_string(number); }
  std::set<int> steady_params_;  // the tensor parameters in-place loads read
  static std::string SteadyName(const Var& tensor) { return CppIdent("steady_", tensor->name); }
  std::string ForwardedArg(const StmtNode& s, const Expr& arg) {
    if (!forwarded_.empty() && s.op->window == WindowRule::kMatmul && arg->kind == ExprKind::kVar) {
      auto it = forwarded_.find(arg->var->id);
      if (it != forwarded_.end()) return it->second;
    }
    return OpArg(arg);
  }
  const bool instrument_;  // the sanitizer's hooks: sanitizer mode, or profile mode (which records instead)
  bool cached_stores_ = false;  // the stores being emitted go through the caches (LoopBody)
  const bool profile_;     // profile mode: each op also reports its work
  const bool debug_;       // debug mode: #line directives to the kernel's Python lines
  const std::string report_;
  const std::string dump_dir_;
  KernelKind kind_ = KernelKind::kVector;
  std::vector<TileType> tile_types_;
  std::vector<Var> locals_;
  std::set<int> views_;  // tile variables bound by a subview
  std::set<int> restrided_;  // GM tensors an op changes in place (pl.set_stride): not const
  std::vector<Var> groups_;
  std::set<int> declared_;
  std::ostringstream body_;
  int loop_counter_ = 0;
};

}  // namespace

std::vector<std::pair<const KwargSpec*, Attr>> OpOptions(const StmtNode& s) {
  std::vector<std::pair<const KwargSpec*, Attr>> options;
  for (const KwargSpec& spec : s.op->kwargs) {
    if (spec.kind == AttrKind::kDispatch || spec.kind == AttrKind::kOperand) continue;
    Attr attr;
    attr.value = spec.default_value;
    attr.is_string = spec.kind == AttrKind::kString;
    for (const Attr& given : s.attrs) {
      if (given.name == spec.name) attr = given;
    }
    options.emplace_back(&spec, std::move(attr));
  }
  return options;
}

std::vector<std::pair<Expr, std::string>> CompactWindowChecks(const StmtNode& s) {
  std::vector<std::pair<Expr, std::string>> checks;
  const WindowRule rule = s.op->window;
  if (rule != WindowRule::kTransferTile && rule != WindowRule::kMove && rule != WindowRule::kMatmul) return checks;
  for (const Expr& arg : s.args) {
    if (!arg->type.IsTile()) continue;
    const TileType& t = *arg->type.tile;
    if ((t.layout != Layout::kNZ && t.layout != Layout::kZN) || t.compact == 1) continue;
    checks.emplace_back(arg, "tile '" + (arg->var ? arg->var->name : std::string("?")) + "' (" + t.ToString() +
                                 ") has a partial valid window, which a fractal (NZ/ZN) tile takes only with "
                                 "TileType(..., compact=1) on the NPU");
  }
  return checks;
}

GeneratedSources Generate(const Function& func, const ArchModel& arch, const CodegenOptions& options) {
  return KernelWriter(func, arch, options).Run();
}

}  // namespace pypto_pro::codegen
