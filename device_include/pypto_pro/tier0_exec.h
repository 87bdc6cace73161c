// The tier-0 executor (docs/jit.md#tier-0-first-launches): runs a kernel's tier-0 program (tier0.h)
// on one core, calling the same device functions its compiled kernel.cpp calls, with the same
// arguments in the same order, so every result, fault and fault line is the compiled kernel's.
// Compiled into the routines library only (routines/tier0*.cpp), with PTO_EXTERN_ROUTINES: its tile
// ops call the library's routines, as a kernel compiled against the library does, instead of
// compiling every body again.
#pragma once

#if !defined(PTO_EXTERN_ROUTINES)
#error "tier0_exec.h is compiled into the routines library, with PTO_EXTERN_ROUTINES"
#endif

#include "pypto_pro/device.h"
#include "pypto_pro/tier0.h"

namespace pto::tier0 {

// A GM tensor (a parameter or a view) of any element type and rank (at most PTO_T0_MAX_RANK), or a
// pointer (rank 0: data, lo, hi and buffer): GmTensor's fields.
struct AnyGm {
  uint8_t* data;
  int64_t shape[PTO_T0_MAX_RANK];
  int64_t stride[PTO_T0_MAX_RANK];
  const char* name;
  const uint8_t* lo;
  const uint8_t* hi;
  const char* buffer;
  bool contiguous;
  bool fresh;  // GmTensor::fresh (MarkFresh)
};

// A tile slot's state: its elements and valid window (the static rest is in the program's slot).
struct SlotState {
  uint8_t* data;
  int32_t valid_rows, valid_cols;
};

// The fields a GmTensor<T, N> and an AnyGm share but the data pointer's type, from one to the other.
template <int N, typename To, typename From>
inline void CopyGmFields(To& to, const From& from) {
  for (int i = 0; i < N; ++i) to.shape[i] = from.shape[i], to.stride[i] = from.stride[i];
  to.name = from.name;
  to.lo = from.lo;
  to.hi = from.hi;
  to.buffer = from.buffer;
  to.contiguous = from.contiguous;
  to.fresh = from.fresh;
}

template <typename T, int N>
inline GmTensor<T, N> Typed(const AnyGm& g) {
  GmTensor<T, N> t;
  t.data = reinterpret_cast<T*>(g.data);
  CopyGmFields<N>(t, g);
  return t;
}

template <typename T, int N>
inline AnyGm Untyped(const GmTensor<T, N>& t) {
  AnyGm g{};
  g.data = reinterpret_cast<uint8_t*>(t.data);
  CopyGmFields<N>(g, t);
  return g;
}

// A pointer's bytes as MakeView and CastPtr see them (they read only its address and buffer).
template <typename T>
inline GmPtr<T> PtrOf(const AnyGm& g) {
  return GmPtr<T>{reinterpret_cast<T*>(g.data), g.lo, g.hi, g.buffer};
}

template <typename T>
inline detail::TileRef<T> Ref(const PtoT0Slot& s, const SlotState& st) {
  return {reinterpret_cast<T*>(st.data), s.rows, s.cols, st.valid_rows, st.valid_cols, s.pad};
}

template <int N>
inline Idx<N> Offsets(const int64_t* r) {
  Idx<N> idx;
  for (int i = 0; i < N; ++i) idx.v[i] = r[i];
  return idx;
}

// fn.template operator()<T>() for the element types pl.cast runs on here (the compiler admits no other).
template <typename Fn>
inline void ByCastElem(int elem, Fn&& fn) {
  switch (elem) {
    case PTO_T0_I8: fn.template operator()<int8_t>(); break;
    case PTO_T0_U8: fn.template operator()<uint8_t>(); break;
    case PTO_T0_I16: fn.template operator()<int16_t>(); break;
    case PTO_T0_U16: fn.template operator()<uint16_t>(); break;
    case PTO_T0_I32: fn.template operator()<int32_t>(); break;
    case PTO_T0_F16: fn.template operator()<half>(); break;
    case PTO_T0_BF16: fn.template operator()<bfloat16>(); break;
    default: fn.template operator()<float>(); break;
  }
}

// fn.template operator()<T>() for the integer element types of the bitwise ops and shifts (the 8- to
// 32-bit ones take every op; 64-bit ones only shifts, which the compiler checks).
template <typename Fn>
inline void ByIntElem(int elem, Fn&& fn) {
  switch (elem) {
    case PTO_T0_I8: fn.template operator()<int8_t>(); break;
    case PTO_T0_I16: fn.template operator()<int16_t>(); break;
    case PTO_T0_I64: fn.template operator()<int64_t>(); break;
    case PTO_T0_U8: fn.template operator()<uint8_t>(); break;
    case PTO_T0_U16: fn.template operator()<uint16_t>(); break;
    case PTO_T0_U32: fn.template operator()<uint32_t>(); break;
    case PTO_T0_U64: fn.template operator()<uint64_t>(); break;
    default: fn.template operator()<int32_t>(); break;
  }
}

// fn.template operator()<F>() for the compare `op` of PTO_T0_COMPARE.
template <typename Fn>
inline void ByCompare(int op, Fn&& fn) {
  switch (op) {
    case 0: fn.template operator()<detail::EqF>(); break;
    case 1: fn.template operator()<detail::NeF>(); break;
    case 2: fn.template operator()<detail::LtF>(); break;
    case 3: fn.template operator()<detail::LeF>(); break;
    case 4: fn.template operator()<detail::GtF>(); break;
    default: fn.template operator()<detail::GeF>(); break;
  }
}

// fn.template operator()<T>() for the element types an Acc tile moves into a Vec tile as (the compiler
// admits no other).
template <typename Fn>
inline void ByFixpipeElem(int elem, Fn&& fn) {
  switch (elem) {
    case PTO_T0_I8: fn.template operator()<int8_t>(); break;
    case PTO_T0_I32: fn.template operator()<int32_t>(); break;
    case PTO_T0_F16: fn.template operator()<half>(); break;
    case PTO_T0_BF16: fn.template operator()<bfloat16>(); break;
    default: fn.template operator()<float>(); break;
  }
}

// Where a slot's bytes lie in core `peer`'s (PTO_PEER_*) copy of its memory (pto::PeerData); null
// outside a mixed kernel.
inline uint8_t* PeerOf(CoreCtx& ctx, const PtoT0Slot& slot, const uint8_t* data, int peer) {
  uint8_t* base = ctx.api->peer_memory ? ctx.api->peer_memory(&ctx, peer, slot.mem) : nullptr;
  return base ? base + (data - ctx.mem[slot.mem]) : nullptr;
}

// fn.template operator()<T>() for the element type `elem`.
template <typename Fn>
inline void ByElem(int elem, Fn&& fn) {
  switch (elem) {
    case PTO_T0_I8: fn.template operator()<int8_t>(); break;
    case PTO_T0_I16: fn.template operator()<int16_t>(); break;
    case PTO_T0_I32: fn.template operator()<int32_t>(); break;
    case PTO_T0_I64: fn.template operator()<int64_t>(); break;
    case PTO_T0_U8: fn.template operator()<uint8_t>(); break;
    case PTO_T0_U16: fn.template operator()<uint16_t>(); break;
    case PTO_T0_U32: fn.template operator()<uint32_t>(); break;
    case PTO_T0_U64: fn.template operator()<uint64_t>(); break;
    case PTO_T0_F16: fn.template operator()<half>(); break;
    case PTO_T0_BF16: fn.template operator()<bfloat16>(); break;
    default: fn.template operator()<float>(); break;
  }
}

template <typename Fn>
inline void ByRank(int rank, Fn&& fn) {
  switch (rank) {
    case 1: fn.template operator()<1>(); break;
    case 2: fn.template operator()<2>(); break;
    case 3: fn.template operator()<3>(); break;
    default: fn.template operator()<4>(); break;
  }
}

// fn.template operator()<F>() for the functor of op `op` of an op list (op_lists.h).
#define PTO_T0_CASE_(name, F) \
  if (op == k++) return fn.template operator()<detail::F>();
template <typename Fn>
inline void ByBinaryOp(int op, Fn&& fn) {
  int k = 0;
  PTO_BINARY_OPS(PTO_T0_CASE_)
}
template <typename Fn>
inline void ByScalarOp(int op, Fn&& fn) {
  int k = 0;
  PTO_SCALAR_OPS(PTO_T0_CASE_)
}
template <typename Fn>
inline void ByUnaryOp(int op, Fn&& fn) {
  int k = 0;
  PTO_UNARY_OPS(PTO_T0_CASE_)
}
#undef PTO_T0_CASE_

inline float AsFloat(int64_t r) { return __builtin_bit_cast(float, uint32_t(uint64_t(r))); }
inline int64_t FromFloatBits(float f) { return int64_t(__builtin_bit_cast(uint32_t, f)); }

// A register value of `kind` as the C++ scalar the generated code would hold, passed to fn.
template <typename Fn>
inline auto WithScalar(int64_t r, int kind, Fn&& fn) {
  switch (kind) {
    case PTO_T0_BOOL: return fn(r != 0);
    case PTO_T0_INT32: return fn(int32_t(r));
    case PTO_T0_INT64: return fn(r);
    default: return fn(AsFloat(r));
  }
}

// A C++ scalar stored as a register of `kind` (static_cast, as the generated code's casts).
template <typename S>
inline int64_t Store(S v, int kind) {
  switch (kind) {
    case PTO_T0_BOOL: return static_cast<bool>(v) ? 1 : 0;
    case PTO_T0_INT32: return int64_t(static_cast<int32_t>(v));
    case PTO_T0_INT64: return static_cast<int64_t>(v);
    default: return FromFloatBits(static_cast<float>(v));
  }
}

// r[b] op r[c] in the math type T, as the generated code's Binary() expression computes it (the
// compiler gives bool operands only comparisons and bit operations).
template <typename T>
inline int64_t Binary(CoreCtx& ctx, int line, int op, T x, T y, int kind) {
  switch (op) {
    case PTO_T0_EQ: return x == y;
    case PTO_T0_NE: return x != y;
    case PTO_T0_LT: return x < y;
    case PTO_T0_LE: return x <= y;
    case PTO_T0_GT: return x > y;
    case PTO_T0_GE: return x >= y;
    default: break;
  }
  if constexpr (__is_same(T, float)) {
    switch (op) {
      case PTO_T0_ADD: return Store(x + y, kind);
      case PTO_T0_SUB: return Store(x - y, kind);
      case PTO_T0_MUL: return Store(x * y, kind);
      case PTO_T0_DIV: return Store(x / y, kind);
      case PTO_T0_FLOORDIV: return Store(FloorDiv(x, y), kind);
      case PTO_T0_MOD: return Store(FloatMod(x, y), kind);
      case PTO_T0_MIN: return Store(Min<T>(x, y), kind);
      case PTO_T0_MAX: return Store(Max<T>(x, y), kind);
      default: break;
    }
  } else if constexpr (__is_same(T, bool)) {
    switch (op) {
      case PTO_T0_BITAND: return Store(bool(x & y), kind);
      case PTO_T0_BITOR: return Store(bool(x | y), kind);
      case PTO_T0_BITXOR: return Store(bool(x ^ y), kind);
      default: break;
    }
  } else {
    switch (op) {
      case PTO_T0_ADD: return Store(T(x + y), kind);
      case PTO_T0_SUB: return Store(T(x - y), kind);
      case PTO_T0_MUL: return Store(T(x * y), kind);
      case PTO_T0_DIV:
      case PTO_T0_FLOORDIV: return Store(IntDiv<T>(ctx, line, x, y), kind);
      case PTO_T0_MOD: return Store(IntMod<T>(ctx, line, x, y), kind);
      case PTO_T0_MIN: return Store(Min<T>(x, y), kind);
      case PTO_T0_MAX: return Store(Max<T>(x, y), kind);
      case PTO_T0_BITAND: return Store(T(x & y), kind);
      case PTO_T0_BITOR: return Store(T(x | y), kind);
      case PTO_T0_BITXOR: return Store(T(x ^ y), kind);
      case PTO_T0_SHL: return Store(Shl<T>(ctx, line, x, y), kind);
      case PTO_T0_SHR: return Store(Shr<T>(ctx, line, x, y), kind);
      default: break;
    }
  }
  Fault(ctx, line, "tier-0", "unknown scalar operator (a pypto_pro bug)");
}

// A running program's registers, tile variables and slot states, for the tile ops executed out of
// line: the ops whose element type x op instantiations take most of the executor's compile, each group
// defined in its own part of the routines library (routines/tier0_*.cpp) so that the parts compile
// concurrently.
struct Frame {
  const int64_t* r;
  const int32_t* t;
  const SlotState* s;
};
template <bool kToFloat>  // cast() to fp16 / bf16 / fp32 (true) or an integer element type (false)
void RunCast(CoreCtx& ctx, const PtoT0Program& p, const PtoT0Insn& in, const Frame& f);
template <bool kToFloat>  // add_relu_cast() / sub_relu_cast() / mul_cast() to fp16 / bf16 / fp32 or an integer
void RunStepCast(CoreCtx& ctx, const PtoT0Program& p, const PtoT0Insn& in, const Frame& f);
// eq() ... ge(), their _scalar forms, select() and select_scalar()
void RunCompareSelect(CoreCtx& ctx, const PtoT0Program& p, const PtoT0Insn& in, const Frame& f);
// expands(), col_sum() / col_max() / col_min(), the fused forms, axpy(), the partial ops, fillpad(),
// transpose(), the bitwise ops
void RunTileOp(CoreCtx& ctx, const PtoT0Program& p, const PtoT0Insn& in, const Frame& f);

inline void Run(CoreCtx& ctx, const PtoT0Program& p, const uint64_t* launcher) {
  int64_t* r = static_cast<int64_t*>(__builtin_alloca(sizeof(int64_t) * size_t(p.num_regs + 1)));
  int32_t* t = static_cast<int32_t*>(__builtin_alloca(sizeof(int32_t) * size_t(p.num_tile_vars + 1)));
  SlotState* s = static_cast<SlotState*>(__builtin_alloca(sizeof(SlotState) * size_t(p.num_slots + 1)));
  int32_t* cursor = static_cast<int32_t*>(__builtin_alloca(sizeof(int32_t) * size_t(p.num_groups + 1)));
  AnyGm* gm = static_cast<AnyGm*>(__builtin_alloca(sizeof(AnyGm) * size_t(p.num_tensors + 1)));
  for (int i = 0; i < p.num_regs; ++i) r[i] = 0;
  for (int i = 0; i < p.num_tile_vars; ++i) t[i] = -1;
  for (int i = 0; i < p.num_slots; ++i) s[i] = SlotState{nullptr, 0, 0};
  for (int i = 0; i < p.num_groups; ++i) cursor[i] = 0;
  for (int i = 0; i < p.num_tensors; ++i) {  // MakeGm (MarkFresh for outputs) and MakeGmPtr of the parameters
    const PtoT0Tensor& d = p.tensors[i];
    AnyGm& g = gm[i];
    g = AnyGm{};
    if (d.slot < 0) continue;  // a variable: a zero GmTensor / GmPtr until the kernel sets it
    g.data = reinterpret_cast<uint8_t*>(launcher[d.slot]);
    g.name = g.buffer = d.name;
    g.lo = g.data;
    int64_t bytes = d.elem_bytes;
    for (int k = d.rank - 1; k >= 0; --k) {
      g.shape[k] = d.dims[k] >= 0 ? d.dims[k] : int64_t(int32_t(launcher[-1 - d.dims[k]]));
      g.stride[k] = bytes / d.elem_bytes;
      bytes *= g.shape[k];
    }
    if (d.rank == 0) bytes = int64_t(launcher[d.bytes_slot]);
    g.hi = g.data + bytes;
    g.contiguous = d.rank > 0;
    g.fresh = d.rank > 0 && d.written && detail::FreshOutput(ctx, g.data, bytes);
  }
  for (int pc = 0;;) {
    const PtoT0Insn& in = p.insns[pc++];
    switch (in.code) {
      case PTO_T0_END: return;
      case PTO_T0_CONST: r[in.a] = in.imm; break;
      case PTO_T0_MOV: r[in.a] = r[in.b]; break;
      case PTO_T0_SLOT: {
        const uint64_t v = launcher[in.b];
        r[in.a] = in.c == PTO_T0_BOOL ? (v != 0) : in.c == PTO_T0_INT32 ? int64_t(int32_t(v))
                  : in.c == PTO_T0_INT64 ? int64_t(v) : int64_t(uint32_t(v));
        break;
      }
      case PTO_T0_SHAPE: r[in.a] = int32_t(gm[in.b].shape[in.c]); break;
      case PTO_T0_VIEW: {  // MakeView, its source read as bytes (it looks at the address and the buffer only)
        const PtoT0Tensor& d = p.tensors[in.a];
        const AnyGm& src = gm[in.b];
        AnyGm view{};
        ByElem(d.elem, [&]<typename U>() {
          ByRank(d.rank, [&]<int N>() {
            view = Untyped(MakeView<U, N>(ctx, in.line, PtrOf<uint8_t>(src), Offsets<N>(r + in.c), in.e != 0,
                                          in.e ? Offsets<N>(r + in.d) : Idx<N>{}, in.s0));
          });
        });
        view.fresh = p.tensors[in.b].rank > 0 && src.fresh;  // detail::FreshBuffer: a tensor's mark, never a pointer's
        gm[in.a] = view;
        break;
      }
      case PTO_T0_PTR: {  // AddPtr / CastPtr
        AnyGm moved = gm[in.b];
        ByElem(in.e ? p.tensors[in.a].elem : p.tensors[in.b].elem, [&]<typename T>() {
          const GmPtr<T> to = in.e ? CastPtr<T>(ctx, in.line, PtrOf<uint8_t>(moved))
                                   : AddPtr(ctx, in.line, PtrOf<T>(moved), r[in.c]);
          moved.data = reinterpret_cast<uint8_t*>(to.data);
        });
        gm[in.a] = moved;
        break;
      }
      case PTO_T0_GMMOV: gm[in.a] = gm[in.b]; break;
      case PTO_T0_SYNCALL: sync_all(ctx, in.line, in.b, in.c); break;
      case PTO_T0_STRIDE: {  // set_stride() (it reads the tensor's name, shape and strides only)
        AnyGm& g = gm[in.a];
        ByRank(p.tensors[in.a].rank, [&]<int N>() {
          GmTensor<uint8_t, N> bytes = Typed<uint8_t, N>(g);
          set_stride(ctx, in.line, bytes, Offsets<N>(r + in.c));
          g = Untyped(bytes);
        });
        break;
      }
      case PTO_T0_FIELD: {  // the TilingData's bytes follow the slots (PtoT0Args); the slot holds their offset
        const uint8_t* field = reinterpret_cast<const uint8_t*>(launcher) + launcher[in.b] + in.imm;
        if (in.c > 0) {
          if (r[in.e] < 0 || r[in.e] >= in.c) ArrayIndexFault(ctx, in.line, r[in.e], in.c);
          field += r[in.e] * (in.d == PTO_T0_BOOL ? 1 : in.d == PTO_T0_INT64 ? 8 : 4);
        }
        if (in.d == PTO_T0_BOOL) {
          r[in.a] = *field != 0;
        } else if (in.d == PTO_T0_INT64) {
          int64_t v;
          __builtin_memcpy(&v, field, sizeof v);
          r[in.a] = v;
        } else {  // fp32 (its bits in the low 32) or int32 (sign-extended)
          int32_t v;
          __builtin_memcpy(&v, field, sizeof v);
          r[in.a] = in.d == PTO_T0_FP32 ? int64_t(uint32_t(v)) : int64_t(v);
        }
        break;
      }
      case PTO_T0_BUILTIN:
        r[in.a] = in.b == 0 ? ctx.block_idx : in.b == 1 ? ctx.block_num : in.b == 2 ? ctx.subblock_idx
                  : in.b == 3 ? ctx.subblock_num : in.b == 4 ? ctx.core_type == PTO_CORE_AIV : ctx.core_type == PTO_CORE_AIC;
        break;
      case PTO_T0_CONV: r[in.a] = WithScalar(r[in.b], in.c, [&](auto v) { return Store(v, in.d); }); break;
      case PTO_T0_BIN:
        r[in.a] = in.d == PTO_T0_FP32   ? Binary<float>(ctx, in.line, in.e, AsFloat(r[in.b]), AsFloat(r[in.c]), in.d)
                  : in.d == PTO_T0_INT64 ? Binary<int64_t>(ctx, in.line, in.e, r[in.b], r[in.c], in.d)
                  : in.d == PTO_T0_INT32 ? Binary<int32_t>(ctx, in.line, in.e, int32_t(r[in.b]), int32_t(r[in.c]), in.d)
                                         : Binary<bool>(ctx, in.line, in.e, r[in.b] != 0, r[in.c] != 0, in.d);
        break;
      case PTO_T0_NOT: r[in.a] = r[in.b] == 0; break;
      case PTO_T0_NEG:
        r[in.a] = WithScalar(r[in.b], in.d, [&](auto v) { return Store(-v, in.d); });
        break;
      case PTO_T0_BITNOT:
        r[in.a] = in.d == PTO_T0_INT64 ? ~r[in.b] : int64_t(int32_t(~int32_t(r[in.b])));
        break;
      case PTO_T0_JMP: pc = int(in.imm); break;
      case PTO_T0_JZ:
        if (r[in.a] == 0) pc = int(in.imm);
        break;
      case PTO_T0_POLL: Poll(ctx, in.line); break;
      case PTO_T0_STEP0:
        if (r[in.a] == 0) Fault(ctx, in.line, "pl.range", "pl.range step is zero");
        break;
      case PTO_T0_LOOPCMP: r[in.a] = r[in.d] > 0 ? r[in.b] < r[in.c] : r[in.b] > r[in.c]; break;
      case PTO_T0_DECL: {  // InitTile for each slot
        const PtoT0Group& g = p.groups[in.a];
        for (int k = 0; k < g.depth; ++k) {
          const PtoT0Slot& d = p.slots[g.first + k];
          s[g.first + k] = SlotState{ctx.mem[d.mem] + d.addr, d.valid_rows, d.valid_cols};
        }
        cursor[in.a] = g.depth - 1;
        break;
      }
      case PTO_T0_SELECT: {
        const PtoT0Group& g = p.groups[in.b];
        int32_t& cur = cursor[in.b];
        int64_t k = 0;
        switch (in.c) {
          case 0: k = CursorNext(cur, g.depth); break;
          case 1: k = cur; break;
          case 2: k = CursorPrevious(cur, g.depth); break;
          case 3:  // SelectSlot
            k = r[in.d];
            CheckSlotIndex(ctx, in.line, k, g.depth);
            break;
          default: k = in.imm; break;
        }
        t[in.a] = g.first + int32_t(k);
        break;
      }
      case PTO_T0_TMOV: t[in.a] = t[in.b]; break;
      case PTO_T0_LOAD: {
        const PtoT0Slot& d = p.slots[t[in.a]];
        const SlotState& st = s[t[in.a]];
        const PtoT0Tensor& td = p.tensors[in.b];
        const char* op = in.e ? "load_tile" : "load";
        ByElem(td.elem, [&]<typename T>() {
          ByRank(td.rank, [&]<int N>() {
            detail::Load(ctx, in.line, op, in.d, in.e != 0, Ref<T>(d, st), Typed<T, N>(gm[in.b]), Offsets<N>(r + in.c));
          });
        });
        break;
      }
      case PTO_T0_STORE: {
        const PtoT0Slot& d = p.slots[t[in.a]];
        const SlotState& st = s[t[in.a]];
        const PtoT0Tensor& td = p.tensors[in.b];
        const char* op = in.e ? "store_tile" : "store";
        // E: the tile's elements, T: the tensor's
        auto store = [&]<typename E, typename T>() {
          ByRank(td.rank, [&]<int N>() {
            detail::Store(ctx, in.line, op, in.f, in.imm, in.d, in.g, in.h, in.e != 0, false, Typed<T, N>(gm[in.b]),
                          Ref<E>(d, st), Offsets<N>(r + in.c));
          });
        };
        if (d.elem != td.elem) {  // an Acc tile through the fixpipe: the conversions tier0.cpp admits
          if (d.elem == PTO_T0_I32) {  // int32 -> int8 / fp16
            if (td.elem == PTO_T0_I8) store.template operator()<int32_t, int8_t>();
            else store.template operator()<int32_t, half>();
          } else if (td.elem == PTO_T0_F16) {  // fp32 -> fp16 / bf16 / int8
            store.template operator()<float, half>();
          } else if (td.elem == PTO_T0_BF16) {
            store.template operator()<float, bfloat16>();
          } else {
            store.template operator()<float, int8_t>();
          }
          break;
        }
        ByElem(td.elem, [&]<typename T>() { store.template operator()<T, T>(); });
        break;
      }
      case PTO_T0_VBIN: {  // Binary(): the destination's columns and window for all three
        const PtoT0Slot& d = p.slots[t[in.a]];
        const SlotState &sd = s[t[in.a]], &sa = s[t[in.b]], &sb = s[t[in.c]];
        ByElem(d.elem, [&]<typename T>() {
          ByBinaryOp(in.e, [&]<typename F>() {
            detail::BinaryRoutine<F, T>(ctx, in.line, reinterpret_cast<T*>(sd.data),
                                        reinterpret_cast<const T*>(sa.data), reinterpret_cast<const T*>(sb.data),
                                        d.cols, sd.valid_rows, sd.valid_cols);
          });
        });
        break;
      }
      case PTO_T0_VSCALAR: {  // Scalar(): the scalar as the element type first (AsElem)
        const PtoT0Slot& d = p.slots[t[in.a]];
        const SlotState &sd = s[t[in.a]], &sa = s[t[in.b]];
        ByElem(d.elem, [&]<typename T>() {
          const T e = WithScalar(r[in.c], in.d, [](auto v) { return detail::AsElem<T>(v); });
          ByScalarOp(in.e, [&]<typename F>() {
            detail::ScalarRoutine<F, T>(ctx, in.line, reinterpret_cast<T*>(sd.data),
                                        reinterpret_cast<const T*>(sa.data), d.cols, sd.valid_rows, sd.valid_cols, e);
          });
        });
        break;
      }
      case PTO_T0_VUNARY: {  // Unary()
        const PtoT0Slot& d = p.slots[t[in.a]];
        const SlotState &sd = s[t[in.a]], &ss = s[t[in.b]];
        ByElem(d.elem, [&]<typename T>() {
          ByUnaryOp(in.e, [&]<typename F>() {
            // The math functions take float-like elements only (the verifier's dtypes).
            if constexpr (kIsFloatLike<T> || __is_same(F, detail::NegF) || __is_same(F, detail::AbsF) ||
                          __is_same(F, detail::ReluF)) {
              detail::UnaryRoutine<F, T>(reinterpret_cast<T*>(sd.data), reinterpret_cast<const T*>(ss.data), d.cols,
                                         sd.valid_rows, sd.valid_cols);
            }
          });
        });
        break;
      }
      case PTO_T0_COMPACT: {  // RequireCompactWindow
        const PtoT0Slot& d = p.slots[t[in.a]];
        const SlotState& st = s[t[in.a]];
        RequireCompactWindowOf(ctx, in.line, st.valid_rows, st.valid_cols, d.rows, d.cols, in.s0, in.s1);
        break;
      }
      case PTO_T0_MOVE: {  // move() between cube tiles of one dtype (L1 -> L0A / L0B / Bias), or fp16 / bf16
                           // widened into an fp32 bias table
        const PtoT0Slot &d = p.slots[t[in.a]], &sd = p.slots[t[in.b]];
        const SlotState &dst = s[t[in.a]], &src = s[t[in.b]];
        const Fixpipe f = MakeFixpipe(in.f, in.imm);
        const int32_t rows = src.valid_rows, cols = src.valid_cols;
        if (__builtin_expect(rows < 0 || cols < 0 || rows > sd.rows || cols > sd.cols, 0)) {
          detail::MoveWindowFault(ctx, in.line, "move", rows, cols, sd.rows, sd.cols);
        }
        if (d.elem != sd.elem) {
          auto widen = [&](const auto* from) {
            detail::MoveWindowOf<false>(ctx, in.line, reinterpret_cast<float*>(dst.data), d.rows, d.cols, from,
                                        sd.rows, sd.cols, rows, cols, false, f);
          };
          if (sd.elem == PTO_T0_F16) widen(reinterpret_cast<const half*>(src.data));
          else widen(reinterpret_cast<const bfloat16*>(src.data));
          break;
        }
        ByElem(d.elem, [&]<typename T>() {
          detail::MoveWindowOf<true>(ctx, in.line, reinterpret_cast<T*>(dst.data), d.rows, d.cols,
                               reinterpret_cast<const T*>(src.data), sd.rows, sd.cols, rows, cols, in.c != 0, f);
        });
        break;
      }
      case PTO_T0_MATMUL: {  // matmul() / matmul_acc() / matmul_bias()
        const PtoT0Slot &l = p.slots[t[in.b]], &rt = p.slots[t[in.c]], &d = p.slots[t[in.a]];
        const SlotState &dst = s[t[in.a]], &lhs = s[t[in.b]], &rhs = s[t[in.c]];
        UnitFlagWait(ctx, in.line, in.s0, in.d, 0);
        detail::CheckMatmulWindowOf(ctx, in.line, in.s0, lhs.valid_rows, lhs.valid_cols, rhs.valid_cols, l.rows,
                                    l.cols, rt.cols);
        const uint8_t* init = in.e ? s[t[in.f]].data : nullptr;
        const int64_t init_stride = in.e == 1 ? p.slots[t[in.f]].cols : 0;
        auto gemm = [&]<typename TIn, typename TC>() {
          gemm::Gemm(lhs.valid_rows, rhs.valid_cols, lhs.valid_cols, reinterpret_cast<const TIn*>(lhs.data), l.cols,
                     reinterpret_cast<const TIn*>(rhs.data), rt.cols, reinterpret_cast<TC*>(dst.data), d.cols,
                     gemm::Init<TC>{reinterpret_cast<const TC*>(init), init_stride});
        };
        switch (l.elem) {
          case PTO_T0_F16: gemm.template operator()<half, float>(); break;
          case PTO_T0_BF16: gemm.template operator()<bfloat16, float>(); break;
          case PTO_T0_F32: gemm.template operator()<float, float>(); break;
          default: gemm.template operator()<int8_t, int32_t>(); break;
        }
        UnitFlagDone(ctx, in.d, 1);
        break;
      }
      case PTO_T0_SUBVIEW: {  // pto::Subview
        const PtoT0Slot& d = p.slots[t[in.b]];
        const SlotState& src = s[t[in.b]];
        const int64_t r0 = r[in.c], r1 = r[in.d], c0 = r[in.e], c1 = r[in.f];
        detail::CheckSubview(ctx, in.line, r0, r1, c0, c1, d.rows, d.cols);
        int64_t elem_bytes = 0;
        ByElem(d.elem, [&]<typename T>() { elem_bytes = int64_t(sizeof(T)); });
        const int64_t rows = (r1 < src.valid_rows ? r1 : src.valid_rows) - r0;
        const int64_t cols = (c1 < src.valid_cols ? c1 : src.valid_cols) - c0;
        s[in.g] = SlotState{src.data + (r0 * d.cols + c0) * elem_bytes, int32_t(rows > 0 ? rows : 0),
                            int32_t(cols > 0 ? cols : 0)};
        t[in.a] = in.g;
        break;
      }
      case PTO_T0_ACCTOVEC: {  // move() Acc -> Vec (cube_ops.h): into the UB of the AIV(s) the mode names
        const PtoT0Slot &d = p.slots[t[in.a]], &sd = p.slots[t[in.b]];
        const SlotState &dst = s[t[in.a]], &src = s[t[in.b]];
        const Fixpipe fp = MakeFixpipe(in.f, in.imm);
        const int32_t rows = src.valid_rows, cols = src.valid_cols;
        if (__builtin_expect(rows < 0 || cols < 0 || rows > sd.rows || cols > sd.cols, 0)) {
          detail::MoveWindowFault(ctx, in.line, "move", rows, cols, sd.rows, sd.cols);
        }
        ByFixpipeElem(d.elem, [&]<typename TD>() {
          auto from = [&]<typename TS>() {
            const TS* in_acc = reinterpret_cast<const TS*>(src.data);
            if (in.c == kDualModeSplitM || in.c == kDualModeSplitN) {
              detail::MoveSplitOf(ctx, in.line, in.c, reinterpret_cast<TD*>(PeerOf(ctx, d, dst.data, PTO_PEER_AIV0)),
                                  reinterpret_cast<TD*>(PeerOf(ctx, d, dst.data, PTO_PEER_AIV1)), d.rows, d.cols,
                                  in_acc, sd.cols, rows, cols, fp);
              return;
            }
            uint8_t* out = PeerOf(ctx, d, dst.data, in.c == kSingleModeVec1 ? PTO_PEER_AIV1 : PTO_PEER_AIV0);
            detail::MoveWindowOf<false>(ctx, in.line, reinterpret_cast<TD*>(out ? out : dst.data), d.rows, d.cols,
                                        in_acc, sd.rows, sd.cols, rows, cols, false, fp);
          };
          if constexpr (__is_same(TD, int32_t)) {  // int32 sums stay int32 (the compiler admits no fp32 ones)
            from.template operator()<int32_t>();
          } else if (sd.elem == PTO_T0_I32) {
            from.template operator()<int32_t>();
          } else {
            from.template operator()<float>();
          }
        });
        break;
      }
      case PTO_T0_INSERT: {  // insert(), move() Vec -> Mat: into the AIC's L1
        const PtoT0Slot &d = p.slots[t[in.a]], &sd = p.slots[t[in.b]];
        const SlotState &dst = s[t[in.a]], &src = s[t[in.b]];
        uint8_t* out = PeerOf(ctx, d, dst.data, PTO_PEER_AIC);
        ByElem(d.elem, [&]<typename T>() {
          detail::InsertOf(ctx, in.line, in.s0, reinterpret_cast<T*>(out ? out : dst.data), d.rows, d.cols, in.e != 0,
                           reinterpret_cast<const T*>(src.data), sd.rows, sd.cols, src.valid_rows, src.valid_cols,
                           Idx<2>{{r[in.c], r[in.d]}});
        });
        break;
      }
      case PTO_T0_GETVAL:    // getval() of a tile or a tensor (tile.h)
      case PTO_T0_SETVAL: {  // setval() of a tile or a tensor
        const bool get = in.code == PTO_T0_GETVAL;
        auto read = [&](auto v) {  // (the compiler admits the element types whose scalars are registers)
          if constexpr (__is_same(decltype(v), float) || __is_same(decltype(v), int32_t) ||
                        __is_same(decltype(v), int64_t)) {
            r[in.a] = Store(v, in.d);
          }
        };
        if (in.e) {  // a GM tensor: its element by the tensor's shape and strides, checked as compiled
          const PtoT0Tensor& td = p.tensors[get ? in.b : in.a];
          ByElem(td.elem, [&]<typename T>() {
            ByRank(td.rank, [&]<int N>() {
              const GmTensor<T, N> tensor = Typed<T, N>(gm[get ? in.b : in.a]);
              if (get) {
                read(getval(ctx, in.line, tensor, r[in.c]));
              } else {
                WithScalar(r[in.c], in.d, [&](auto v) { setval(ctx, in.line, tensor, r[in.b], v); return 0; });
              }
            });
          });
          break;
        }
        const PtoT0Slot& d = p.slots[t[get ? in.b : in.a]];
        const SlotState& st = s[t[get ? in.b : in.a]];
        const int64_t offset = r[get ? in.c : in.b], count = int64_t(d.rows) * d.cols;
        if (offset < 0 || offset >= count) detail::ElementFault(ctx, in.line, get ? "getval" : "setval", nullptr, offset, count);
        ByElem(d.elem, [&]<typename T>() {
          T* data = reinterpret_cast<T*>(st.data) +
                    ElementIndexOf(d.layout, d.rows, d.cols, int64_t(sizeof(T)), d.compact, st.valid_rows,
                                   st.valid_cols, offset);
          if (get) {
            if constexpr (kIsNarrowFloat<T>) read(ToFloat(*data));
            else read(*data);
          } else {
            WithScalar(r[in.c], in.d, [&](auto v) { *data = detail::ToElement<T>(v); return 0; });
          }
        });
        break;
      }
      case PTO_T0_CROSS:  // set_cross_core / wait_cross_core (sync.h)
        if (in.a == 0) ctx.api->set_cross_core(&ctx, in.line, in.b, in.c, in.d);
        else ctx.api->wait_cross_core(&ctx, in.line, in.b, in.c, in.d);
        break;
      case PTO_T0_VALIDSHAPE: {  // set_validshape()
        const PtoT0Slot& d = p.slots[t[in.a]];
        SlotState& st = s[t[in.a]];
        const int64_t rows = in.b < 0 ? 1 : r[in.b], cols = r[in.c];
        detail::CheckValidShape(ctx, in.line, rows, cols, d.rows, d.cols);
        st.valid_rows = int32_t(rows);
        st.valid_cols = int32_t(cols);
        break;
      }
      case PTO_T0_ROWREDUCE: {  // row_sum() / row_max() / row_min(): RowReduce's routine
        const PtoT0Slot &d = p.slots[t[in.a]], &sd = p.slots[t[in.b]];
        const SlotState &out = s[t[in.a]], &src = s[t[in.b]];
        ByElem(d.elem, [&]<typename T>() {
          auto reduce = [&]<typename Fold>() {
            detail::RowReduceRoutine<Fold, T>(reinterpret_cast<T*>(out.data), d.cols,
                                              reinterpret_cast<const T*>(src.data), sd.cols, src.valid_rows,
                                              src.valid_cols);
          };
          if (in.e == 0) reduce.template operator()<detail::RowSumOf>();
          else if (in.e == 1) reduce.template operator()<detail::RowExtremeOf<detail::MaxF>>();
          else reduce.template operator()<detail::RowExtremeOf<detail::MinF>>();
        });
        break;
      }
      case PTO_T0_CAST: {
        const int elem = p.slots[t[in.a]].elem;
        if (elem == PTO_T0_F16 || elem == PTO_T0_BF16 || elem == PTO_T0_F32) RunCast<true>(ctx, p, in, {r, t, s});
        else RunCast<false>(ctx, p, in, {r, t, s});
        break;
      }
      case PTO_T0_STEPCAST: {
        const int elem = p.slots[t[in.a]].elem;
        if (elem == PTO_T0_F16 || elem == PTO_T0_BF16 || elem == PTO_T0_F32) RunStepCast<true>(ctx, p, in, {r, t, s});
        else RunStepCast<false>(ctx, p, in, {r, t, s});
        break;
      }
      case PTO_T0_COMPARE:
      case PTO_T0_COMPARES:
      case PTO_T0_VSELECT:
      case PTO_T0_VSELECTS: RunCompareSelect(ctx, p, in, {r, t, s}); break;
      case PTO_T0_EXPANDS:
      case PTO_T0_COLREDUCE:
      case PTO_T0_ARGREDUCE:
      case PTO_T0_FILLINDEX:
      case PTO_T0_TERNARY:
      case PTO_T0_AXPY:
      case PTO_T0_PART:
      case PTO_T0_FILLPAD:
      case PTO_T0_TRANSPOSE:
      case PTO_T0_BITWISE:
      case PTO_T0_BITWISES: RunTileOp(ctx, p, in, {r, t, s}); break;
      case PTO_T0_ROWEXPAND:
      case PTO_T0_COLEXPAND: {  // row_expand_*() / col_expand_*(): RowExpand's and ColExpand's routines
        const PtoT0Slot &d = p.slots[t[in.a]], &sd = p.slots[t[in.b]], &bd = p.slots[t[in.c]];
        const SlotState &dst = s[t[in.a]], &src = s[t[in.b]], &b = s[t[in.c]];
        ByElem(d.elem, [&]<typename T>() {
          ByBinaryOp(in.e, [&]<typename F>() {
            T* o = reinterpret_cast<T*>(dst.data);
            const T* x = reinterpret_cast<const T*>(src.data);
            const T* y = reinterpret_cast<const T*>(b.data);
            if (in.code == PTO_T0_ROWEXPAND) {
              detail::RowExpandRoutine<F, T>(ctx, in.line, o, d.cols, x, sd.cols, y, bd.cols, dst.valid_rows,
                                             dst.valid_cols);
            } else {
              detail::ColExpandRoutine<F, T>(ctx, in.line, o, d.cols, x, sd.cols, y, dst.valid_rows, dst.valid_cols);
            }
          });
        });
        break;
      }
      case PTO_T0_PRINT:
      case PTO_T0_ASSERT: {  // printf() / pto_assert(): DebugArg of each argument as the generated code holds it
        if (in.code == PTO_T0_ASSERT && r[in.c] != 0) break;
        PtoArg list[33] = {};
        for (int k = 0; k < in.d; ++k) {
          list[k] = WithScalar(r[in.b + k], int((in.imm >> (2 * k)) & 3), [](auto v) { return detail::DebugArg(v); });
        }
        if (in.code == PTO_T0_PRINT) {
          ctx.api->print(&ctx, in.line, in.s0, list, in.d, in.f ? PTO_PRINT_LOC : 0);
        } else {
          ctx.api->assert_fail(&ctx, in.line, in.s1, in.s0, list, in.d, in.f ? PTO_PRINT_LOC : 0);
        }
        break;
      }
      case PTO_T0_TRAP: trap(ctx, in.line);
      default: Fault(ctx, in.line, "tier-0", "unknown tier-0 instruction (a pypto_pro bug)");
    }
  }
}

}  // namespace pto::tier0
