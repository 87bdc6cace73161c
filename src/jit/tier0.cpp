// The tier-0 compiler (docs/jit.md#tier-0-first-launches). It follows codegen.cpp construct by
// construct: each instruction stands for the C++ the code generator writes, with the same
// conversions, the same evaluation order and the same device functions behind it (tier0_exec.h).
// Whatever it does not know makes the kernel wait for its compiled library instead.
#include "pypto_pro/jit/tier0.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "pypto_pro/codegen/codegen.h"
#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/launcher_slots.h"
#include "pypto_pro/ir/op_registry.h"

namespace pypto_pro::jit {

namespace {

using namespace ir;

struct Unsupported {
  std::string why;
};

[[noreturn]] void Refuse(const std::string& why) { throw Unsupported{why}; }

int ScalarKind(DataType dtype) {
  switch (dtype) {
    case DataType::kBool: return PTO_T0_BOOL;
    case DataType::kInt32: return PTO_T0_INT32;
    case DataType::kInt64: return PTO_T0_INT64;
    case DataType::kFP32: return PTO_T0_FP32;
    default: Refuse("a scalar of dtype " + std::string(Name(dtype)));
  }
}

// The register kind an element read of a tile or tensor of `dtype` gives (pto::getval's type): fp32
// (fp16 and bf16 read as fp32 too), int32, int64.
int ElementKind(DataType dtype) {
  switch (dtype) {
    case DataType::kInt32: return PTO_T0_INT32;
    case DataType::kInt64: return PTO_T0_INT64;
    case DataType::kFP32:
    case DataType::kFP16:
    case DataType::kBF16: return PTO_T0_FP32;
    default: Refuse("an element read of a tile of " + std::string(Name(dtype)));
  }
}

int ElemCode(DataType dtype) {
  const std::string_view c = Info(dtype).ctype;
  static const std::pair<std::string_view, int> kCodes[] = {
      {"int8_t", PTO_T0_I8},     {"int16_t", PTO_T0_I16},   {"int32_t", PTO_T0_I32},  {"int64_t", PTO_T0_I64},
      {"uint8_t", PTO_T0_U8},    {"uint16_t", PTO_T0_U16},  {"uint32_t", PTO_T0_U32}, {"uint64_t", PTO_T0_U64},
      {"pto::half", PTO_T0_F16}, {"pto::bfloat16", PTO_T0_BF16}, {"float", PTO_T0_F32}};
  for (const auto& [name, code] : kCodes) {
    if (c == name) return code;
  }
  Refuse("elements of dtype " + std::string(Name(dtype)));
}

int BinaryCode(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return PTO_T0_ADD;
    case BinaryOp::kSub: return PTO_T0_SUB;
    case BinaryOp::kMul: return PTO_T0_MUL;
    case BinaryOp::kDiv: return PTO_T0_DIV;
    case BinaryOp::kFloorDiv: return PTO_T0_FLOORDIV;
    case BinaryOp::kMod: return PTO_T0_MOD;
    case BinaryOp::kMin: return PTO_T0_MIN;
    case BinaryOp::kMax: return PTO_T0_MAX;
    case BinaryOp::kEq: return PTO_T0_EQ;
    case BinaryOp::kNe: return PTO_T0_NE;
    case BinaryOp::kLt: return PTO_T0_LT;
    case BinaryOp::kLe: return PTO_T0_LE;
    case BinaryOp::kGt: return PTO_T0_GT;
    case BinaryOp::kGe: return PTO_T0_GE;
    case BinaryOp::kBitAnd: return PTO_T0_BITAND;
    case BinaryOp::kBitOr: return PTO_T0_BITOR;
    case BinaryOp::kBitXor: return PTO_T0_BITXOR;
    case BinaryOp::kShl: return PTO_T0_SHL;
    case BinaryOp::kShr: return PTO_T0_SHR;
    default: Refuse("a logical operator outside a condition");
  }
}

// The element-wise ops the executor runs: their positions in the op lists (op_lists.h), by name.
std::map<std::string_view, int> Positions(std::initializer_list<std::string_view> names) {
  std::map<std::string_view, int> out;
  for (std::string_view name : names) out.emplace(name, int(out.size()));
  return out;
}
#define PTO_T0_NAME_(name, functor) #name,
const std::map<std::string_view, int> kBinaryOps = Positions({PTO_BINARY_OPS(PTO_T0_NAME_)});
const std::map<std::string_view, int> kScalarOps = Positions({PTO_SCALAR_OPS(PTO_T0_NAME_)});
const std::map<std::string_view, int> kUnaryOps = Positions({PTO_UNARY_OPS(PTO_T0_NAME_)});
// PTO_T0_BITWISE's op codes.
const std::map<std::string_view, int> kBitwiseOps = {{"and_", 0}, {"or_", 1}, {"not_", 2},
                                                     {"xor", 3},  {"shl", 4}, {"shr", 5}};
#undef PTO_T0_NAME_
// row_expand_<op> / col_expand_<op>: the functor of binary op <op> (max, min: maximum, minimum;
// vector_broadcast.h), by its position in PTO_BINARY_OPS; -1 for any other op.
int ExpandOp(std::string_view name) {
  if (name.substr(0, 11) != "row_expand_" && name.substr(0, 11) != "col_expand_") return -1;
  const std::string_view op = name.substr(11);
  auto found = kBinaryOps.find(op == "max" ? "maximum" : op == "min" ? "minimum" : op);
  return found == kBinaryOps.end() ? -1 : found->second;
}

// eq (0), ne, lt, le, gt, ge (5) and their _scalar forms (PTO_T0_COMPARE's op); -1 for other ops.
int CompareOp(std::string_view name) {
  static const std::string_view kNames[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  const std::string_view base = name.size() > 7 && name.substr(name.size() - 7) == "_scalar"
                                    ? name.substr(0, name.size() - 7)
                                    : name;
  for (int i = 0; i < 6; ++i) {
    if (base == kNames[i]) return i;
  }
  return -1;
}

// The ops that do nothing in a plain kernel (the simulator runs each core's ops in program order;
// the sanitizer, which checks them, never runs tier-0).
bool DoesNothingInPlainKernels(std::string_view device_fn) {
  return device_fn == "pto::sync_src" || device_fn == "pto::sync_dst" || device_fn == "pto::mutex_lock" ||
         device_fn == "pto::mutex_unlock" || device_fn == "pto::auto_mutex_lock" ||
         device_fn == "pto::auto_mutex_unlock" || device_fn.rfind("pto::pipe_barrier<", 0) == 0;
}

class Compiler {
 public:
  explicit Compiler(const Function& func) : func_(func) {}

  std::unique_ptr<Tier0Program> Run() {
    out_ = std::make_unique<Tier0Program>();
    Params();
    Stmt_(func_.body);
    Emit(PTO_T0_END, 0);
    PtoT0Program& p = out_->program;
    p.version = PTO_T0_VERSION;
    p.num_regs = num_regs_;
    p.num_tile_vars = int32_t(tile_vars_.size());
    p.num_slots = int32_t(out_->slots.size());
    p.num_groups = int32_t(out_->groups.size());
    p.num_tensors = int32_t(out_->tensors.size());
    p.num_insns = int32_t(out_->insns.size());
    p.tiling_slot = tiling_slot_;
    p.tiling_bytes = tiling_bytes_;
    p.insns = out_->insns.data();
    p.tensors = out_->tensors.data();
    p.slots = out_->slots.data();
    p.groups = out_->groups.data();
    return std::move(out_);
  }

 private:
  // ---- emitting ----
  int Emit(int code, int line, int a = 0, int b = 0, int c = 0, int d = 0, int e = 0, int64_t imm = 0) {
    PtoT0Insn in{};
    in.code = code;
    in.line = line;
    in.a = a, in.b = b, in.c = c, in.d = d, in.e = e;
    in.imm = imm;
    out_->insns.push_back(in);
    return int(out_->insns.size()) - 1;
  }
  int Here() const { return int(out_->insns.size()); }
  void Patch(int insn, int target) { out_->insns[size_t(insn)].imm = target; }
  int NewReg() { return num_regs_++; }

  // ---- parameters: MakeGm of each tensor, each scalar read from its launcher slot ----
  void Params() {
    std::map<int, int> dyn_slot;  // DYNAMIC dim index -> launcher slot
    const std::vector<LauncherSlot> slots = LauncherSlots(func_);
    const std::vector<bool> written = WrittenParams(func_);
    for (size_t n = 0; n < slots.size(); ++n) {
      if (slots[n].kind == SlotKind::kDynamicDim) dyn_slot[slots[n].index] = int(n);
    }
    for (size_t n = 0; n < slots.size(); ++n) {
      const Var& p = func_.params[size_t(slots[n].param)];
      switch (slots[n].kind) {
        case SlotKind::kTensor: {
          if (p->type.IsPtr()) {  // MakeGmPtr: its buffer's bytes come in the kBufferBytes slot
            PtoT0Tensor d{};
            d.slot = int32_t(n);
            d.elem = ElemCode(p->type.dtype);
            d.elem_bytes = int32_t(Bytes(p->type.dtype));
            d.bytes_slot = -1;
            d.name = out_->names.emplace_back(p->name).c_str();
            tensors_[p->id] = int(out_->tensors.size());
            out_->tensors.push_back(d);
            break;
          }
          const TensorType& t = *p->type.tensor;
          if (t.dims.size() < 1 || t.dims.size() > PTO_T0_MAX_RANK) Refuse("a tensor of rank above 4");
          PtoT0Tensor d{};
          d.slot = int32_t(n);
          d.elem = ElemCode(t.dtype);
          d.elem_bytes = int32_t(Bytes(t.dtype));
          d.written = written[size_t(slots[n].param)] ? 1 : 0;
          d.rank = int32_t(t.dims.size());
          for (size_t i = 0; i < t.dims.size(); ++i) {
            d.dims[i] = t.dims[i].kind == DimKind::kDynamic ? -1 - dyn_slot.at(t.dims[i].dyn_slot) : t.dims[i].value;
          }
          d.name = out_->names.emplace_back(p->name).c_str();
          tensors_[p->id] = int(out_->tensors.size());
          out_->tensors.push_back(d);
          break;
        }
        case SlotKind::kScalar: {
          const int kind = ScalarKind(p->type.dtype);
          Emit(PTO_T0_SLOT, 0, RegOf(p), int(n), kind);
          break;
        }
        case SlotKind::kDynamicDim: break;
        case SlotKind::kBufferBytes: out_->tensors[size_t(tensors_.at(p->id))].bytes_slot = int32_t(n); break;
        case SlotKind::kTiling:  // its bytes follow the slots (PtoT0Args); the slot their offset
          tiling_param_ = p->id;
          tiling_slot_ = int(n);
          tiling_bytes_ = int(p->type.strct->size);
          break;
      }
    }
  }

  int RegOf(const Var& v) {
    auto [it, fresh] = regs_.emplace(v->id, 0);
    if (fresh) it->second = NewReg();
    return it->second;
  }
  int TileVarOf(const Var& v) {
    auto [it, fresh] = tile_vars_.emplace(v->id, int(tile_vars_.size()));
    return it->second;
  }
  // The gm[] entry of a tensor or pointer: a parameter's, a variable's, or a temporary one set now for a
  // view or pointer made in the expression (pl.make_tensor, pl.addptr, pl.make_ptr).
  int TensorOf(const Expr& e) {
    if (e->kind == ExprKind::kVar && (e->type.IsTensor() || e->type.IsPtr())) return GmVarOf(e->var);
    if (e->kind == ExprKind::kMakeView || e->kind == ExprKind::kPtrOffset) {
      const int at = NewGm(e->type, "view");
      SetGm(at, e, "view");
      return at;
    }
    Refuse("a GM tensor expression of this kind");
  }
  int GmVarOf(const Var& v) {
    if (auto it = tensors_.find(v->id); it != tensors_.end()) return it->second;
    return tensors_[v->id] = NewGm(v->type, v->name);
  }
  // A gm[] entry the kernel sets (slot -1) for a view or pointer of type `type`.
  int NewGm(const Type& type, const std::string& name) {
    PtoT0Tensor d{};
    d.slot = -1;
    d.bytes_slot = -1;
    if (type.IsTensor()) {
      const size_t rank = type.tensor->dims.size();
      if (rank < 1 || rank > PTO_T0_MAX_RANK) Refuse("a GM view of rank above 4");
      d.rank = int32_t(rank);
    } else if (!type.IsPtr()) {
      Refuse("a GM value of this type");
    }
    const DataType dtype = type.IsTensor() ? type.tensor->dtype : type.dtype;
    d.elem = ElemCode(dtype);
    d.elem_bytes = int32_t(Bytes(dtype));
    d.name = out_->names.emplace_back(name).c_str();
    out_->tensors.push_back(d);
    return int(out_->tensors.size() - 1);
  }
  // gm[at] = the view or pointer `value` makes (MakeView, AddPtr, CastPtr), or another tensor / pointer.
  void SetGm(int at, const Expr& value, const std::string& name) {
    const int line = value->span.line;
    if (value->kind == ExprKind::kMakeView) {
      const size_t rank = size_t(value->axis);
      const bool has_stride = value->operands.size() > 1 + rank;
      // C++ leaves the order of MakeView's arguments open: of the source (made in place: it may fault),
      // the shape and the strides (each evaluated in order), two that may fault could fault either way.
      auto list_faults = [&](size_t first) {
        return first < value->operands.size() &&
               std::any_of(value->operands.begin() + long(first), value->operands.begin() + long(first + rank),
                           [](const Expr& x) { return MayFault(x); });
      };
      if (int(value->operands[0]->kind != ExprKind::kVar) + int(list_faults(1)) + int(list_faults(1 + rank)) > 1) {
        Refuse("pl.make_tensor with several arguments that may fault");
      }
      const int source = TensorOf(value->operands[0]);
      std::vector<int> entries;
      for (size_t i = 1; i < value->operands.size(); ++i) {
        entries.push_back(Conv(Expr_(value->operands[i]), value->operands[i]->type.dtype, DataType::kInt64, line));
      }
      const int shape = num_regs_;  // consecutive registers: the shape, then the strides
      for (int reg : entries) Emit(PTO_T0_MOV, line, NewReg(), reg);
      const int at_insn = Emit(PTO_T0_VIEW, line, at, source, shape, has_stride ? shape + int(rank) : 0, has_stride);
      out_->insns[size_t(at_insn)].s0 = out_->names.emplace_back(name).c_str();
    } else if (value->kind == ExprKind::kPtrOffset) {
      const bool cast = value->type.dtype != value->operands[0]->type.dtype;  // pl.make_ptr
      if (!cast && value->operands[0]->kind != ExprKind::kVar && MayFault(value->operands[1])) {
        Refuse("pl.addptr with several arguments that may fault");  // (as pl.make_tensor's)
      }
      const int source = TensorOf(value->operands[0]);
      const int offset = cast ? 0 : Conv(Expr_(value->operands[1]), value->operands[1]->type.dtype, DataType::kInt64, line);
      Emit(PTO_T0_PTR, line, at, source, offset, 0, cast);
    } else {
      Emit(PTO_T0_GMMOV, line, at, TensorOf(value));
    }
  }
  int TileOf(const Expr& e) {
    if (e->kind != ExprKind::kVar || !e->type.IsTile()) Refuse("a tile expression");
    MemoryIndex(*e->type.tile);
    return TileVarOf(e->var);
  }

  // PtoCoreCtx::mem's index of the tile's memory: Vec tiles in ND, DN, NZ or ZN layout, and the cube's L1,
  // L0A, L0B, L0C and bias tiles in ND, NZ or ZN (the simulator keeps every layout in logical row-major order;
  // element accesses place their linear offsets by the slot's layout, as ElementIndex does).
  static int MemoryIndex(const TileType& t) {
    static const char* const kNames[] = {
#define PTO_T0_MEM_(name) #name,
        PTO_HW_MEMORIES(PTO_T0_MEM_)
#undef PTO_T0_MEM_
    };
    const std::string name(Name(t.memory));
    const bool cube = name == "Mat" || name == "Left" || name == "Right" || name == "Acc" || name == "Bias";
    const bool layout_ok = t.layout == Layout::kND || t.layout == Layout::kNZ || t.layout == Layout::kZN ||
                           (name == "Vec" && t.layout == Layout::kDN);
    if (!(name == "Vec" || cube) || !layout_ok) Refuse("a tile of memory " + name + " in layout " + std::string(Name(t.layout)));
    for (size_t i = 0; i < sizeof kNames / sizeof kNames[0]; ++i) {
      if (name == kNames[i]) return int(i);
    }
    Refuse("a tile of memory " + name);
  }

  // ---- expressions: a register holding the value as the generated C++ holds it ----
  int Conv(int reg, DataType from, DataType to, int line) {
    const int k_from = ScalarKind(from), k_to = ScalarKind(to);
    if (k_from == k_to) return reg;
    const int out = NewReg();
    Emit(PTO_T0_CONV, line, out, reg, k_from, k_to);
    return out;
  }

  int Expr_(const Expr& e) {
    const int line = e->span.line;
    switch (e->kind) {
      case ExprKind::kConst: {
        const int kind = ScalarKind(e->type.dtype);
        const int out = NewReg();
        int64_t bits = e->int_value;
        if (kind == PTO_T0_FP32) {
          const float f = float(e->float_value);
          uint32_t u;
          std::memcpy(&u, &f, sizeof u);
          bits = int64_t(u);
        } else if (kind == PTO_T0_BOOL) {
          bits = e->int_value != 0;
        } else if (kind == PTO_T0_INT32) {
          bits = int64_t(int32_t(e->int_value));
        }
        Emit(PTO_T0_CONST, line, out, 0, 0, 0, 0, bits);
        return out;
      }
      case ExprKind::kVar:
        if (!e->type.IsScalar()) Refuse("a tile or tensor used as a value");
        ScalarKind(e->type.dtype);
        return RegOf(e->var);
      case ExprKind::kBuiltin: {
        int which = 0;
        switch (e->builtin) {
          case Builtin::kBlockIdx: which = 0; break;
          case Builtin::kBlockNum: which = 1; break;
          case Builtin::kSubblockIdx: which = 2; break;
          case Builtin::kSubblockNum: which = 3; break;
          default: Refuse("a special register read");
        }
        ScalarKind(e->type.dtype);
        const int out = NewReg();
        Emit(PTO_T0_BUILTIN, line, out, which);
        return out;
      }
      case ExprKind::kShapeDim: {
        ScalarKind(e->type.dtype);
        const int out = NewReg();
        Emit(PTO_T0_SHAPE, line, out, TensorOf(VarRef(e->var)), e->axis);
        return out;
      }
      case ExprKind::kCast: return Conv(Expr_(e->operands[0]), e->operands[0]->type.dtype, e->type.dtype, line);
      case ExprKind::kUnary: {
        const Expr& x = e->operands[0];
        const int out = NewReg();
        if (e->unary == UnaryOp::kNot) {  // (!x): x as a bool
          Emit(PTO_T0_NOT, line, out, Conv(Expr_(x), x->type.dtype, DataType::kBool, line));
        } else if (e->unary == UnaryOp::kBitNot) {  // (~T(x)) in the result type
          const int kind = ScalarKind(e->type.dtype);
          if (kind != PTO_T0_INT32 && kind != PTO_T0_INT64) Refuse("~ of a non-integer");
          Emit(PTO_T0_BITNOT, line, out, Conv(Expr_(x), x->type.dtype, e->type.dtype, line), 0, kind);
        } else {  // (-x)
          if (x->type.dtype != e->type.dtype || e->type.dtype == DataType::kBool) Refuse("a negation changing type");
          Emit(PTO_T0_NEG, line, out, Expr_(x), 0, ScalarKind(e->type.dtype));
        }
        return out;
      }
      case ExprKind::kTernary: {  // (c ? T(a) : T(b)): one branch evaluated
        const int out = NewReg();
        const Expr &c = e->operands[0], &a = e->operands[1], &b = e->operands[2];
        const int skip = Emit(PTO_T0_JZ, line, Conv(Expr_(c), c->type.dtype, DataType::kBool, line));
        Emit(PTO_T0_MOV, line, out, Conv(Expr_(a), a->type.dtype, e->type.dtype, line));
        const int done = Emit(PTO_T0_JMP, line);
        Patch(skip, Here());
        Emit(PTO_T0_MOV, line, out, Conv(Expr_(b), b->type.dtype, e->type.dtype, line));
        Patch(done, Here());
        return out;
      }
      case ExprKind::kBinary: return Binary(*e);
      case ExprKind::kElement: {  // pl.getval(tile or tensor, offset), tile[i, j]: of fp16 / bf16 / fp32, int32, int64
        const int kind = ElementKind(e->var->type.dtype);
        if (kind != ScalarKind(e->type.dtype)) Refuse("an element read converting its type");
        const bool tensor = e->var->type.IsTensor();
        const int container = tensor ? TensorOf(VarRef(e->var, e->span)) : TileOf(VarRef(e->var, e->span));
        const int offset = Conv(Expr_(e->operands[0]), e->operands[0]->type.dtype, DataType::kInt64, line);
        const int out = NewReg();
        Emit(PTO_T0_GETVAL, line, out, container, offset, kind, tensor ? 1 : 0);
        return out;
      }
      case ExprKind::kField: {  // a TilingData field, or an element of an array field (checked)
        if (e->var->id != tiling_param_) Refuse("a field of a pl.struct other than the TilingData");
        const StructField& f = e->var->type.strct->fields[size_t(e->axis)];
        const int kind = ScalarKind(f.dtype);
        const int index = e->operands.empty() ? 0 : Conv(Expr_(e->operands[0]), e->operands[0]->type.dtype,
                                                          DataType::kInt64, line);
        const int out = NewReg();
        Emit(PTO_T0_FIELD, line, out, tiling_slot_, e->operands.empty() ? 0 : f.count, kind, index, f.offset);
        return out;
      }
      default: Refuse("an expression of this kind (views, pointers)");
    }
  }

  int Binary(const ExprNode& e) {
    const Expr &a = e.operands[0], &b = e.operands[1];
    const int line = e.span.line;
    if (e.binary == BinaryOp::kAnd || e.binary == BinaryOp::kOr) {  // (bool(a) && bool(b)): short-circuit
      const int out = NewReg();
      Emit(PTO_T0_MOV, line, out, Conv(Expr_(a), a->type.dtype, DataType::kBool, line));
      int skip;
      if (e.binary == BinaryOp::kAnd) {
        skip = Emit(PTO_T0_JZ, line, out);
      } else {
        const int negated = NewReg();
        Emit(PTO_T0_NOT, line, negated, out);
        skip = Emit(PTO_T0_JZ, line, negated);
      }
      Emit(PTO_T0_MOV, line, out, Conv(Expr_(b), b->type.dtype, DataType::kBool, line));
      Patch(skip, Here());
      return out;
    }
    const DataType math = IsComparison(e.binary) ? PromoteScalar(a->type.dtype, b->type.dtype) : e.type.dtype;
    const int kind = ScalarKind(math);
    const bool bitwise = e.binary == BinaryOp::kBitAnd || e.binary == BinaryOp::kBitOr || e.binary == BinaryOp::kBitXor;
    if (kind == PTO_T0_BOOL && !IsComparison(e.binary) && !bitwise) Refuse("arithmetic on bools");
    if (kind == PTO_T0_FP32 && (IsBitwise(e.binary))) Refuse("bit operations on floats");
    const int x = Conv(Expr_(a), a->type.dtype, math, line);
    const int y = Conv(Expr_(b), b->type.dtype, math, line);
    const int out = NewReg();
    Emit(PTO_T0_BIN, line, out, x, y, kind, BinaryCode(e.binary));
    return out;
  }

  // Offsets (pto::Idx<N>{{int64_t(...), ...}}) in consecutive registers; returns the first.
  int Offsets(const Expr& tuple, int rank) {
    if (tuple->kind != ExprKind::kTuple || int(tuple->operands.size()) != rank) Refuse("offsets of another rank");
    std::vector<int> values;
    for (const Expr& item : tuple->operands) {
      values.push_back(Conv(Expr_(item), item->type.dtype, DataType::kInt64, item->span.line));
    }
    const int first = num_regs_;
    for (int v : values) Emit(PTO_T0_MOV, tuple->span.line, NewReg(), v);
    return first;
  }

  // ---- statements ----
  struct Loop {
    std::vector<int> breaks, continues;
  };

  void Stmt_(const Stmt& s) {
    if (!s) return;
    const int line = s->span.line;
    switch (s->kind) {
      case StmtKind::kSeq:
        for (const Stmt& child : s->stmts) Stmt_(child);
        break;
      case StmtKind::kAssign:
        if (s->var->type.IsTile()) {
          Emit(PTO_T0_TMOV, line, TileVarOf(s->var), TileOf(s->value));
        } else if (s->var->type.IsScalar()) {
          const int value = Conv(Expr_(s->value), s->value->type.dtype, s->var->type.dtype, line);
          Emit(PTO_T0_MOV, line, RegOf(s->var), value);
        } else if (s->var->type.IsTensor() || s->var->type.IsPtr()) {
          SetGm(GmVarOf(s->var), s->value, s->var->name);
        } else {
          Refuse("an assignment of this type");
        }
        break;
      case StmtKind::kFor: For(*s); break;
      case StmtKind::kWhile: {
        const int head = Here();
        const int exit = Emit(PTO_T0_JZ, line, Conv(Expr_(s->cond), s->cond->type.dtype, DataType::kBool, line));
        Emit(PTO_T0_POLL, line);
        loops_.emplace_back();
        Stmt_(s->body);
        Emit(PTO_T0_JMP, line, 0, 0, 0, 0, 0, head);
        Close(head, Here(), exit);
        break;
      }
      case StmtKind::kIf: {
        const int skip = Emit(PTO_T0_JZ, line, Conv(Expr_(s->cond), s->cond->type.dtype, DataType::kBool, line));
        Stmt_(s->body);
        if (s->orelse) {
          const int done = Emit(PTO_T0_JMP, line);
          Patch(skip, Here());
          Stmt_(s->orelse);
          Patch(done, Here());
        } else {
          Patch(skip, Here());
        }
        break;
      }
      case StmtKind::kBreak: loops_.back().breaks.push_back(Emit(PTO_T0_JMP, line)); break;
      case StmtKind::kContinue: loops_.back().continues.push_back(Emit(PTO_T0_JMP, line)); break;
      case StmtKind::kReturn: Emit(PTO_T0_END, line); break;
      case StmtKind::kOp: Op(*s); break;
      case StmtKind::kDeclTiles: Decl(*s); break;
      case StmtKind::kSelectTile: Select(*s); break;
      case StmtKind::kSection: {
        const int is_core = NewReg();
        Emit(PTO_T0_BUILTIN, line, is_core, s->section == SectionKind::kVector ? 4 : 5);
        const int skip = Emit(PTO_T0_JZ, line, is_core);
        Stmt_(s->body);
        Patch(skip, Here());
        break;
      }
      case StmtKind::kStage:
      case StmtKind::kDirectRun:
      case StmtKind::kDirectLoop:
      case StmtKind::kFusedOps:
      case StmtKind::kForwardedMove:
      case StmtKind::kForwardedReads:
      case StmtKind::kInPlaceLoad:
      case StmtKind::kKLoop: Stmt_(s->body); break;
      case StmtKind::kSubview: Subview(*s); break;
      case StmtKind::kReinterpret: Refuse("pl.reinterpret");
    }
  }

  // Ends the innermost loop: its continues jump to `next`, its breaks (and `exit`, a JZ) to `end`.
  void Close(int next, int end, int exit) {
    Loop loop = std::move(loops_.back());
    loops_.pop_back();
    for (int j : loop.continues) Patch(j, next);
    for (int j : loop.breaks) Patch(j, end);
    Patch(exit, end);
  }

  void For(const StmtNode& s) {  // EmitFor
    const int line = s.span.line;
    const int lo = Conv(Expr_(s.start), s.start->type.dtype, DataType::kInt64, line);
    const int hi = Conv(Expr_(s.stop), s.stop->type.dtype, DataType::kInt64, line);
    const int st = Conv(Expr_(s.step), s.step->type.dtype, DataType::kInt64, line);
    if (!s.step->IsIntConst()) Emit(PTO_T0_STEP0, line, st);
    const int it = NewReg(), cond = NewReg();
    Emit(PTO_T0_MOV, line, it, lo);
    const int head = Here();
    if (s.step->IsIntConst()) {
      Emit(PTO_T0_BIN, line, cond, it, hi, PTO_T0_INT64, s.step->int_value > 0 ? PTO_T0_LT : PTO_T0_GT);
    } else {
      Emit(PTO_T0_LOOPCMP, line, cond, it, hi, st);
    }
    const int exit = Emit(PTO_T0_JZ, line, cond);
    Emit(PTO_T0_POLL, line);
    Emit(PTO_T0_MOV, line, RegOf(s.var), Conv(it, DataType::kInt64, s.var->type.dtype, line));
    loops_.emplace_back();
    Stmt_(s.body);
    const int next = Here();
    Emit(PTO_T0_BIN, line, it, it, st, PTO_T0_INT64, PTO_T0_ADD);
    Emit(PTO_T0_JMP, line, 0, 0, 0, 0, 0, head);
    Close(next, Here(), exit);
  }

  void Decl(const StmtNode& s) {  // EmitDeclTiles
    const TileGroupInfo& g = *s.var->group;
    const TileType& t = g.tile;
    const int mem = MemoryIndex(t);
    const int elem = ElemCode(t.dtype);
    auto window = [&](size_t axis) {
      const int64_t full = axis == 0 ? t.Rows() : t.Cols();
      const int64_t declared = t.shape.size() == 2 ? t.valid_shape[axis] : (axis == 0 ? 1 : t.valid_shape[0]);
      return int32_t(declared < 0 ? full : declared);
    };
    PtoT0Group group{int32_t(out_->slots.size()), g.depth};
    for (int i = 0; i < g.depth; ++i) {
      PtoT0Slot slot{};
      slot.elem = elem;
      slot.mem = mem;
      slot.rows = int32_t(t.Rows());
      slot.cols = int32_t(t.Cols());
      slot.pad = t.pad;
      slot.layout = int32_t(t.layout);
      slot.compact = t.compact;
      slot.addr = uint32_t(g.addrs[size_t(i)]);
      slot.valid_rows = window(0);
      slot.valid_cols = window(1);
      if (!g.mutex_ids.empty()) {
        for (int id : g.mutex_ids[size_t(i)]) slot.mutex_mask |= 1u << id;
      }
      out_->slots.push_back(slot);
    }
    auto [it, fresh] = groups_.emplace(s.var->id, int(out_->groups.size()));
    if (fresh) out_->groups.push_back(group);
    Emit(PTO_T0_DECL, s.span.line, it->second);
  }

  // tile[r0:r1, c0:c1] (the kSubview line of codegen): a slot of the tile's type of its own, which the
  // executor points at the slice each time the statement runs.
  void Subview(const StmtNode& s) {
    const TileType& t = *s.var->type.tile;
    if (t.shape.size() != 2) Refuse("a subview of a tile of rank " + std::to_string(t.shape.size()));
    const int line = s.span.line;
    const int tile = TileOf(s.value);
    int bounds[4];
    for (int i = 0; i < 4; ++i) {
      bounds[i] = Conv(Expr_(s.args[size_t(i)]), s.args[size_t(i)]->type.dtype, DataType::kInt64, line);
    }
    PtoT0Slot slot{};
    slot.elem = ElemCode(t.dtype);
    slot.mem = MemoryIndex(t);
    slot.rows = int32_t(t.Rows());
    slot.cols = int32_t(t.Cols());
    slot.pad = t.pad;
    slot.layout = int32_t(t.layout);
    slot.compact = t.compact;
    const int at = int(out_->slots.size());
    out_->slots.push_back(slot);
    const int insn = Emit(PTO_T0_SUBVIEW, line, TileVarOf(s.var), tile, bounds[0], bounds[1], bounds[2]);
    out_->insns[size_t(insn)].f = bounds[3];
    out_->insns[size_t(insn)].g = at;
  }

  void Select(const StmtNode& s) {  // EmitSelect
    auto it = groups_.find(s.group->id);
    if (it == groups_.end()) Refuse("a tile group selected before its declaration");
    const int target = TileVarOf(s.var), group = it->second, line = s.span.line;
    switch (s.mode) {
      case SelectMode::kNext: Emit(PTO_T0_SELECT, line, target, group, 0); break;
      case SelectMode::kCurrent: Emit(PTO_T0_SELECT, line, target, group, 1); break;
      case SelectMode::kPrevious: Emit(PTO_T0_SELECT, line, target, group, 2); break;
      case SelectMode::kIndex:
        if (s.value->IsIntConst()) {
          Emit(PTO_T0_SELECT, line, target, group, 4, 0, 0, s.value->int_value);
        } else {
          Emit(PTO_T0_SELECT, line, target, group, 3, Conv(Expr_(s.value), s.value->type.dtype, DataType::kInt64, line));
        }
        break;
    }
  }

  // The value of each of the op's options, as EmitOp passes them. An enum EmitOp spells as a named
  // constant is its index where the constants come from the same hw_tables.h list as the choices
  // (pipes, cross-core sync modes).
  std::map<std::string_view, int64_t> Options(const StmtNode& s) {
    std::map<std::string_view, int64_t> values;
    for (const auto& [spec, attr] : codegen::OpOptions(s)) {
      const bool by_index = spec->cpp_prefix.empty() || spec->cpp_prefix == "pto::kPipe" ||
                            spec->cpp_prefix == "PTO_SYNC_";
      if (attr.is_string || !by_index) Refuse("an op option of this kind");
      values[spec->name] = attr.value;
    }
    return values;
  }

  // The element types the executor's conversions take (ByCastElem; others wait for the library).
  static void CastElem(DataType dtype, std::string_view op) {
    switch (dtype) {
      case DataType::kFP16: case DataType::kBF16: case DataType::kFP32: case DataType::kInt8:
      case DataType::kUInt8: case DataType::kInt16: case DataType::kUInt16: case DataType::kInt32:
        return;
      default:
        Refuse("pl." + std::string(op) + " of " + std::string(Name(dtype)));
    }
  }

  void SameElem(const StmtNode& s, std::initializer_list<size_t> tiles) {
    for (size_t i : tiles) {
      if (s.args[i]->type.dtype != s.args[0]->type.dtype) Refuse("an op over tiles of different dtypes");
    }
    ElemCode(s.args[0]->type.dtype);
  }

  void Op(const StmtNode& s) {
    const std::string_view name = s.op->name;
    const int line = s.span.line;
    for (const auto& [arg, what] : codegen::CompactWindowChecks(s)) {  // EmitCompactChecks
      const int at = Emit(PTO_T0_COMPACT, line, TileOf(arg));
      out_->insns[size_t(at)].s0 = out_->names.emplace_back(s.op->PublicName()).c_str();
      out_->insns[size_t(at)].s1 = out_->names.emplace_back(what).c_str();
    }
    if (name == "load" || name == "load_tile") {
      const int tensor = TensorOf(s.args[1]);
      if (s.args[0]->type.dtype != s.args[1]->type.dtype) Refuse("a load converting its dtype");
      const int tile = TileOf(s.args[0]);
      const int offsets = Offsets(s.args[2], out_->tensors[size_t(tensor)].rank);
      const auto options = Options(s);
      Emit(PTO_T0_LOAD, line, tile, tensor, offsets, int(options.at("order")), name == "load_tile");
    } else if (name == "store" || name == "store_tile") {
      const int tensor = TensorOf(s.args[0]);
      const DataType to = s.args[0]->type.dtype, from = s.args[1]->type.dtype;
      // an Acc tile converted by the fixpipe on its way (the verifier admits such a store only from Acc):
      // fp32 rounded to fp16 / bf16 or quantised to int8, int32 quantised to int8 or dequantised to fp16
      const bool converts = (from == DataType::kFP32 && (to == DataType::kFP16 || to == DataType::kBF16 ||
                                                         to == DataType::kInt8)) ||
                            (from == DataType::kInt32 && (to == DataType::kInt8 || to == DataType::kFP16));
      if (to != from && !converts) Refuse("a store converting its dtype other than fp32 -> fp16 / bf16 / int8, int32 -> int8 / fp16");
      const int tile = TileOf(s.args[1]);
      const int offsets = Offsets(s.args[2], out_->tensors[size_t(tensor)].rank);
      const auto options = Options(s);
      const int at = Emit(PTO_T0_STORE, line, tile, tensor, offsets, int(options.at("order")), name == "store_tile",
                          options.at("scale"));
      PtoT0Insn& in = out_->insns[size_t(at)];
      in.f = int32_t(options.at("relu_pre_mode"));
      in.g = int32_t(options.at("atomic"));
      in.h = int32_t(options.at("phase"));
    } else if (auto b = kBinaryOps.find(name); b != kBinaryOps.end()) {
      SameElem(s, {1, 2});
      Options(s);
      Emit(PTO_T0_VBIN, line, TileOf(s.args[0]), TileOf(s.args[1]), TileOf(s.args[2]), 0, b->second);
    } else if (name == "add_relu" || name == "sub_relu") {  // the add (sub) into lhs, then relu into out (vector_ops.h)
      SameElem(s, {1, 2});
      Options(s);
      Emit(PTO_T0_VBIN, line, TileOf(s.args[1]), TileOf(s.args[1]), TileOf(s.args[2]), 0,
           kBinaryOps.at(name == "add_relu" ? "add" : "sub"));
      Emit(PTO_T0_VUNARY, line, TileOf(s.args[0]), TileOf(s.args[1]), 0, 0, kUnaryOps.at("relu"));
    } else if (auto sc = kScalarOps.find(name); sc != kScalarOps.end()) {
      SameElem(s, {1});
      Options(s);
      const int scalar = Expr_(s.args[2]);
      Emit(PTO_T0_VSCALAR, line, TileOf(s.args[0]), TileOf(s.args[1]), scalar, ScalarKind(s.args[2]->type.dtype),
           sc->second);
    } else if (auto u = kUnaryOps.find(name); u != kUnaryOps.end()) {
      SameElem(s, {1});
      Options(s);
      Emit(PTO_T0_VUNARY, line, TileOf(s.args[0]), TileOf(s.args[1]), 0, 0, u->second);
    } else if (name == "move" && s.args[1]->type.tile->memory == MemorySpace::kAcc &&
               s.args[0]->type.tile->memory == MemorySpace::kVec) {
      // Acc -> Vec through the fixpipe into the UB of the AIV(s) acc_to_vec_mode names
      const DataType to = s.args[0]->type.dtype, from = s.args[1]->type.dtype;
      const bool to_ok = to == DataType::kFP32 || to == DataType::kFP16 || to == DataType::kBF16 ||
                         to == DataType::kInt8 || to == DataType::kInt32;
      if (!to_ok || (from != DataType::kFP32 && from != DataType::kInt32) ||
          (to == DataType::kInt32 && from != DataType::kInt32)) {
        Refuse("a move Acc -> Vec of these dtypes");
      }
      if (s.args[0]->type.tile->layout != Layout::kND) Refuse("a move Acc -> Vec into a tile of another layout");
      ElemCode(to);
      const auto options = Options(s);
      const int at = Emit(PTO_T0_ACCTOVEC, line, TileOf(s.args[0]), TileOf(s.args[1]),
                          int(options.at("acc_to_vec_mode")), 0, 0, options.at("scale"));
      out_->insns[size_t(at)].f = int32_t(options.at("relu_pre_mode"));
    } else if ((name == "move" && s.args[1]->type.tile->memory == MemorySpace::kVec &&
                s.args[0]->type.tile->memory == MemorySpace::kMat) ||
               name == "insert") {
      // UB -> L1 (an insert at [0, 0] for move) into the AIC's L1; NZ into ZN lands transposed
      SameElem(s, {1});
      Options(s);
      const TileType &dst = *s.args[0]->type.tile, &src = *s.args[1]->type.tile;
      int offsets = 0;  // [row, col] in two registers
      if (name == "insert") {
        const std::vector<Expr>& given = s.args[2]->operands;
        if (given.size() == 2) {
          offsets = Offsets(s.args[2], 2);
        } else {  // a 1-D tile's [col]
          const int col = Conv(Expr_(given.at(0)), given.at(0)->type.dtype, DataType::kInt64, line);
          offsets = NewReg();
          Emit(PTO_T0_CONST, line, offsets, 0, 0, 0, 0, 0);
          Emit(PTO_T0_MOV, line, NewReg(), col);
        }
      } else {
        offsets = NewReg();
        Emit(PTO_T0_CONST, line, offsets, 0, 0, 0, 0, 0);
        Emit(PTO_T0_CONST, line, NewReg(), 0, 0, 0, 0, 0);
      }
      const int at = Emit(PTO_T0_INSERT, line, TileOf(s.args[0]), TileOf(s.args[1]), offsets, offsets + 1,
                          src.layout == Layout::kNZ && dst.layout == Layout::kZN);
      out_->insns[size_t(at)].s0 = out_->names.emplace_back(s.op->PublicName()).c_str();
    } else if (name == "system.set_cross_core" || name == "system.wait_cross_core") {
      const auto values = Options(s);
      Emit(PTO_T0_CROSS, line, name == "system.wait_cross_core", int(values.at("pipe")), int(values.at("event_id")),
           int(values.at("sync_mode")));
    } else if (name == "move") {
      // L1 -> L0A / L0B / the bias table, or UB -> UB (a layout change), of one dtype
      const TileType &dst = *s.args[0]->type.tile, &src = *s.args[1]->type.tile;
      const std::string to(Name(dst.memory)), from(Name(src.memory));
      const bool l1_to_l0 = from == "Mat" && (to == "Left" || to == "Right" || to == "Bias");
      if (!l1_to_l0 && !(from == "Vec" && to == "Vec")) {
        Refuse("a move other than L1 -> L0A/L0B/Bias, Acc -> Vec, Vec -> Mat or Vec -> Vec");
      }
      // fp16 / bf16 widened to fp32 into the bias table; every other move keeps its dtype
      const DataType to_type = s.args[0]->type.dtype, from_type = s.args[1]->type.dtype;
      if (!(to == "Bias" && to_type == DataType::kFP32 &&
            (from_type == DataType::kFP16 || from_type == DataType::kBF16))) {
        SameElem(s, {1});
      }
      const auto options = Options(s);
      // detail::kTransposes: NZ <-> ZN between transposed, non-square shapes.
      const bool transposes = ((src.layout == Layout::kNZ && dst.layout == Layout::kZN) ||
                               (src.layout == Layout::kZN && dst.layout == Layout::kNZ)) &&
                              src.Rows() == dst.Cols() && src.Cols() == dst.Rows() && src.Rows() != src.Cols();
      const int at = Emit(PTO_T0_MOVE, line, TileOf(s.args[0]), TileOf(s.args[1]), transposes, 0, 0,
                          options.at("scale"));
      out_->insns[size_t(at)].f = int32_t(options.at("relu_pre_mode"));
    } else if (name == "matmul" || name == "matmul_acc" || name == "matmul_bias") {
      // matmul_acc(dst, acc, lhs, rhs); matmul_bias(dst, lhs, rhs, bias)
      const size_t lhs = name == "matmul_acc" ? 2 : 1;
      const DataType in = s.args[lhs]->type.dtype, acc = s.args[0]->type.dtype;
      const bool float_in = in == DataType::kFP16 || in == DataType::kBF16 || in == DataType::kFP32;
      if (s.args[lhs + 1]->type.dtype != in || !((float_in && acc == DataType::kFP32) ||
                                                 (in == DataType::kInt8 && acc == DataType::kInt32))) {
        Refuse("a matmul of these dtypes");
      }
      const auto options = Options(s);
      const int at = Emit(PTO_T0_MATMUL, line, TileOf(s.args[0]), TileOf(s.args[lhs]), TileOf(s.args[lhs + 1]),
                          int(options.at("phase")), name == "matmul" ? 0 : name == "matmul_acc" ? 1 : 2);
      PtoT0Insn& insn = out_->insns[size_t(at)];
      if (name == "matmul_acc") insn.f = TileOf(s.args[1]);
      if (name == "matmul_bias") insn.f = TileOf(s.args[3]);
      if (insn.e && s.args[size_t(name == "matmul_acc" ? 1 : 3)]->type.dtype != acc) Refuse("a matmul of these dtypes");
      // matmul_bias checks its windows as "matmul" (cube_ops.h)
      insn.s0 = out_->names.emplace_back(name == "matmul_acc" ? "matmul_acc" : "matmul").c_str();
    } else if (name == "set_validshape") {
      const TileType& tile = *s.args[0]->type.tile;
      const int rank = int(tile.shape.size());
      if (rank != 1 && rank != 2) Refuse("a tile of rank " + std::to_string(rank));
      const int shape = Offsets(s.args[1], rank);
      Emit(PTO_T0_VALIDSHAPE, line, TileOf(s.args[0]), rank == 1 ? -1 : shape, rank == 1 ? shape : shape + 1);
    } else if (name == "row_sum" || name == "row_max" || name == "row_min") {
      SameElem(s, {1});
      TileOf(s.args[2]);  // the unused tmp: a tile the executor could place
      Emit(PTO_T0_ROWREDUCE, line, TileOf(s.args[0]), TileOf(s.args[1]), 0, 0,
           name == "row_sum" ? 0 : name == "row_max" ? 1 : 2);
    } else if (const int expand = ExpandOp(name); expand >= 0) {
      SameElem(s, {1, 2});
      Emit(name[0] == 'r' ? PTO_T0_ROWEXPAND : PTO_T0_COLEXPAND, line, TileOf(s.args[0]), TileOf(s.args[1]),
           TileOf(s.args[2]), 0, expand);
    } else if (name == "expands") {
      Options(s);
      ElemCode(s.args[0]->type.dtype);
      const int scalar = Expr_(s.args[1]);
      Emit(PTO_T0_EXPANDS, line, TileOf(s.args[0]), 0, scalar, ScalarKind(s.args[1]->type.dtype));
    } else if (name == "col_sum" || name == "col_max" || name == "col_min") {
      SameElem(s, {1});
      TileOf(s.args[2]);  // the unused tmp: a tile the executor could place
      Emit(PTO_T0_COLREDUCE, line, TileOf(s.args[0]), TileOf(s.args[1]), 0, 0,
           name == "col_sum" ? 0 : name == "col_max" ? 1 : 2);
    } else if (name == "addc" || name == "mul_add_dst" || name == "fused_mul_add" || name == "fused_mul_add_relu") {
      // f(x, y, z) into dst: addc(dst, a, b, c): a + b + c; mul_add_dst(dst, l, r): l * r + dst;
      // fused_mul_add(dst, l, r): l * dst + r; fused_mul_add_relu(dst, a, b): relu(dst * a + b)
      const bool addc = name == "addc";
      SameElem(s, addc ? std::initializer_list<size_t>{1, 2, 3} : std::initializer_list<size_t>{1, 2});
      Options(s);
      const int dst = TileOf(s.args[0]), a = TileOf(s.args[1]), b = TileOf(s.args[2]);
      const int at = addc ? Emit(PTO_T0_TERNARY, line, dst, a, b, 0, 0)
                     : name == "mul_add_dst" ? Emit(PTO_T0_TERNARY, line, dst, a, b, 0, 1)
                     : name == "fused_mul_add" ? Emit(PTO_T0_TERNARY, line, dst, a, dst, 0, 1)
                                               : Emit(PTO_T0_TERNARY, line, dst, dst, a, 0, 2);
      out_->insns[size_t(at)].f = addc ? TileOf(s.args[3]) : name == "mul_add_dst" ? dst : b;
    } else if (name == "axpy") {  // out = alpha * src + out, alpha as src's dtype (fp16 into fp32 too)
      const DataType out = s.args[0]->type.dtype, src = s.args[1]->type.dtype;
      if ((out != DataType::kFP16 && out != DataType::kFP32) || !(src == out || src == DataType::kFP16)) {
        Refuse("pl.axpy of these dtypes");
      }
      ElemCode(out);
      Options(s);
      const int alpha = Expr_(s.args[2]);
      Emit(PTO_T0_AXPY, line, TileOf(s.args[0]), TileOf(s.args[1]), alpha, ScalarKind(s.args[2]->type.dtype));
    } else if (name == "partadd" || name == "partmax" || name == "partmin" || name == "partmul") {
      SameElem(s, {1, 2});
      Options(s);
      Emit(PTO_T0_PART, line, TileOf(s.args[0]), TileOf(s.args[1]), TileOf(s.args[2]), 0,
           name == "partadd" ? 0 : name == "partmax" ? 1 : name == "partmin" ? 2 : 3);
    } else if (name == "fillpad") {
      SameElem(s, {1});
      const auto options = Options(s);
      Emit(PTO_T0_FILLPAD, line, TileOf(s.args[0]), TileOf(s.args[1]), 0, 0, int(options.at("mode")));
    } else if (name == "system.sync_all") {  // the barrier of a resident launch (blocks as fibers)
      const auto options = Options(s);
      Emit(PTO_T0_SYNCALL, line, 0, int(options.at("core_type")), int(options.at("mode")));
    } else if (name == "set_stride") {
      const int tensor = TensorOf(s.args[0]);
      Emit(PTO_T0_STRIDE, line, tensor, 0, Offsets(s.args[1], out_->tensors[size_t(tensor)].rank));
    } else if (name == "fill_index") {
      const DataType dtype = s.args[0]->type.dtype;
      if (!IsInteger(dtype)) Refuse("pl.fill_index of " + std::string(Name(dtype)));
      ElemCode(dtype);
      const int start = Expr_(s.args[1]);
      Emit(PTO_T0_FILLINDEX, line, TileOf(s.args[0]), 0, start, ScalarKind(s.args[1]->type.dtype));
    } else if (name == "argmax" || name == "argmin" || name == "col_argmax" || name == "col_argmin") {
      Options(s);
      const DataType index = s.args[0]->type.dtype;
      if (index != DataType::kInt32 && index != DataType::kUInt32) {
        Refuse("pl." + std::string(name) + " into " + std::string(Name(index)));
      }
      ElemCode(s.args[1]->type.dtype);
      TileOf(s.args[2]);  // the unused tmp: a tile the executor could place
      Emit(PTO_T0_ARGREDUCE, line, TileOf(s.args[0]), TileOf(s.args[1]), name[0] == 'c' ? 1 : 0, 0,
           name.find("argmax") != std::string::npos ? 0 : 1);
    } else if (auto bw = kBitwiseOps.find(name); bw != kBitwiseOps.end()) {
      const bool unary = name == "not_";
      SameElem(s, unary ? std::initializer_list<size_t>{1} : std::initializer_list<size_t>{1, 2});
      Options(s);
      const int at = Emit(PTO_T0_BITWISE, line, TileOf(s.args[0]), TileOf(s.args[1]), unary ? 0 : TileOf(s.args[2]),
                          0, bw->second);
      if (name == "xor") {
        SameElem(s, {3});
        out_->insns[size_t(at)].f = TileOf(s.args[3]);
      }
    } else if (name == "ands" || name == "ors") {
      SameElem(s, {1});
      Options(s);
      const int scalar = Expr_(s.args[2]);
      Emit(PTO_T0_BITWISES, line, TileOf(s.args[0]), TileOf(s.args[1]), scalar, ScalarKind(s.args[2]->type.dtype),
           name == "ands" ? 0 : 1);
    } else if (name == "transpose") {
      SameElem(s, {1});
      Options(s);
      Emit(PTO_T0_TRANSPOSE, line, TileOf(s.args[0]), TileOf(s.args[1]));
    } else if (name == "add_relu_cast" || name == "sub_relu_cast" || name == "mul_cast") {
      if (s.args[2]->type.dtype != s.args[1]->type.dtype) Refuse("an op over tiles of different dtypes");
      for (size_t i : {0, 1}) CastElem(s.args[i]->type.dtype, name);
      int64_t mode = 0;
      for (const auto& [spec, attr] : codegen::OpOptions(s)) {
        if (spec->name == "mode") mode = attr.value;
      }
      Emit(PTO_T0_STEPCAST, line, TileOf(s.args[0]), TileOf(s.args[1]), TileOf(s.args[2]),
           name == "add_relu_cast" ? 0 : name == "sub_relu_cast" ? 1 : 2, int(mode));
    } else if (name == "cast") {
      // Between fp16, bf16, fp32 and the 8- to 32-bit integers but uint32 (the executor's
      // instantiations, ByCastElem; others wait for the library).
      for (size_t i : {0, 1}) CastElem(s.args[i]->type.dtype, name);
      int64_t mode = 0;
      for (const auto& [spec, attr] : codegen::OpOptions(s)) {
        if (spec->name == "mode") mode = attr.value;
      }
      Emit(PTO_T0_CAST, line, TileOf(s.args[0]), TileOf(s.args[1]), 0, 0, int(mode));
    } else if (const int compare = CompareOp(name); compare >= 0) {
      SameElem(s, {});
      if (s.args[2]->type.IsTile()) {
        if (s.args[2]->type.dtype != s.args[1]->type.dtype) Refuse("a compare of tiles of different dtypes");
        Emit(PTO_T0_COMPARE, line, TileOf(s.args[0]), TileOf(s.args[1]), TileOf(s.args[2]), 0, compare);
      } else {
        const int scalar = Expr_(s.args[2]);
        Emit(PTO_T0_COMPARES, line, TileOf(s.args[0]), TileOf(s.args[1]), scalar, ScalarKind(s.args[2]->type.dtype),
             compare);
      }
      ElemCode(s.args[1]->type.dtype);
    } else if (name == "select" || name == "select_scalar") {
      SameElem(s, {2});
      TileOf(s.args[4]);  // the unused tmp: a tile the executor could place
      if (name == "select") {
        if (s.args[3]->type.dtype != s.args[0]->type.dtype) Refuse("a select of tiles of different dtypes");
        const int at = Emit(PTO_T0_VSELECT, line, TileOf(s.args[0]), TileOf(s.args[1]), TileOf(s.args[2]));
        out_->insns[size_t(at)].f = TileOf(s.args[3]);
      } else {
        const int scalar = Expr_(s.args[3]);
        Emit(PTO_T0_VSELECTS, line, TileOf(s.args[0]), TileOf(s.args[1]), TileOf(s.args[2]), scalar,
             ScalarKind(s.args[3]->type.dtype));
      }
    } else if (name == "setval") {  // container[offset] = value, converted as pto::ToElement
      ElemCode(s.args[0]->type.dtype);
      const bool tensor = s.args[0]->type.IsTensor();
      const int container = tensor ? TensorOf(s.args[0]) : TileOf(s.args[0]);
      const int offset = Conv(Expr_(s.args[1]), s.args[1]->type.dtype, DataType::kInt64, line);
      const int value = Expr_(s.args[2]);
      Emit(PTO_T0_SETVAL, line, container, offset, value, ScalarKind(s.args[2]->type.dtype), tensor ? 1 : 0);
    } else if (name == "printf" || name == "pto_assert") {
      Debug(s);
    } else if (name == "trap") {
      Emit(PTO_T0_TRAP, line);
    } else if (DoesNothingInPlainKernels(s.op->device_fn)) {
      for (const Expr& arg : s.args) {
        const bool tiles = arg->type.IsTile() || (arg->kind == ExprKind::kTuple && [&] {
                             for (const Expr& item : arg->operands) {
                               if (!item->type.IsTile()) return false;
                             }
                             return true;
                           }());
        if (!tiles) Refuse("pl." + std::string(s.op->PublicName()) + " with a run-time operand");
      }
    } else {
      Refuse("pl." + std::string(s.op->PublicName()));
    }
  }

  // pto::printf(ctx, line, fmt, loc, args...) / pto::pto_assert(ctx, line, fmt, loc, text, condition, args...):
  // the arguments as the generated code holds them, in consecutive registers, their kinds in imm.
  void Debug(const StmtNode& s) {
    const bool assertion = s.op->name == "pto_assert";
    std::vector<Expr> values;
    if (assertion) values.push_back(s.args[0]);
    for (const Expr& item : s.args[assertion ? 1 : 0]->operands) values.push_back(item);
    // C++ leaves the order of a call's arguments open: two that may fault could fault either way.
    if (std::count_if(values.begin(), values.end(), [](const Expr& e) { return MayFault(e); }) > 1) {
      Refuse("pl." + std::string(s.op->name) + " with several arguments that may fault");
    }
    if (values.size() - assertion > 32) Refuse("pl." + std::string(s.op->name) + " with more than 32 arguments");
    const int condition = assertion ? Conv(Expr_(values[0]), values[0]->type.dtype, DataType::kBool, s.span.line) : 0;
    std::vector<int> regs;
    int64_t kinds = 0;
    for (size_t k = assertion; k < values.size(); ++k) {
      kinds |= int64_t(ScalarKind(values[k]->type.dtype)) << (2 * (k - assertion));
      regs.push_back(Expr_(values[k]));
    }
    const int first = num_regs_;
    for (int reg : regs) Emit(PTO_T0_MOV, s.span.line, NewReg(), reg);
    const int at = Emit(assertion ? PTO_T0_ASSERT : PTO_T0_PRINT, s.span.line, 0, first, condition, int(regs.size()),
                        0, kinds);
    PtoT0Insn& insn = out_->insns[size_t(at)];
    for (const auto& [spec, attr] : codegen::OpOptions(s)) {  // fmt, loc and the condition's text
      if (spec->name == "loc") insn.f = int32_t(attr.value);
      if (spec->name == "fmt") insn.s0 = out_->names.emplace_back(attr.text).c_str();
      if (spec->name == "cond") insn.s1 = out_->names.emplace_back(attr.text).c_str();
    }
    if (!insn.s0 || (assertion && !insn.s1)) Refuse("pl." + std::string(s.op->name) + " without its texts");
  }
  // Whether evaluating `e` may fault: integer division or modulo by a run-time value, or a shift.
  static bool MayFault(const Expr& e) {
    if (e->kind == ExprKind::kBinary) {
      const bool divides =
          e->binary == BinaryOp::kDiv || e->binary == BinaryOp::kFloorDiv || e->binary == BinaryOp::kMod;
      if ((divides && !IsFloat(e->type.dtype) && !e->operands[1]->IsIntConst()) || e->binary == BinaryOp::kShl ||
          e->binary == BinaryOp::kShr) {
        return true;
      }
    }
    return std::any_of(e->operands.begin(), e->operands.end(), [](const Expr& o) { return MayFault(o); });
  }

  const Function& func_;
  std::unique_ptr<Tier0Program> out_;
  int num_regs_ = 0;
  std::map<int, int> regs_, tile_vars_, tensors_, groups_;
  int tiling_param_ = -1, tiling_slot_ = -1, tiling_bytes_ = 0;  // the TilingData parameter
  std::vector<Loop> loops_;
};

}  // namespace

std::unique_ptr<Tier0Program> CompileTier0(const ir::Function& func, std::string* why) {
  try {
    return Compiler(func).Run();
  } catch (const Unsupported& u) {
    if (why) *why = u.why;
    return nullptr;
  }
}

}  // namespace pypto_pro::jit
