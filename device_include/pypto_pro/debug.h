// pl.printf and pl.pto_assert. The device passes the format and typed arguments to the runtime,
// which formats them: kernel.cpp stays free of <cstdio>, and output lines are printed whole.
#pragma once

#include "pypto_pro/tile.h"

namespace pto {

namespace detail {

inline PtoArg DebugArg(bool v) {
  PtoArg a{};
  a.kind = PTO_ARG_BOOL;
  a.bits = 1;
  a.value.i = v ? 1 : 0;
  return a;
}

template <typename T>
inline PtoArg DebugArg(T v) {
  PtoArg a{};
  a.bits = uint32_t(sizeof(T) * 8);
  if constexpr (__is_same(T, float) || __is_same(T, double)) {
    a.kind = PTO_ARG_FLOAT;
    a.value.f = double(v);
  } else if constexpr (T(-1) < T(0)) {
    a.kind = PTO_ARG_INT;
    a.value.i = int64_t(v);
  } else {
    a.kind = PTO_ARG_UINT;
    a.value.u = uint64_t(v);
  }
  return a;
}

}  // namespace detail

template <typename... Args>
inline void printf(CoreCtx& ctx, int line, const char* fmt, bool loc, Args... args) {
  const PtoArg list[sizeof...(Args) + 1] = {detail::DebugArg(args)..., PtoArg{}};
  ctx.api->print(&ctx, line, fmt, list, int32_t(sizeof...(Args)), loc ? PTO_PRINT_LOC : 0);
}

// A failed assertion is reported (printed, or a fault with PYPTO_PRO_ASSERT=raise); the kernel goes on.
template <typename... Args>
inline void pto_assert(CoreCtx& ctx, int line, const char* fmt, bool loc, const char* condition_text, bool condition,
                       Args... args) {
  if (__builtin_expect(condition, true)) return;
  const PtoArg list[sizeof...(Args) + 1] = {detail::DebugArg(args)..., PtoArg{}};
  ctx.api->assert_fail(&ctx, line, condition_text, fmt, list, int32_t(sizeof...(Args)), loc ? PTO_PRINT_LOC : 0);
}

namespace detail {

template <typename T>
constexpr int32_t DumpDType() {
  if constexpr (__is_same(T, bool)) return PTO_DTYPE_Bool;
  else if constexpr (__is_same(T, int8_t)) return PTO_DTYPE_Int8;
  else if constexpr (__is_same(T, int16_t)) return PTO_DTYPE_Int16;
  else if constexpr (__is_same(T, int32_t)) return PTO_DTYPE_Int32;
  else if constexpr (__is_same(T, int64_t)) return PTO_DTYPE_Int64;
  else if constexpr (__is_same(T, uint8_t)) return PTO_DTYPE_UInt8;
  else if constexpr (__is_same(T, uint16_t)) return PTO_DTYPE_UInt16;
  else if constexpr (__is_same(T, uint32_t)) return PTO_DTYPE_UInt32;
  else if constexpr (__is_same(T, uint64_t)) return PTO_DTYPE_UInt64;
  else if constexpr (__is_same(T, half)) return PTO_DTYPE_FP16;
  else if constexpr (__is_same(T, bfloat16)) return PTO_DTYPE_BF16;
  else return PTO_DTYPE_FP32;
}

// The window [off, off + shape) of a `rank`-dim container of extent `dims`; a negative shape entry
// means "to the end" (a tile: its valid window). A window outside is the op's fault.
inline void DumpWindow(CoreCtx& ctx, int line, const char* name, int rank, const int64_t* dims, const int64_t* off,
                       int64_t* shape) {
  bool ok = true;
  for (int i = 0; i < rank; ++i) {
    if (shape[i] < 0) shape[i] = dims[i] - off[i];
    ok = ok && off[i] >= 0 && shape[i] >= 0 && off[i] + shape[i] <= dims[i];
  }
  if (ok) return;
  PtoFaultDetail d{};
  d.op = "dump_data";
  d.message = "the dumped window leaves the data";
  d.tensor = name;
  d.rank = rank;
  for (int i = 0; i < rank; ++i) {
    d.offsets[i] = off[i];
    d.extent[i] = shape[i];
    d.shape[i] = dims[i];
  }
  Fault(ctx, line, d);
}

}  // namespace detail

// pl.dump_data(tensor, offsets, shapes): the window of a GM tensor (shapes entries < 0: to the end).
template <typename T, int N>
inline void dump_data(CoreCtx& ctx, int line, bool loc, const char* flag, const char* /*name*/,
                      const GmTensor<T, N>& t, Idx<N> off, Idx<N> shape) {
  PtoDump d{};
  d.name = t.name;
  d.what = "tensor";
  d.flag = flag && flag[0] ? flag : nullptr;
  d.dtype = detail::DumpDType<T>();
  d.rank = N;
  d.flags = loc ? PTO_PRINT_LOC : 0;
  detail::DumpWindow(ctx, line, t.name, N, t.shape, off.v, shape.v);
  detail::CheckBuffer(ctx, line, "dump_data", t, off.v, shape.v);  // a view may reach past its buffer
  int64_t first = 0;
  for (int i = 0; i < N; ++i) {
    d.offsets[i] = off.v[i];
    d.shape[i] = shape.v[i];
    d.stride[i] = t.stride[i];
    first += off.v[i] * t.stride[i];
  }
  d.data = t.data + first;
  ctx.api->dump(&ctx, line, &d);
}

// pl.dump_data(tile, offsets, shapes): a window of a tile in logical row-major order (shapes entries
// < 0: its valid window from the offset). `name` is the tile's name in the kernel.
template <typename T, int R, int C, int M, int L, int P, int K>
inline void dump_data(CoreCtx& ctx, int line, bool loc, const char* flag, const char* name,
                      const Tile<T, R, C, M, L, P, K>& t, Idx<2> off, Idx<2> shape) {
  using TileT = Tile<T, R, C, M, L, P, K>;
  const int64_t dims[2] = {t.valid_rows, t.valid_cols};
  PtoDump d{};
  d.name = name;
  d.what = TileT::kMem == kVec ? "Vec tile" : TileT::kMem == kMat ? "Mat tile" : TileT::kMem == kLeft ? "Left tile"
                                                               : TileT::kMem == kRight ? "Right tile" : "tile";
  d.flag = flag && flag[0] ? flag : nullptr;
  d.dtype = detail::DumpDType<typename TileT::Elem>();
  d.rank = 2;
  d.flags = loc ? PTO_PRINT_LOC : 0;
  detail::DumpWindow(ctx, line, name, 2, dims, off.v, shape.v);
  for (int i = 0; i < 2; ++i) {
    d.offsets[i] = off.v[i];
    d.shape[i] = shape.v[i];
  }
  d.stride[0] = TileT::kCols;
  d.stride[1] = 1;
  d.data = t.data + off.v[0] * TileT::kCols + off.v[1];
  ctx.api->dump(&ctx, line, &d);
}

// An Acc tile is dumped through a GM workspace of its dtype, as on the NPU: the fixpipe copies the
// whole physical tile there (row-major, from the workspace's first element; also for a window, so the
// workspace must hold the whole tile), and the window of the workspace's copy is dumped.
template <typename TileT, typename T, int N>
inline void dump_data_ws(CoreCtx& ctx, int line, bool loc, const char* flag, const char* name, const TileT& t,
                         Idx<2> off, Idx<2> shape, const GmTensor<T, N>& workspace) {
  static_assert(__is_same(typename TileT::Elem, T), "the workspace has the Acc tile's dtype");
  const int64_t dims[2] = {t.valid_rows, t.valid_cols};
  detail::DumpWindow(ctx, line, name, 2, dims, off.v, shape.v);
  const int64_t count = int64_t(TileT::kRows) * TileT::kCols;
  if (!workspace.contiguous) {
    Fault(ctx, line, "dump_data", "the workspace of an Acc tile's dump must be a row-major (contiguous) GM tensor");
  }
  if (count > detail::Elements(workspace)) {
    PtoFaultDetail d{};
    d.op = "dump_data";
    d.message = "the workspace is smaller than the Acc tile (the fixpipe writes the whole tile, also for a window)";
    d.tensor = workspace.name;
    d.rank = 1;
    d.extent[0] = count;
    d.shape[0] = detail::Elements(workspace);
    Fault(ctx, line, d);
  }
  int64_t first[N] = {}, run[N];  // `count` elements from the first: in the workspace's buffer too
  for (int i = 0; i < N; ++i) run[i] = i == N - 1 ? count : 1;
  detail::CheckBuffer(ctx, line, "dump_data", workspace, first, run);
  __builtin_memcpy(workspace.data, t.data, size_t(count) * sizeof(T));
  PtoDump d{};
  d.name = name;
  d.what = "Acc tile";
  d.flag = flag && flag[0] ? flag : nullptr;
  d.dtype = detail::DumpDType<T>();
  d.rank = 2;
  d.flags = loc ? PTO_PRINT_LOC : 0;
  for (int i = 0; i < 2; ++i) {
    d.offsets[i] = off.v[i];
    d.shape[i] = shape.v[i];
  }
  d.stride[0] = TileT::kCols;
  d.stride[1] = 1;
  d.data = workspace.data + off.v[0] * TileT::kCols + off.v[1];
  ctx.api->dump(&ctx, line, &d);
}

// A run-time index into a list or pl.struct_array of the kernel: lo <= index <= hi, or a fault.
template <typename I>
inline void CheckIndex(CoreCtx& ctx, int line, int64_t lo, int64_t hi, const char* what, I index) {
  if (__builtin_expect(int64_t(index) >= lo && int64_t(index) <= hi, 1)) return;
  FaultText text;
  text << "index " << int64_t(index) << " is outside [" << lo << ", " << hi << "] of " << what;
  Fault(ctx, line, "", text.text);
}

// A run-time event_id= / mutex_id= that is none of the op's legal ids (the end of the dispatch over them).
template <typename I>
[[noreturn]] inline void IndexFault(CoreCtx& ctx, int line, const char* what, const char* legal, I index) {
  FaultText text;
  text << what << "=" << int64_t(index) << " at run time is not one of the legal ids " << legal;
  Fault(ctx, line, "", text.text);
}

// pl.trap(): the core stops; the launch ends with a fault at this line.
[[noreturn]] inline void trap(CoreCtx& ctx, int line) { Fault(ctx, line, "trap", "pl.trap() stopped the kernel"); }

}  // namespace pto
