#include "pypto_pro/ir/printer.h"
#include "pypto_pro/support/text.h"

#include <cstdio>
#include <sstream>

namespace pypto_pro::ir {

namespace {

std::string FloatText(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

// A Python string literal: printf formats end in newlines, which must not break the IR's lines.
std::string Quoted(const std::string& text) { return QuotedLiteral(text, '\''); }

std::string PrintOperand(const Expr& e) {
  std::string s = Print(e);
  return e->kind == ExprKind::kBinary ? "(" + s + ")" : s;
}

}  // namespace

std::string Print(const Expr& e) {
  if (!e) return "<null>";
  switch (e->kind) {
    case ExprKind::kConst:
      if (e->type.dtype == DataType::kBool) return e->int_value ? "True" : "False";
      if (IsFloat(e->type.dtype)) return FloatText(e->float_value);
      return std::to_string(e->int_value);
    case ExprKind::kVar: return e->var->name;
    case ExprKind::kBinary:
      if (e->binary == BinaryOp::kMin || e->binary == BinaryOp::kMax) {
        return std::string(Symbol(e->binary)) + "(" + Print(e->operands[0]) + ", " + Print(e->operands[1]) + ")";
      }
      return PrintOperand(e->operands[0]) + " " + Symbol(e->binary) + " " + PrintOperand(e->operands[1]);
    case ExprKind::kUnary:
      return (e->unary == UnaryOp::kNeg ? "-" : e->unary == UnaryOp::kNot ? "not " : "~") + PrintOperand(e->operands[0]);
    case ExprKind::kTernary:
      return "(" + Print(e->operands[1]) + " if " + Print(e->operands[0]) + " else " + Print(e->operands[2]) + ")";
    case ExprKind::kCast: return std::string(Name(e->type.dtype)) + "(" + Print(e->operands[0]) + ")";
    case ExprKind::kBuiltin: {
      std::string s = std::string(Name(e->builtin)) + "(";
      for (size_t i = 0; i < e->operands.size(); ++i) s += (i ? ", " : "") + Print(e->operands[i]);
      return s + ")";
    }
    case ExprKind::kShapeDim: return e->var->name + ".shape[" + std::to_string(e->axis) + "]";
    case ExprKind::kField: {
      std::string s = e->var->name + "." + e->var->type.strct->fields[size_t(e->axis)].name;
      return e->operands.empty() ? s : s + "[" + Print(e->operands[0]) + "]";
    }
    case ExprKind::kElement: return "getval(" + e->var->name + ", " + Print(e->operands[0]) + ")";
    case ExprKind::kValidShape:
      return e->var->name + ".valid_shape[" +
             std::to_string(e->var->type.tile->shape.size() == 1 ? 0 : e->axis) + "]";
    case ExprKind::kTuple: {
      std::string s = "[";
      for (size_t i = 0; i < e->operands.size(); ++i) s += (i ? ", " : "") + Print(e->operands[i]);
      return s + "]";
    }
    case ExprKind::kMakeView: {
      const size_t rank = size_t(e->axis);
      auto list = [&](size_t first) {
        std::string s = "[";
        for (size_t i = 0; i < rank; ++i) s += (i ? ", " : "") + Print(e->operands[first + i]);
        return s + "]";
      };
      return "make_tensor(" + Print(e->operands[0]) + ", " + list(1) +
             (e->operands.size() > 1 + rank ? ", " + list(1 + rank) : "") + ", " + std::string(Name(e->type.dtype)) +
             ")";
    }
    case ExprKind::kPtrOffset:
      if (e->type.dtype != e->operands[0]->type.dtype) {
        return "make_ptr(" + Print(e->operands[0]) + ", " + std::string(Name(e->type.dtype)) + ")";
      }
      return "addptr(" + Print(e->operands[0]) + ", " + Print(e->operands[1]) + ")";
  }
  return "?";
}

std::string Print(const Stmt& s, int indent) {
  std::string pad(indent * 2, ' ');
  if (!s) return pad + "pass\n";
  std::ostringstream os;
  switch (s->kind) {
    case StmtKind::kSeq:
      if (s->stmts.empty()) return pad + "pass\n";
      for (const Stmt& child : s->stmts) os << Print(child, indent);
      return os.str();
    case StmtKind::kAssign: os << pad << s->var->name << " = " << Print(s->value) << "\n"; break;
    case StmtKind::kFor:
      os << pad << "for " << s->var->name << " in range(" << Print(s->start) << ", " << Print(s->stop) << ", "
         << Print(s->step) << "):\n"
         << Print(s->body, indent + 1);
      break;
    case StmtKind::kWhile: os << pad << "while " << Print(s->cond) << ":\n" << Print(s->body, indent + 1); break;
    case StmtKind::kIf:
      os << pad << "if " << Print(s->cond) << ":\n" << Print(s->body, indent + 1);
      if (s->orelse) os << pad << "else:\n" << Print(s->orelse, indent + 1);
      break;
    case StmtKind::kBreak: os << pad << "break\n"; break;
    case StmtKind::kContinue: os << pad << "continue\n"; break;
    case StmtKind::kReturn: os << pad << "return\n"; break;
    case StmtKind::kOp: {
      os << pad << s->op->name << "(";
      for (size_t i = 0; i < s->args.size(); ++i) os << (i ? ", " : "") << Print(s->args[i]);
      bool first = s->args.empty();
      for (const Attr& attr : s->attrs) {
        const KwargSpec* spec = s->op->FindKwarg(attr.name);
        // Defaults of optional keywords go unsaid; required ones (ids, pipes) always show.
        if (spec && !spec->required && !attr.is_string && attr.value == spec->default_value) continue;
        os << (first ? "" : ", ") << attr.name << "=";
        first = false;
        if (attr.is_string) {
          os << Quoted(attr.text);
        } else if (spec && spec->kind == AttrKind::kEnum && attr.value >= 0 &&
                   attr.value < int64_t(spec->choices.size())) {
          os << spec->choices[size_t(attr.value)];
        } else if (spec && spec->kind == AttrKind::kEnum && attr.value < 0) {
          os << "None";  // an enum option not given
        } else if (spec && spec->kind == AttrKind::kAxes) {
          if (attr.value < 0) os << "None";
          else os << "[" << (attr.value >> 8) << ", " << (attr.value & 0xff) << "]";
        } else if (spec && spec->kind == AttrKind::kFloat) {
          if (attr.value < 0) os << "None";
          else os << __builtin_bit_cast(float, uint32_t(attr.value));
        } else if (spec && spec->kind == AttrKind::kBool) {
          os << (attr.value ? "True" : "False");
        } else {
          os << attr.value;
        }
      }
      os << ")\n";
      break;
    }
    case StmtKind::kDeclTiles: {
      const TileGroupInfo& g = *s->var->group;
      os << pad << s->var->name << " = " << (g.single_tile ? "make_tile(" : "make_tile_group(") << g.tile.ToString()
         << ", addrs=[";
      for (size_t i = 0; i < g.addrs.size(); ++i) os << (i ? ", " : "") << Hex(g.addrs[i]);
      os << "]";
      if (!g.mutex_ids.empty()) {
        os << ", mutex_ids=[";
        for (size_t i = 0; i < g.mutex_ids.size(); ++i) {
          os << (i ? ", " : "") << "[";
          for (size_t j = 0; j < g.mutex_ids[i].size(); ++j) os << (j ? ", " : "") << g.mutex_ids[i][j];
          os << "]";
        }
        os << "]";
      }
      for (const auto& [key, ids] : {std::pair{"fwd_ids", &g.fwd_ids}, std::pair{"bwd_ids", &g.bwd_ids}}) {
        if (ids->empty()) continue;
        os << ", " << key << "=[";
        for (size_t i = 0; i < ids->size(); ++i) os << (i ? ", " : "") << (*ids)[i];
        os << "]";
      }
      os << ", depth=" << g.depth << ")\n";
      break;
    }
    case StmtKind::kSelectTile:
      os << pad << s->var->name << " = " << s->group->name;
      if (s->mode == SelectMode::kIndex) os << "[" << Print(s->value) << "]\n";
      else os << "." << Name(s->mode) << "()\n";
      break;
    case StmtKind::kSection: os << pad << "section " << Name(s->section) << ":\n" << Print(s->body, indent + 1); break;
    case StmtKind::kSubview:
      os << pad << s->var->name << " = " << Print(s->value) << "[" << Print(s->args[0]) << ":" << Print(s->args[1])
         << ", " << Print(s->args[2]) << ":" << Print(s->args[3]) << "]\n";
      break;
    case StmtKind::kStage:
      os << pad << "stage " << s->attrs.at(0).text << ":\n" << Print(s->body, indent + 1);
      break;
    case StmtKind::kDirectRun: {
      std::string unwritten;
      for (const Attr& attr : s->attrs) unwritten += (unwritten.empty() ? "" : ", ") + attr.text;
      os << pad << "direct run (tiles not written: " << (unwritten.empty() ? "none" : unwritten) << "):\n"
         << Print(s->body, indent + 1);
      break;
    }
    case StmtKind::kDirectLoop: os << pad << "direct loop:\n" << Print(s->body, indent + 1); break;
    case StmtKind::kKLoop: os << pad << "k loop (one GEMM over its steps):\n" << Print(s->body, indent + 1); break;
    case StmtKind::kFusedOps: os << pad << "fused ops:\n" << Print(s->body, indent + 1); break;
    case StmtKind::kForwardedMove: os << pad << "forwarded (not run):\n" << Print(s->body, indent + 1); break;
    case StmtKind::kInPlaceLoad:
      os << pad << "in place #" << s->attrs.at(0).value << " (window checked, left in GM):\n" << Print(s->body, indent + 1);
      break;
    case StmtKind::kForwardedReads: {
      std::string pairs;
      for (size_t i = 0; i + 1 < s->args.size(); i += 2) {
        const int64_t in_place = s->attrs.at(i / 2).value;
        pairs += (i ? ", " : "") + Print(s->args[i + 1]) +
                 (in_place >= 0 ? " (in place #" + std::to_string(in_place) + ")" : "") + " for " + Print(s->args[i]);
      }
      os << pad << "reading " << pairs << ":\n" << Print(s->body, indent + 1);
      break;
    }
    case StmtKind::kReinterpret:
      os << pad << s->var->name << " = reinterpret(" << Print(s->value) << ") as " << s->var->type.ToString() << "\n";
      break;
  }
  return os.str();
}

std::string Print(const Function& f) {
  std::ostringstream os;
  os << "kernel " << f.name << "(";
  for (size_t i = 0; i < f.params.size(); ++i) {
    os << (i ? ", " : "") << f.params[i]->name << ": " << f.params[i]->type.ToString();
  }
  os << "):\n" << Print(f.body, 1);
  return os.str();
}

}  // namespace pypto_pro::ir
