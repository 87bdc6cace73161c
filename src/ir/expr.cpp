#include "pypto_pro/ir/expr.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace pypto_pro::ir {

const char* Symbol(BinaryOp op) {
  // In BinaryOp order.
  static constexpr const char* kSymbols[] = {"+",  "-",  "*", "/",  "//", "%",  "min", "max",
                                             "==", "!=", "<", "<=", ">",  ">=", "and", "or",
                                             "&",  "|",  "^", "<<", ">>"};
  static_assert(sizeof kSymbols / sizeof *kSymbols == size_t(BinaryOp::kShr) + 1, "one symbol per BinaryOp");
  return kSymbols[size_t(op)];
}

const char* Name(Builtin builtin) {
  switch (builtin) {
    case Builtin::kBlockIdx: return "get_block_idx";
    case Builtin::kBlockNum: return "get_block_num";
    case Builtin::kSubblockIdx: return "get_subblock_idx";
    case Builtin::kSubblockNum: return "get_subblock_num";
    case Builtin::kSpr: return "get_spr";
    case Builtin::kCtrlSpr: return "get_ctrl_spr";
    case Builtin::kSaturationFlag: return "get_saturation_flag";
  }
  return "?";
}

bool IsComparison(BinaryOp op) { return op >= BinaryOp::kEq && op <= BinaryOp::kGe; }
bool IsBitwise(BinaryOp op) { return op >= BinaryOp::kBitAnd; }

DataType PromoteScalar(DataType a, DataType b) {
  if (IsFloat(a) || IsFloat(b)) return DataType::kFP32;
  int bits = std::max(Info(a).bits, Info(b).bits);
  return bits > 32 ? DataType::kInt64 : DataType::kInt32;
}

namespace {

std::shared_ptr<ExprNode> New(ExprKind kind, Type type, Span span) {
  auto node = std::make_shared<ExprNode>();
  node->kind = kind;
  node->type = std::move(type);
  node->span = span;
  return node;
}

void RequireScalar(const Expr& e, Span span, const char* what) {
  if (!e) Fail(ErrorKind::kInternal, span, std::string("missing operand for ") + what);
  if (!e->type.IsScalar()) {
    Fail(ErrorKind::kType, e->span.valid() ? e->span : span,
         std::string(what) + " expects a scalar operand, got " + e->type.ToString());
  }
}

}  // namespace

Expr IntConst(int64_t value, Span span, DataType dtype) {
  if (dtype == DataType::kInt32 &&
      (value > std::numeric_limits<int32_t>::max() || value < std::numeric_limits<int32_t>::min())) {
    dtype = DataType::kInt64;
  }
  auto node = New(ExprKind::kConst, Type::Scalar(dtype), span);
  node->int_value = value;
  return node;
}

Expr FloatConst(double value, Span span, DataType dtype) {
  auto node = New(ExprKind::kConst, Type::Scalar(dtype), span);
  node->float_value = value;
  return node;
}

Expr BoolConst(bool value, Span span) {
  auto node = New(ExprKind::kConst, Type::Scalar(DataType::kBool), span);
  node->int_value = value ? 1 : 0;
  return node;
}

Expr VarRef(const Var& var, Span span) {
  if (!var) Fail(ErrorKind::kInternal, span, "reference to a null variable");
  auto node = New(ExprKind::kVar, var->type, span);
  node->var = var;
  return node;
}

Expr Binary(BinaryOp op, Expr lhs, Expr rhs, Span span) {
  RequireScalar(lhs, span, Symbol(op));
  RequireScalar(rhs, span, Symbol(op));
  DataType result;
  if (IsBitwise(op)) {
    const DataType a = lhs->type.dtype, b = rhs->type.dtype;
    if (IsFloat(a) || IsFloat(b)) {
      Fail(ErrorKind::kType, span,
           std::string("'") + Symbol(op) + "' takes integer operands, got " + std::string(Name(a)) + " and " +
               std::string(Name(b)));
    }
    const bool logical = op == BinaryOp::kBitAnd || op == BinaryOp::kBitOr || op == BinaryOp::kBitXor;
    result = logical && a == DataType::kBool && b == DataType::kBool ? DataType::kBool : PromoteScalar(a, b);
  } else if (IsComparison(op) || op == BinaryOp::kAnd || op == BinaryOp::kOr) {
    result = DataType::kBool;
  } else {
    result = PromoteScalar(lhs->type.dtype, rhs->type.dtype);
  }
  auto node = New(ExprKind::kBinary, Type::Scalar(result), span);
  node->binary = op;
  node->operands = {std::move(lhs), std::move(rhs)};
  return node;
}

Expr Unary(UnaryOp op, Expr operand, Span span) {
  RequireScalar(operand, span, op == UnaryOp::kNeg ? "-" : op == UnaryOp::kNot ? "not" : "~");
  if (op == UnaryOp::kBitNot && (IsFloat(operand->type.dtype) || operand->type.dtype == DataType::kBool)) {
    Fail(ErrorKind::kType, span,
         "'~' takes an integer operand, got " + std::string(Name(operand->type.dtype)) +
             (operand->type.dtype == DataType::kBool ? " (use 'not' on a bool)" : ""));
  }
  DataType result = op == UnaryOp::kNot ? DataType::kBool : PromoteScalar(operand->type.dtype, DataType::kInt32);
  auto node = New(ExprKind::kUnary, Type::Scalar(result), span);
  node->unary = op;
  node->operands = {std::move(operand)};
  return node;
}

Expr Ternary(Expr cond, Expr then_value, Expr else_value, Span span) {
  RequireScalar(cond, span, "conditional expression");
  RequireScalar(then_value, span, "conditional expression");
  RequireScalar(else_value, span, "conditional expression");
  DataType result = then_value->type.dtype == else_value->type.dtype
                        ? then_value->type.dtype
                        : PromoteScalar(then_value->type.dtype, else_value->type.dtype);
  auto node = New(ExprKind::kTernary, Type::Scalar(result), span);
  node->operands = {std::move(cond), std::move(then_value), std::move(else_value)};
  return node;
}

Expr Cast(Expr operand, DataType dtype, Span span) {
  RequireScalar(operand, span, "cast");
  if (!Info(dtype).supported) {
    Fail(ErrorKind::kUnsupported, span, std::string("scalar dtype ") + std::string(Name(dtype)) + " is not supported");
  }
  auto node = New(ExprKind::kCast, Type::Scalar(dtype), span);
  node->operands = {std::move(operand)};
  return node;
}

Expr BuiltinCall(Builtin builtin, Span span) {
  if (builtin >= Builtin::kSpr) return RegisterRead(builtin, {}, span);
  auto node = New(ExprKind::kBuiltin, Type::Scalar(DataType::kInt32), span);
  node->builtin = builtin;
  return node;
}

namespace {

std::string FloatText(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

}  // namespace

Expr RegisterRead(Builtin builtin, std::vector<Expr> args, Span span) {
  const std::string what = "pl." + std::string(Name(builtin));
  auto at = [&](size_t i) { return args[i] && args[i]->span.valid() ? args[i]->span : span; };
  auto const_int = [&](size_t i, const char* name, const std::string& expected) {
    const Expr& e = args[i];
    if (!e || !e->IsIntConst() || e->type.dtype == DataType::kBool) {
      Fail(ErrorKind::kType, at(i),
           what + ": '" + name + "' must be " + expected + ", got " +
               (!e ? std::string("nothing")
                   : !e->type.IsScalar() ? e->type.ToString()
                   : e->IsConst() ? "the " + e->type.ToString() + " constant " +
                                        (IsFloat(e->type.dtype) ? FloatText(e->float_value)
                                                                : std::to_string(e->int_value))
                                  : "a run-time " + e->type.ToString() + " scalar"));
    }
    return e->int_value;
  };
  DataType dtype = DataType::kInt64;
  switch (builtin) {
    case Builtin::kSpr:
      if (!args.empty()) Fail(ErrorKind::kType, span, what + "() takes no arguments (it reads AR, the one SPR it can)");
      break;
    case Builtin::kCtrlSpr: {
      if (args.size() != 2) {
        Fail(ErrorKind::kType, span, what + "(start_bit, end_bit) takes 2 arguments, got " + std::to_string(args.size()));
      }
      const char* names[] = {"start_bit", "end_bit"};
      int64_t bits[2];
      for (size_t i = 0; i < 2; ++i) {
        bits[i] = const_int(i, names[i], "a compile-time int (a CTRL bit, 0..63)");
        if (bits[i] < 0 || bits[i] > 63) {
          Fail(ErrorKind::kValue, at(i),
               what + ": " + names[i] + "=" + std::to_string(bits[i]) + " is not a bit of the 64-bit CTRL register (0..63)");
        }
      }
      if (bits[0] > bits[1]) {
        Fail(ErrorKind::kValue, span,
             what + ": start_bit=" + std::to_string(bits[0]) + " is above end_bit=" + std::to_string(bits[1]));
      }
      break;
    }
    case Builtin::kSaturationFlag: {
      const int64_t modes = int64_t(hw::CountOf(hw::kSaturationFlags));
      if (args.size() != 1) {
        Fail(ErrorKind::kType, span, what + "(mode) takes 1 argument, got " + std::to_string(args.size()));
      }
      const int64_t mode = const_int(0, "mode", "a pl.SaturationFlagMode member");
      if (mode < 0 || mode >= modes) {
        Fail(ErrorKind::kValue, at(0), what + ": mode " + std::to_string(mode) + " is not a pl.SaturationFlagMode");
      }
      dtype = DataType::kBool;
      break;
    }
    default: Fail(ErrorKind::kInternal, span, what + " is not a register read");
  }
  auto node = New(ExprKind::kBuiltin, Type::Scalar(dtype), span);
  node->builtin = builtin;
  node->operands = std::move(args);
  return node;
}

Expr ShapeDim(const Var& tensor, int axis, Span span) {
  if (!tensor || !tensor->type.IsTensor()) Fail(ErrorKind::kType, span, ".shape is only defined on GM tensors");
  int rank = int(tensor->type.tensor->dims.size());
  int resolved = axis < 0 ? axis + rank : axis;
  if (resolved < 0 || resolved >= rank) {
    Fail(ErrorKind::kValue, span,
         "shape index " + std::to_string(axis) + " is out of range for tensor '" + tensor->name + "' of rank " +
             std::to_string(rank));
  }
  auto node = New(ExprKind::kShapeDim, Type::Scalar(DataType::kInt32), span);
  node->var = tensor;
  node->axis = resolved;
  return node;
}

Expr Tuple(std::vector<Expr> items, Span span) {
  // A list of scalars, or of data (tiles, GM tensors and scalars: auto_mutex's tiles, sync_all's
  // workspaces); the op that takes it checks what it may hold.
  const bool data = std::any_of(items.begin(), items.end(),
                                [](const Expr& e) { return e && (e->type.IsTile() || e->type.IsTensor()); });
  for (const Expr& item : items) {
    if (!data) {
      RequireScalar(item, span, "a list of scalars");
    } else if (!item || !(item->type.IsTile() || item->type.IsTensor() || item->type.IsScalar())) {
      Fail(ErrorKind::kType, span, "a list holds tiles, GM tensors and scalars, got " +
                                       (item ? item->type.ToString() : std::string("nothing")));
    }
  }
  auto node = New(ExprKind::kTuple, Type::Tuple(), span);
  node->operands = std::move(items);
  return node;
}

Expr Field(const Var& strct, const std::string& field, Expr index, Span span) {
  if (!strct || strct->type.kind != TypeKind::kStruct) Fail(ErrorKind::kType, span, "fields exist on TilingData only");
  const StructType& t = *strct->type.strct;
  const StructField* f = t.Find(field);
  if (!f) {
    std::string names;
    for (const StructField& each : t.fields) names += (names.empty() ? "" : ", ") + each.name;
    Fail(ErrorKind::kUndefined, span, t.name + " has no field '" + field + "' (fields: " + names + ")");
  }
  if (f->count == 0 && index) Fail(ErrorKind::kType, span, t.name + "." + field + " is a scalar field, not an array");
  if (f->count > 0 && !index) {
    Fail(ErrorKind::kType, span, t.name + "." + field + " is an array of " + std::to_string(f->count) +
                                     "; read an element with [index]");
  }
  if (index) {
    RequireScalar(index, span, "array index");
    if (IsFloat(index->type.dtype)) Fail(ErrorKind::kType, span, "an array index must be an integer");
    if (index->IsIntConst() && (index->int_value < 0 || index->int_value >= f->count)) {
      Fail(ErrorKind::kValue, index->span.valid() ? index->span : span,
           "index " + std::to_string(index->int_value) + " is out of range for " + t.name + "." + field + " of " +
               std::to_string(f->count) + " elements");
    }
  }
  auto node = New(ExprKind::kField, Type::Scalar(f->dtype), span);
  node->var = strct;
  node->axis = int(f - t.fields.data());
  if (index) node->operands = {std::move(index)};
  return node;
}

DataType ScalarDTypeOf(DataType dtype) {
  return dtype == DataType::kFP16 || dtype == DataType::kBF16 ? DataType::kFP32 : dtype;
}

Expr Element(const Var& container, Expr offset, Span span) {
  if (!container || (!container->type.IsTile() && !container->type.IsTensor())) {
    Fail(ErrorKind::kType, span, "elements can be read from a tile or a GM tensor only");
  }
  if (container->type.IsTile() && container->type.tile->memory != MemorySpace::kVec) {
    Fail(ErrorKind::kType, span,
         "element access needs a Vec tile (the scalar unit reads UB), got " + container->type.ToString());
  }
  if (container->type.IsTile() && !container->type.tile->ElementOffsetProblem().empty()) {
    Fail(ErrorKind::kType, span,
         "element access to tile '" + container->name + "': " + container->type.tile->ElementOffsetProblem());
  }
  RequireScalar(offset, span, "element offset");
  if (IsFloat(offset->type.dtype) || offset->type.dtype == DataType::kBool) {
    Fail(ErrorKind::kType, span, "an element offset must be an integer");
  }
  auto node = New(ExprKind::kElement, Type::Scalar(ScalarDTypeOf(container->type.dtype)), span);
  node->var = container;
  node->operands = {std::move(offset)};
  return node;
}

Expr ValidShape(const Var& tile, int axis, Span span) {
  if (!tile || !tile->type.IsTile()) Fail(ErrorKind::kType, span, ".valid_shape is defined on tiles only");
  int rank = int(tile->type.tile->shape.size());
  int resolved = axis < 0 ? axis + rank : axis;
  if (resolved < 0 || resolved >= rank) {
    Fail(ErrorKind::kValue, span,
         "valid_shape index " + std::to_string(axis) + " is out of range for a " + std::to_string(rank) + "-D tile");
  }
  auto node = New(ExprKind::kValidShape, Type::Scalar(DataType::kInt32), span);
  node->var = tile;
  node->axis = rank == 1 ? 1 : resolved;  // stored as the 2-D axis: rows 0, columns 1
  return node;
}

namespace {

// A shape or stride entry of pl.make_tensor: an integer scalar, not negative when constant.
void RequireExtent(const Expr& e, Span span, const char* what, size_t i) {
  const std::string entry = std::string(what) + " entry " + std::to_string(i);
  RequireScalar(e, span, entry.c_str());
  if (IsFloat(e->type.dtype) || e->type.dtype == DataType::kBool) {
    Fail(ErrorKind::kType, e->span.valid() ? e->span : span, entry + " must be an integer");
  }
  if (e->IsIntConst() && e->int_value < 0) {
    Fail(ErrorKind::kValue, e->span.valid() ? e->span : span,
         entry + " is " + std::to_string(e->int_value) + "; it must not be negative");
  }
}

}  // namespace

Expr MakeView(Expr source, std::vector<Expr> shape, std::vector<Expr> stride, DataType dtype, Span span) {
  if (!source || !(source->type.IsTensor() || source->type.IsPtr())) {
    Fail(ErrorKind::kType, span,
         "pl.make_tensor views a pl.Ptr or a GM tensor, got " + (source ? source->type.ToString() : "nothing"));
  }
  if (shape.empty() || shape.size() > 8) {
    Fail(ErrorKind::kType, span, "pl.make_tensor needs 1 to 8 shape entries, got " + std::to_string(shape.size()));
  }
  if (!stride.empty() && stride.size() != shape.size()) {
    Fail(ErrorKind::kType, span,
         "pl.make_tensor stride needs one entry per shape entry (" + std::to_string(shape.size()) + "), got " +
             std::to_string(stride.size()));
  }
  if (!Info(dtype).supported) {
    Fail(ErrorKind::kType, span, "pl.make_tensor dtype " + std::string(Name(dtype)) + " is not supported yet");
  }
  TensorType t;
  t.dtype = dtype;
  t.view = true;
  for (size_t i = 0; i < shape.size(); ++i) {
    RequireExtent(shape[i], span, "pl.make_tensor shape", i);
    Dim d;
    if (shape[i]->IsIntConst()) {
      d.kind = DimKind::kFixed;
      d.value = shape[i]->int_value;
    }
    t.dims.push_back(d);
  }
  for (size_t i = 0; i < stride.size(); ++i) RequireExtent(stride[i], span, "pl.make_tensor stride", i);
  auto node = New(ExprKind::kMakeView, Type::Tensor(std::move(t)), span);
  node->axis = int(shape.size());
  node->operands.push_back(std::move(source));
  for (Expr& e : shape) node->operands.push_back(std::move(e));
  for (Expr& e : stride) node->operands.push_back(std::move(e));
  return node;
}

Expr PtrOffset(Expr ptr, Expr offset, DataType dtype, Span span) {
  if (!ptr || !ptr->type.IsPtr()) {
    Fail(ErrorKind::kType, span, "expected a pl.Ptr, got " + (ptr ? ptr->type.ToString() : "nothing"));
  }
  RequireScalar(offset, span, "a pointer offset");
  if (IsFloat(offset->type.dtype) || offset->type.dtype == DataType::kBool) {
    Fail(ErrorKind::kType, offset->span.valid() ? offset->span : span, "a pointer offset must be an integer");
  }
  if (!Info(dtype).supported) {
    Fail(ErrorKind::kType, span, "pointer dtype " + std::string(Name(dtype)) + " is not supported yet");
  }
  auto node = New(ExprKind::kPtrOffset, Type::Ptr(dtype), span);
  node->operands = {std::move(ptr), std::move(offset)};
  return node;
}

}  // namespace pypto_pro::ir
