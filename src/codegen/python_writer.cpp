#include "pypto_pro/codegen/python_writer.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "pypto_pro/support/source_line.h"
#include "pypto_pro/support/text.h"

namespace pypto_pro::codegen {

using namespace ir;

std::string PythonEnumOf(const OpDef& op, const KwargSpec& k) {
  if (k.cpp_prefix == "pto::kPipe") return "pl.PipeType";
  if (k.cpp_prefix == "pto::RoundMode::") return "pl.RoundMode";
  if (k.name == "sync_mode") return "pl.CrossCoreSyncMode";
  if (k.name == "acc_to_vec_mode") return "pl.AccToVecMode";
  if (k.name == "relu_pre_mode") return "pl.ReluPreMode";
  if (k.name == "atomic") return "pl.AtomicType";
  if (k.name == "core_type") return "pl.SyncCoreType";
  if (k.name == "cache_line") return "pl.CacheLine";
  if (k.name == "dst") return "pl.DcciDst";
  if (k.name == "target_type") return "pl";  // the choices are the pl.DT_* names
  if (k.name == "phase") return op.window == WindowRule::kMatmul ? "pl.AccPhase" : "pl.STPhase";
  if (k.name == "mode" && !k.choices.empty()) {
    if (k.choices.front() == "NORMAL") return "pl.FillPadMode";
    if (k.choices.front() == "HARD") return "pl.SyncAllMode";
    if (op.name.find("saturation") != std::string_view::npos) return "pl.SaturationFlagMode";
  }
  return "";
}

namespace {

std::string PlDtype(DataType d) { return "pl." + std::string(Info(d).pl_name); }

std::string FloatLiteral(double v) {
  if (std::isnan(v)) return "math.nan";
  if (std::isinf(v)) return v > 0 ? "math.inf" : "-math.inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string IntList(const std::vector<int64_t>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]";
}

std::string TileTypeText(const TileType& t) {
  std::string s = "pl.TileType(shape=" + IntList(t.shape) + ", dtype=" + PlDtype(t.dtype) +
                  ", target_memory=pl.MemorySpace." + std::string(Name(t.memory)) + ", layout=pl." +
                  std::string(Name(t.layout));
  bool runtime = true;  // all -1: the TileType default (the whole tile, set at run time)
  for (int64_t v : t.valid_shape) runtime = runtime && v == -1;
  if (!runtime) s += ", valid_shape=" + IntList(t.valid_shape);
  static const char* const kPads[] = {"null", "zero", "max", "min"};
  if (t.pad > 0 && t.pad < 4) s += std::string(", pad=pl.TilePad.") + kPads[t.pad];
  if (t.compact) s += ", compact=" + std::to_string(t.compact);
  return s + ")";
}

std::string ParamAnnotation(const Type& type) {
  switch (type.kind) {
    case TypeKind::kTensor: {
      std::string dims = "[";
      for (size_t i = 0; i < type.tensor->dims.size(); ++i) {
        const Dim& d = type.tensor->dims[i];
        dims += (i ? ", " : "") + (d.IsConstant() ? std::to_string(d.value) : std::string("pl.DYNAMIC"));
      }
      return "pl.Tensor[" + dims + "], " + PlDtype(type.dtype) + "]";
    }
    case TypeKind::kPtr: return "pl.Ptr[" + PlDtype(type.dtype) + "]";
    case TypeKind::kStruct: return type.strct->name;
    default: return PlDtype(type.dtype);
  }
}

// The op a user calls to get `op` (its public name), and how: a dispatch keyword's value, or the
// keyword an extra operand goes by.
struct CallShape {
  std::string callee;                 // "pl.sum", "pl.system.set_cross_core"
  const OpDef* parent = nullptr;      // the public op `op` is a variant of (or `op` itself)
  std::string dispatch;               // "dim=1"
  std::string operand_keyword;        // the kOperand keyword that selects `op` ("bias")
};

CallShape ShapeOf(const OpDef& op) {
  CallShape shape;
  const std::string_view public_name = op.PublicName();
  shape.callee = "pl." + std::string(public_name);
  shape.parent = FindOp(public_name);
  if (!shape.parent) shape.parent = &op;
  for (const KwargSpec& k : shape.parent->kwargs) {
    for (size_t i = 0; i < k.choices.size(); ++i) {
      if (k.choices[i] != op.name) continue;
      if (k.kind == AttrKind::kDispatch) shape.dispatch = std::string(k.name) + "=" + std::to_string(i);
      if (k.kind == AttrKind::kOperand) shape.operand_keyword = std::string(k.name);
    }
  }
  return shape;
}

class Writer {
 public:
  explicit Writer(const Function& func) : func_(func) {}

  std::string Module(const PythonKernelOptions& options) {
    std::string body;
    {
      std::ostringstream os;
      for (const Var& p : func_.params) declared_.insert(p.get());
      Block(func_.body, 1, os);
      body = os.str();
    }
    std::ostringstream out;
    for (const std::string& line : options.header) out << "# " << line << "\n";
    out << "\nfrom __future__ import annotations\n\nimport dataclasses\nimport math\n\n"
           "import pypto_pro.language as pl\n\n";
    if (!unsupported_.empty()) {
      out << "raise NotImplementedError(" << QuotedLiteral("this kernel cannot be written as pypto_pro Python yet: " +
                                                           unsupported_)
          << ")\n\n";
    }
    std::set<std::string> structs;
    for (const Var& p : func_.params) {
      if (p->type.kind != TypeKind::kStruct || !structs.insert(p->type.strct->name).second) continue;
      out << "\n@dataclasses.dataclass\nclass " << p->type.strct->name << ":\n";
      for (const StructField& f : p->type.strct->fields) {
        std::string t = f.dtype == DataType::kFP32 ? "float" : f.dtype == DataType::kBool ? "bool" : "int";
        out << "    " << f.name << ": " << (f.count ? t + "[" + std::to_string(f.count) + "]" : t) << "\n";
      }
      out << "\n";
    }
    out << "\n@pl.jit(" << options.decorator_args << ")\ndef " << options.function_name << "(";
    for (size_t i = 0; i < func_.params.size(); ++i) {
      out << (i ? ", " : "") << func_.params[i]->name << ": " << ParamAnnotation(func_.params[i]->type);
    }
    out << "):\n" << body;
    return out.str();
  }

 private:
  void Unsupported(const std::string& what, const Span& span) {
    if (!unsupported_.empty()) return;  // the first one is enough to say
    unsupported_ = what + " (" + LineFileName(span.line, func_.source_file, func_.other_files) + ":" +
                   std::to_string(LineNumber(span.line)) + ")";
  }

  // An expression. Casts inside it become annotated temporaries assigned in `pre` (the only way the
  // language spells a run-time conversion).
  std::string E(const Expr& e, std::vector<std::string>& pre) {
    switch (e->kind) {
      case ExprKind::kConst:
        if (e->type.dtype == DataType::kBool) return e->int_value ? "True" : "False";
        if (IsFloat(e->type.dtype)) return FloatLiteral(e->float_value);
        if (e->type.dtype == DataType::kInt32) return std::to_string(e->int_value);
        return "pl.const(" + std::to_string(e->int_value) + ", " + PlDtype(e->type.dtype) + ")";
      case ExprKind::kVar: return e->var->name;
      case ExprKind::kBinary: {
        if (e->binary == BinaryOp::kMin || e->binary == BinaryOp::kMax) {
          return std::string(e->binary == BinaryOp::kMin ? "pl.min(" : "pl.max(") + E(e->operands[0], pre) + ", " +
                 E(e->operands[1], pre) + ")";
        }
        // Comparisons do not chain here: a == b == c would mean something else in Python.
        const int p = Precedence(e), left_min = IsComparison(e->binary) ? p + 1 : p;
        const char* sym = e->binary == BinaryOp::kAnd ? "and" : e->binary == BinaryOp::kOr ? "or" : Symbol(e->binary);
        return Operand(e->operands[0], left_min, pre) + " " + sym + " " + Operand(e->operands[1], p + 1, pre);
      }
      case ExprKind::kUnary: {
        const char* sym = e->unary == UnaryOp::kNeg ? "-" : e->unary == UnaryOp::kNot ? "not " : "~";
        return sym + Operand(e->operands[0], Precedence(e), pre);
      }
      case ExprKind::kTernary:
        return "(" + E(e->operands[1], pre) + " if " + E(e->operands[0], pre) + " else " + E(e->operands[2], pre) + ")";
      case ExprKind::kCast: {
        const std::string name = "cast_t" + std::to_string(++temps_);
        pre.push_back(name + ": " + PlDtype(e->type.dtype) + " = " + E(e->operands[0], pre));
        return name;
      }
      case ExprKind::kBuiltin: {
        std::string s = "pl." + std::string(Name(e->builtin)) + "(";
        for (size_t i = 0; i < e->operands.size(); ++i) s += (i ? ", " : "") + E(e->operands[i], pre);
        return s + ")";
      }
      case ExprKind::kShapeDim: return e->var->name + ".shape[" + std::to_string(e->axis) + "]";
      case ExprKind::kField: {
        std::string s = e->var->name + "." + e->var->type.strct->fields[size_t(e->axis)].name;
        return e->operands.empty() ? s : s + "[" + E(e->operands[0], pre) + "]";
      }
      case ExprKind::kElement: return "pl.getval(" + e->var->name + ", " + E(e->operands[0], pre) + ")";
      case ExprKind::kValidShape:
        return e->var->name + ".valid_shape[" + std::to_string(e->var->type.tile->shape.size() == 1 ? 0 : e->axis) + "]";
      case ExprKind::kTuple: {
        std::string s = "[";
        for (size_t i = 0; i < e->operands.size(); ++i) s += (i ? ", " : "") + E(e->operands[i], pre);
        return s + "]";
      }
      case ExprKind::kMakeView: {
        const size_t rank = size_t(e->axis);
        auto list = [&](size_t first) {
          std::string s = "[";
          for (size_t i = 0; i < rank; ++i) s += (i ? ", " : "") + E(e->operands[first + i], pre);
          return s + "]";
        };
        std::string s = "pl.make_tensor(" + E(e->operands[0], pre) + ", " + list(1);
        if (e->operands.size() > 1 + rank) s += ", stride=" + list(1 + rank);
        return s + ", dtype=" + PlDtype(e->type.dtype) + ")";
      }
      case ExprKind::kPtrOffset:
        if (e->type.dtype != e->operands[0]->type.dtype) {
          return "pl.make_ptr(" + E(e->operands[0], pre) + ", " + PlDtype(e->type.dtype) + ")";
        }
        return "pl.addptr(" + E(e->operands[0], pre) + ", " + E(e->operands[1], pre) + ")";
    }
    return "None";
  }

  // Python's binding strength of the operator at the top of `e` (higher binds tighter).
  static int Precedence(const Expr& e) {
    if (e->kind == ExprKind::kUnary) return e->unary == UnaryOp::kNot ? 3 : 11;
    if (e->kind != ExprKind::kBinary || e->binary == BinaryOp::kMin || e->binary == BinaryOp::kMax) return 20;
    switch (e->binary) {
      case BinaryOp::kOr: return 1;
      case BinaryOp::kAnd: return 2;
      case BinaryOp::kBitOr: return 5;
      case BinaryOp::kBitXor: return 6;
      case BinaryOp::kBitAnd: return 7;
      case BinaryOp::kShl: case BinaryOp::kShr: return 8;
      case BinaryOp::kAdd: case BinaryOp::kSub: return 9;
      case BinaryOp::kMul: case BinaryOp::kDiv: case BinaryOp::kFloorDiv: case BinaryOp::kMod: return 10;
      default: return 4;  // comparisons
    }
  }

  // `e` as an operand that must bind at least as tightly as `min_precedence`.
  std::string Operand(const Expr& e, int min_precedence, std::vector<std::string>& pre) {
    const std::string text = E(e, pre);
    return Precedence(e) < min_precedence ? "(" + text + ")" : text;
  }

  // Writes `line` after the temporaries its expressions needed.
  void Line(std::ostream& os, int indent, const std::vector<std::string>& pre, const std::string& line) {
    const std::string pad(size_t(indent) * 4, ' ');
    for (const std::string& p : pre) os << pad << p << "\n";
    os << pad << line << "\n";
  }

  void Block(const Stmt& s, int indent, std::ostream& os) {
    std::ostringstream body;
    Stmt_(s, indent, body);
    const std::string text = body.str();
    os << (text.empty() ? std::string(size_t(indent) * 4, ' ') + "pass\n" : text);
  }

  std::string AttrValue(const OpDef& op, const KwargSpec* spec, const Attr& attr) {
    if (attr.is_string) return QuotedLiteral(attr.text);
    if (!spec) return std::to_string(attr.value);
    switch (spec->kind) {
      case AttrKind::kEnum: {
        if (attr.value < 0 || attr.value >= int64_t(spec->choices.size())) return "None";
        const std::string choice(spec->choices[size_t(attr.value)]);
        const std::string enum_path = PythonEnumOf(op, *spec);
        return enum_path.empty() ? QuotedLiteral(choice) : enum_path + "." + choice;
      }
      case AttrKind::kAxes:
        return attr.value < 0 ? "None" : "[" + std::to_string(attr.value >> 8) + ", " + std::to_string(attr.value & 0xff) + "]";
      case AttrKind::kFloat:
        return attr.value < 0 ? "None" : FloatLiteral(double(__builtin_bit_cast(float, uint32_t(attr.value))));
      case AttrKind::kBool: return attr.value ? "True" : "False";
      default: return std::to_string(attr.value);
    }
  }

  void Op(const StmtNode& s, int indent, std::ostream& os) {
    const OpDef& op = *s.op;
    std::vector<std::string> pre;
    if (op.name == "check_index") {  // a run-time list index: out of range stops the kernel
      const std::string index = E(s.args[0], pre);
      Line(os, indent, pre, "if " + index + " < " + std::to_string(s.attrs[0].value) + " or " + index + " > " +
                                std::to_string(s.attrs[1].value) + ":  # " + s.attrs[2].text + " out of range");
      Line(os, indent + 1, {}, "pl.trap()");
      return;
    }
    if (op.name == "index_fault") {  // the last branch of a dispatch over a run-time id
      Line(os, indent, {}, "pl.trap()  # " + s.attrs[0].text + " is none of " + s.attrs[1].text);
      return;
    }
    if (op.internal) {
      Unsupported("the internal op " + std::string(op.name), s.span);
      return;
    }
    if (op.name == "dump_data" || op.name == "dump_data_ws" || op.name == "set_vec_mask" ||
        op.name == "set_saturation_flag" || op.name == "init_output") {
      Unsupported("pl." + std::string(op.PublicName()), s.span);  // their front ends rebuild the operands
      return;
    }
    const CallShape shape = ShapeOf(op);
    std::vector<std::string> parts;
    auto attr_of = [&](std::string_view name) -> const Attr* {
      for (const Attr& a : s.attrs) {
        if (a.name == name) return &a;
      }
      return nullptr;
    };
    size_t first_operand = 0;
    if (op.call_form != CallForm::kOperands) {
      if (op.call_form == CallForm::kAssert) parts.push_back(E(s.args[first_operand++], pre));
      parts.push_back(QuotedLiteral(attr_of("fmt")->text));
      for (const Expr& arg : s.args[first_operand]->operands) parts.push_back(E(arg, pre));
      if (const Attr* loc = attr_of("loc"); loc && loc->value) parts.push_back("loc=True");
      Line(os, indent, pre, shape.callee + "(" + Join(parts) + ")");
      return;
    }
    const size_t positional = std::min(shape.parent->operands.size(), s.args.size());
    for (size_t i = 0; i < s.args.size(); ++i) {
      const std::string value = E(s.args[i], pre);
      if (i < positional) {
        parts.push_back(value);
      } else {
        const std::string key = shape.operand_keyword.empty() ? std::string(op.operands[i].name) : shape.operand_keyword;
        parts.push_back(key + "=" + value);
      }
    }
    if (!shape.dispatch.empty()) parts.push_back(shape.dispatch);
    for (const Attr& attr : s.attrs) {
      const KwargSpec* spec = op.FindKwarg(attr.name);
      // Defaults of optional keywords go unsaid; required ones (ids, pipes) always show.
      if (spec && !spec->required && !attr.is_string && attr.value == spec->default_value) continue;
      parts.push_back(attr.name + "=" + AttrValue(op, spec, attr));
    }
    Line(os, indent, pre, shape.callee + "(" + Join(parts) + ")");
  }

  static std::string Join(const std::vector<std::string>& parts) {
    std::string s;
    for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
    return s;
  }

  void Stmt_(const Stmt& s, int indent, std::ostream& os) {
    if (!s) return;
    std::vector<std::string> pre;
    switch (s->kind) {
      case StmtKind::kSeq:
        for (const Stmt& child : s->stmts) Stmt_(child, indent, os);
        break;
      case StmtKind::kAssign: {
        const Var& v = s->var;
        const bool first = declared_.insert(v.get()).second;
        if (v->type.IsScalar() && first) {
          // The annotation fixes the variable's dtype for every later assignment, as the IR has it.
          const Expr& value = s->value->kind == ExprKind::kCast ? s->value->operands[0] : s->value;
          const std::string text = E(value, pre);
          Line(os, indent, pre, v->name + ": " + PlDtype(v->type.dtype) + " = " + text);
        } else {
          const std::string text = E(s->value, pre);
          Line(os, indent, pre, v->name + " = " + text);
        }
        break;
      }
      case StmtKind::kFor: {
        declared_.insert(s->var.get());
        const std::string a = E(s->start, pre), b = E(s->stop, pre), c = E(s->step, pre);
        Line(os, indent, pre, "for " + s->var->name + " in pl.range(" + a + ", " + b + ", " + c + "):");
        Block(s->body, indent + 1, os);
        break;
      }
      case StmtKind::kWhile: {
        const std::string cond = E(s->cond, pre);
        if (!pre.empty()) Unsupported("a conversion in a while condition", s->span);
        Line(os, indent, {}, "while " + cond + ":");
        Block(s->body, indent + 1, os);
        break;
      }
      case StmtKind::kIf: {
        const std::string cond = E(s->cond, pre);
        Line(os, indent, pre, "if " + cond + ":");
        Block(s->body, indent + 1, os);
        if (s->orelse) {
          Line(os, indent, {}, "else:");
          Block(s->orelse, indent + 1, os);
        }
        break;
      }
      case StmtKind::kBreak: Line(os, indent, {}, "break"); break;
      case StmtKind::kContinue: Line(os, indent, {}, "continue"); break;
      case StmtKind::kReturn: Line(os, indent, {}, "return"); break;
      case StmtKind::kOp: Op(*s, indent, os); break;
      case StmtKind::kDeclTiles: {
        // Every declaration is a group (make_tile too, as a group of one): the IR selects its tile.
        // The cross-core flags fwd_ids/bwd_ids stood for are written out, so they are not repeated.
        const TileGroupInfo& g = *s->var->group;
        std::string addrs = "[";
        for (size_t i = 0; i < g.addrs.size(); ++i) addrs += (i ? ", " : "") + Hex(uint64_t(g.addrs[i]));
        std::string line = s->var->name + " = pl.make_tile_group(type=" + TileTypeText(g.tile) + ", addrs=" + addrs + "]";
        if (!g.mutex_ids.empty()) {
          line += ", mutex_ids=[";
          for (size_t i = 0; i < g.mutex_ids.size(); ++i) {
            line += (i ? ", " : "") + IntList(std::vector<int64_t>(g.mutex_ids[i].begin(), g.mutex_ids[i].end()));
          }
          line += "]";
        }
        if (g.mutex_ids.empty() || size_t(g.depth) != g.addrs.size()) line += ", depth=" + std::to_string(g.depth);
        Line(os, indent, {}, line + ")");
        break;
      }
      case StmtKind::kSelectTile:
        if (s->mode == SelectMode::kIndex) {
          const std::string index = E(s->value, pre);
          Line(os, indent, pre, s->var->name + " = " + s->group->name + "[" + index + "]");
        } else {
          Line(os, indent, {}, s->var->name + " = " + s->group->name + "." + Name(s->mode) + "()");
        }
        break;
      case StmtKind::kSection:
        Line(os, indent, {}, std::string("with pl.section_") + Name(s->section) + "():");
        Block(s->body, indent + 1, os);
        break;
      case StmtKind::kSubview: {
        std::string b[4];
        for (int i = 0; i < 4; ++i) b[i] = E(s->args[size_t(i)], pre);
        Line(os, indent, pre, s->var->name + " = " + E(s->value, pre) + "[" + b[0] + ":" + b[1] + ", " + b[2] + ":" + b[3] + "]");
        break;
      }
      case StmtKind::kReinterpret: {
        const TileType& t = *s->var->type.tile;
        Line(os, indent, pre, s->var->name + " = pl.reinterpret(" + E(s->value, pre) + ", dtype=" + PlDtype(t.dtype) +
                                  ", shape=" + IntList(t.shape) + ", layout=pl." + std::string(Name(t.layout)) + ")");
        break;
      }
      case StmtKind::kDirectRun:  // (written before fusion: never met)
      case StmtKind::kDirectLoop:
      case StmtKind::kFusedOps:
      case StmtKind::kForwardedMove:
      case StmtKind::kForwardedReads:
      case StmtKind::kInPlaceLoad:
      case StmtKind::kKLoop: Stmt_(s->body, indent, os); break;
      case StmtKind::kStage: {
        std::ostringstream body;
        Stmt_(s->body, indent, body);
        Line(os, indent, {}, "# stage " + s->attrs.at(0).text);
        os << (body.str().empty() ? std::string(size_t(indent) * 4, ' ') + "pass\n" : body.str());
        break;
      }
    }
  }

  const Function& func_;
  std::set<const VarNode*> declared_;
  std::string unsupported_;
  int temps_ = 0;
};

}  // namespace

std::string KernelAsPython(const Function& func, const PythonKernelOptions& options) {
  return Writer(func).Module(options);
}

}  // namespace pypto_pro::codegen
