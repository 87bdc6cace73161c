#include "pypto_pro/ir/op_registry.h"

#include <algorithm>
#include <optional>

#include "op_tables.h"
#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

namespace {

std::vector<OpDef> BuildOps() {
  std::vector<OpDef> ops;
  AddTransferOps(ops);
  AddVectorOps(ops);
  AddCubeOps(ops);
  AddSyncOps(ops);
  AddTileOps(ops);
  AddDebugOps(ops);
  AddSsbufOps(ops);
  AddRegisterOps(ops);
  return ops;
}

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

}  // namespace

Pipe OpDef::PipeFor(const std::vector<MemorySpace>& mems) const {
  switch (pipe_rule) {
    case PipeRule::kFixed: return pipe;
    case PipeRule::kBySourceTile:
      return std::find(mems.begin(), mems.end(), MemorySpace::kAcc) != mems.end() ? Pipe::kFIX : pipe;
    case PipeRule::kByMove: {
      if (mems.size() < 2) return pipe;
      MemorySpace dst = mems[0], src = mems[1];
      if (src == MemorySpace::kAcc) return Pipe::kFIX;
      if (src == MemorySpace::kMat && dst == MemorySpace::kScaling) return Pipe::kFIX;  // the fixpipe's table
      if (src == MemorySpace::kVec && IsCubeMemory(dst)) return Pipe::kMTE3;
      if (src == MemorySpace::kMat && dst == MemorySpace::kVec) return Pipe::kV;
      if (src == MemorySpace::kMat) return Pipe::kMTE1;
      return pipe;
    }
  }
  return pipe;
}

std::string OpDef::Signature() const {
  std::string s = "pl." + std::string(PublicName()) + "(";
  for (size_t i = 0; i < operands.size(); ++i) s += (i ? ", " : "") + std::string(operands[i].name);
  return s + ")";
}

const KwargSpec* OpDef::FindKwarg(std::string_view kwarg) const {
  for (const KwargSpec& k : kwargs) {
    if (k.name == kwarg) return &k;
  }
  return nullptr;
}

const std::vector<OpDef>& AllOps() {
  static const std::vector<OpDef> ops = BuildOps();
  return ops;
}

const OpDef* FindOp(std::string_view name) {
  for (const OpDef& op : AllOps()) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

const std::vector<PlannedOp>& PlannedOps() {
  static const std::vector<PlannedOp> planned = {
      {"gather", "out[i] = src[idx[i]]: gather the elements of a Vec tile by an index tile"},
      {"gatherb", "gather the 32-byte blocks of a Vec tile by a tile of byte offsets"},
      {"gathermask", "keep the elements of a Vec tile that a bit pattern selects (pattern_mode=)"},
      {"scatter", "out[idx[i]] = src[i]: scatter the elements of a Vec tile by an index tile"},
      {"mrgsort", "merge-sort the sorted blocks (block_len=) of (value, index) pairs of a Vec tile"},
      {"mrgsort2", "merge two to four sorted lists of (value, index) pairs into one"},
      {"sort32", "sort each group of 32 elements of a Vec tile, with their indices"},
      {"histogram", "per-row histogram of the high or low bytes (is_msb=) of a uint16 Vec tile"},
      {"quant", "quantise a float Vec tile with a scale tile (mode=pl.QuantMode.SYM / ASYM with offset=)"},
      {"dequant", "dequantise an integer Vec tile with scale and offset tiles"},
      {"matmul_mx", "MX matmul of FP8/FP4 Left/Right tiles with E8M0 scales in ScaleLeft/ScaleRight tiles"},
      {"matmul_mx_acc", "MX matmul accumulated onto an Acc tile"},
      {"astype", "convert a scalar to another dtype"},
  };
  return planned;
}

namespace {

Attr IntAttr(std::string name, int64_t value) {
  Attr a;
  a.name = std::move(name);
  a.value = value;
  return a;
}

Attr TextAttr(std::string name, std::string text) {
  Attr a;
  a.name = std::move(name);
  a.is_string = true;
  a.text = std::move(text);
  return a;
}

// `op(..., <k.name>=<run-time id>)`: if id == v0: op(..., v0) elif id == v1: ... else a fault, over
// every id the op accepts with these arguments (the ones its checks refuse are left out).
Stmt DispatchRuntimeId(const OpDef& op, const KwargSpec& k, const std::string& name, const std::vector<Expr>& args,
                       const std::map<std::string, KwargValue>& kwargs, const Expr& id, Span span) {
  const std::string what = "pl." + std::string(op.PublicName()) + "(): " + std::string(k.name);
  if (!id->type.IsScalar() || IsFloat(id->type.dtype) || id->type.dtype == DataType::kBool) {
    Fail(ErrorKind::kType, span, what + " must be an int, got " + id->type.ToString());
  }
  std::vector<std::pair<int64_t, Stmt>> branches;
  std::optional<CompileDiagnostic> refused;
  for (int64_t v = k.min_value; v <= k.max_value; ++v) {
    std::map<std::string, KwargValue> with_id = kwargs;
    with_id[std::string(k.name)] = KwargValue{KwargValue::Kind::kInt, v, {}, nullptr};
    try {
      Stmt call = BuildOpCall(name, args, with_id, span);
      if (call->kind == StmtKind::kOp && call->op->check) call->op->check(*call);
      branches.emplace_back(v, std::move(call));
    } catch (const CompileDiagnostic& e) {
      if (!refused) refused = e;
    }
  }
  if (branches.empty()) throw *refused;
  std::string legal;  // runs of consecutive ids: "0..15", "0..3, 8..15"
  for (size_t i = 0; i < branches.size();) {
    size_t j = i;
    while (j + 1 < branches.size() && branches[j + 1].first == branches[j].first + 1) ++j;
    legal += (legal.empty() ? "" : ", ") + std::to_string(branches[i].first);
    if (j > i) legal += ".." + std::to_string(branches[j].first);
    i = j + 1;
  }
  Stmt chain = OpCall(FindOp("index_fault"), {id}, {TextAttr("what", what), TextAttr("legal", legal)}, span);
  for (auto it = branches.rbegin(); it != branches.rend(); ++it) {
    chain = If(Binary(BinaryOp::kEq, id, IntConst(it->first, span), span), it->second, chain, span);
  }
  return chain;
}

}  // namespace

Stmt CheckIndexCall(Expr index, int64_t lo, int64_t hi, const std::string& what, Span span) {
  if (!index->type.IsScalar() || IsFloat(index->type.dtype) || index->type.dtype == DataType::kBool) {
    Fail(ErrorKind::kType, span, "the index of " + what + " must be an int, got " + index->type.ToString());
  }
  return OpCall(FindOp("check_index"), {std::move(index)},
                {IntAttr("lo", lo), IntAttr("hi", hi), TextAttr("what", what)}, span);
}

Stmt BuildOpCall(const std::string& name, std::vector<Expr> args, const std::map<std::string, KwargValue>& kwargs,
                 Span span) {
  const OpDef* op = FindOp(name);
  if (op && !op->internal && op->PublicName() == op->name) {
    for (const KwargSpec& k : op->kwargs) {
      auto it = kwargs.find(std::string(k.name));
      if (!k.runtime_dispatch || it == kwargs.end() || it->second.kind != KwargValue::Kind::kExpr) continue;
      if (it->second.e->IsIntConst()) {  // a constant expression is the compile-time id
        std::map<std::string, KwargValue> constant = kwargs;
        constant[std::string(k.name)] = KwargValue{KwargValue::Kind::kInt, it->second.e->int_value, {}, nullptr};
        return BuildOpCall(name, std::move(args), constant, span);
      }
      return DispatchRuntimeId(*op, k, name, args, kwargs, it->second.e, span);
    }
  }
  if (op && (op->internal || op->PublicName() != op->name)) op = nullptr;  // not callable by this name
  if (!op) {
    for (const PlannedOp& planned : PlannedOps()) {
      if (planned.name == name) {
        Fail(ErrorKind::kUnsupported, span,
             "pl." + name + " is part of the public language but is not implemented yet (planned for a later "
             "version: " + std::string(planned.doc) + "; see docs/language.md#planned)");
      }
    }
    Fail(ErrorKind::kUndefined, span, "pl." + name + " is not an op of the tile language");
  }
  std::string callee = "pl." + name + "()";
  const OpDef* called = op;

  // Keywords that choose another op: dispatch values (sum(..., dim=1)) and optional operands.
  std::map<std::string, KwargValue> rest = kwargs;
  // A number option whose tile and run-time forms are other ops (store's scale= given a Scaling
  // tile: choices[0], the per-channel path; a run-time scalar: choices[1]), the value appended as
  // the op's last operand.
  for (const KwargSpec& k : op->kwargs) {
    if (k.kind != AttrKind::kFloat || k.choices.empty()) continue;
    auto it = rest.find(std::string(k.name));
    if (it == rest.end() || it->second.kind != KwargValue::Kind::kExpr) continue;
    const Expr& value = it->second.e;
    const bool tile = value->type.IsTile();
    const bool runtime = value->type.IsScalar() && !value->IsConst();
    if (!tile && !(runtime && k.choices.size() > 1)) continue;
    args.push_back(value);
    rest.erase(it);
    op = FindOp(k.choices[tile ? 0 : 1]);
    break;
  }
  for (const KwargSpec& k : op->kwargs) {
    if (k.kind != AttrKind::kDispatch && k.kind != AttrKind::kOperand) continue;
    auto it = rest.find(std::string(k.name));
    if (k.kind == AttrKind::kOperand) {
      const bool positional = args.size() == op->operands.size() + 1;
      const bool by_keyword = it != rest.end() && it->second.kind != KwargValue::Kind::kNone;
      if (positional && by_keyword) Fail(ErrorKind::kType, span, callee + " got '" + std::string(k.name) + "' twice");
      if (it != rest.end() && !by_keyword) rest.erase(it);
      if (!positional && !by_keyword) continue;
      if (by_keyword && it->second.kind == KwargValue::Kind::kInt) {
        args.push_back(IntConst(it->second.i, span));  // a linear offset given as an int
        rest.erase(it);
      } else if (by_keyword) {
        if (it->second.kind != KwargValue::Kind::kExpr) {
          Fail(ErrorKind::kType, span, callee + ": '" + std::string(k.name) + "' must be " +
                                           (FindOp(k.choices[0])->operands.back().kind == OperandKind::kTile
                                                ? "a tile"
                                                : "a list of indices"));
        }
        args.push_back(it->second.e);
        rest.erase(it);
      }
      op = FindOp(k.choices[0]);
      break;
    }
    int64_t index = k.default_value;
    if (it != rest.end() && it->second.kind != KwargValue::Kind::kNone) {
      if (it->second.kind != KwargValue::Kind::kInt) {
        Fail(ErrorKind::kType, span, callee + ": '" + std::string(k.name) + "' must be a compile-time int");
      }
      index = it->second.i;
      if (index < 0 || index >= int64_t(k.choices.size())) {
        Fail(ErrorKind::kValue, span,
             callee + ": " + std::string(k.name) + "=" + std::to_string(index) + " is out of range [0, " +
                 std::to_string(k.choices.size() - 1) + "]");
      }
    }
    if (it != rest.end()) rest.erase(it);
    if (index >= 0) {
      op = FindOp(k.choices[size_t(index)]);
      break;
    }
  }

  // Operands given by keyword take their place by name: the chosen op's, or those of the op called
  // (maximum(out, lhs=src, rhs=tmp, dim=0) binds row_max's src and tmp).
  std::vector<Expr> bound(op->operands.size());
  if (args.size() > bound.size()) {
    Fail(ErrorKind::kType, span,
         op->Signature() + " takes " + std::to_string(op->operands.size()) + " arguments, got " +
             std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) bound[i] = args[i];
  for (size_t i = 0; i < op->operands.size(); ++i) {
    auto it = rest.find(std::string(op->operands[i].name));
    if (it == rest.end() && i < called->operands.size()) it = rest.find(std::string(called->operands[i].name));
    if (it == rest.end()) continue;
    if (bound[i]) Fail(ErrorKind::kType, span, callee + " got '" + std::string(op->operands[i].name) + "' twice");
    const KwargValue& v = it->second;
    if (v.kind == KwargValue::Kind::kExpr) bound[i] = v.e;
    else if (v.kind == KwargValue::Kind::kInt) bound[i] = IntConst(v.i, span);
    else Fail(ErrorKind::kType, span, callee + ": operand '" + std::string(op->operands[i].name) + "' is not a value");
    rest.erase(it);
  }
  for (size_t i = 0; i < bound.size(); ++i) {
    if (!bound[i]) {
      Fail(ErrorKind::kType, span,
           op->Signature() + " is missing its '" + std::string(op->operands[i].name) + "' argument");
    }
  }
  if (!op->scalar_form.empty()) {
    const OpDef* scalar_op = FindOp(op->scalar_form);
    for (size_t i = 0; i < bound.size() && i < scalar_op->operands.size(); ++i) {
      if (scalar_op->operands[i].kind == OperandKind::kScalar && bound[i]->type.IsScalar()) {
        op = scalar_op;
        break;
      }
    }
  }

  // Options: every one, in declaration order, defaults included.
  std::vector<Attr> attrs;
  for (const KwargSpec& k : op->kwargs) {
    if (k.kind == AttrKind::kDispatch || k.kind == AttrKind::kOperand) continue;
    Attr attr;
    attr.name = std::string(k.name);
    attr.value = k.default_value;
    attr.is_string = k.kind == AttrKind::kString;
    auto it = rest.find(attr.name);
    bool given = it != rest.end() && it->second.kind != KwargValue::Kind::kNone;
    if (given) {
      const KwargValue& v = it->second;
      std::string what = callee + ": " + attr.name;
      switch (k.kind) {
        case AttrKind::kInt:
          if (v.kind != KwargValue::Kind::kInt) Fail(ErrorKind::kType, span, what + " must be a compile-time int");
          if (v.i < k.min_value || v.i > k.max_value) {
            Fail(ErrorKind::kType, span, what + "=" + std::to_string(v.i) + " is out of range [" +
                                             std::to_string(k.min_value) + ", " + std::to_string(k.max_value) + "]");
          }
          attr.value = v.i;
          break;
        case AttrKind::kBool:
          if (v.kind != KwargValue::Kind::kInt || (v.i != 0 && v.i != 1)) {
            Fail(ErrorKind::kType, span, what + " must be True or False");
          }
          attr.value = v.i;
          break;
        case AttrKind::kEnum: {
          auto choice = std::find(k.choices.begin(), k.choices.end(), v.s);
          if (v.kind != KwargValue::Kind::kString || choice == k.choices.end()) {
            std::string names;
            for (std::string_view c : k.choices) names += (names.empty() ? "" : ", ") + std::string(c);
            Fail(ErrorKind::kValue, span, what + " must be one of " + names);
          }
          attr.value = choice - k.choices.begin();
          break;
        }
        case AttrKind::kString:
          if (v.kind != KwargValue::Kind::kString) Fail(ErrorKind::kType, span, what + " must be a string");
          attr.text = v.s;
          break;
        case AttrKind::kAxes: {
          int rank = 0;
          for (const Expr& arg : bound) {
            if (arg->type.IsTensor()) rank = int(arg->type.tensor->dims.size());
          }
          bool ok = v.kind == KwargValue::Kind::kExpr && v.e->kind == ExprKind::kTuple && v.e->operands.size() == 2 &&
                    v.e->operands[0]->IsIntConst() && v.e->operands[1]->IsIntConst();
          int64_t rows = ok ? v.e->operands[0]->int_value : -1, cols = ok ? v.e->operands[1]->int_value : -1;
          if (!ok || rows == cols || rows < 0 || cols < 0 || rows >= rank || cols >= rank) {
            Fail(ErrorKind::kValue, span,
                 what + " must name two different axes of the " + std::to_string(rank) +
                     "-D tensor, like [" + std::to_string(std::max(rank - 2, 0)) + ", " + std::to_string(rank - 1) +
                     "] (the axes of the tile's rows and columns)");
          }
          attr.value = rows << 8 | cols;
          break;
        }
        case AttrKind::kFloat: {
          // A compile-time number (an int or a float literal); a run-time scalar or a tile is another
          // feature of the same keyword, refused until it exists.
          const bool is_float = v.kind == KwargValue::Kind::kExpr && v.e->kind == ExprKind::kConst &&
                                v.e->type.dtype == DataType::kFP32;
          if (v.kind != KwargValue::Kind::kInt && !is_float) {
            Fail(ErrorKind::kUnsupported, span,
                 what + " must be a compile-time number here; a run-time scalar or a tile " + attr.name +
                     " is not implemented yet (see docs/language.md#planned)");
          }
          const float f = is_float ? float(v.e->float_value) : float(v.i);
          if (!(f == f) || f == __builtin_inff() || f == -__builtin_inff()) {
            Fail(ErrorKind::kValue, span, what + " must be a finite number");
          }
          attr.value = int64_t(__builtin_bit_cast(uint32_t, f));
          break;
        }
        default: break;
      }
      rest.erase(it);
    } else if (k.required) {
      Fail(ErrorKind::kType, span, callee + " is missing its '" + attr.name + "' keyword");
    } else if (it != rest.end()) {
      rest.erase(it);  // an explicit None: the default
    }
    attrs.push_back(std::move(attr));
  }
  if (!rest.empty()) {
    std::string accepted;
    for (const OperandSpec& o : op->operands) accepted += (accepted.empty() ? "" : ", ") + std::string(o.name);
    for (const KwargSpec& k : op->kwargs) accepted += ", " + std::string(k.name);
    Fail(ErrorKind::kType, span, callee + " got an unexpected keyword " + Quote(rest.begin()->first) + "; it takes " +
                                     accepted);
  }
  return OpCall(op, std::move(bound), std::move(attrs), span);  // the verifier runs op->check
}

}  // namespace pypto_pro::ir
