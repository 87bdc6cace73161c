// GM tensors, tiles, faults and scalar helpers used by generated kernel code.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pypto_pro/abi.h"
#include "pypto_pro/numeric.h"

namespace pto {

using CoreCtx = PtoCoreCtx;

// Memory spaces (kDDR, kVec, kMat, ...) and layouts (kND, ...) from the one list in hw_tables.h.
#define PTO_DEVICE_ENUM_(name) k##name,
enum Mem : int { PTO_HW_MEMORIES(PTO_DEVICE_ENUM_) };
enum Layout : int { PTO_HW_LAYOUTS(PTO_DEVICE_ENUM_) };
#undef PTO_DEVICE_ENUM_

[[noreturn]] inline void Fault(CoreCtx& ctx, int line, const PtoFaultDetail& detail) {
  ctx.api->fault(&ctx, line, &detail);
  __builtin_unreachable();
}

[[noreturn]] inline void Fault(CoreCtx& ctx, int line, const char* op, const char* message) {
  PtoFaultDetail d{};
  d.op = op;
  d.message = message;
  Fault(ctx, line, d);
}

// At every loop back-edge: one load and a compare, a call into the runtime only when it changed the
// poll word (a launch was cancelled by Ctrl-C or a timeout, or a periodic check is due).
inline void Poll(CoreCtx& ctx, int line) {
  if (__builtin_expect(*ctx.poll_word != ctx.poll_seen, 0)) ctx.api->poll(&ctx, line);
}

template <int N>
struct Idx {
  int64_t v[N];
};

// A GM tensor: a tensor argument (host memory used in place, row-major contiguous) or a view of GM
// made in the kernel (pl.make_tensor, pl.set_stride; gm_view.h): the address of its first element,
// its shape and strides in elements (strides are never negative), and the launch buffer [lo, hi) it
// lies in. Every access is checked against the shape, then against that buffer: a view may describe
// more than its buffer holds, and reaching outside it is a fault, never a silent access.
template <typename T, int N>
struct GmTensor {
  T* data;
  int64_t shape[N];
  int64_t stride[N];
  const char* name;
  const uint8_t* lo;   // the launch buffer the tensor lies in
  const uint8_t* hi;
  const char* buffer;  // the parameter that buffer was passed for
  bool contiguous;     // row-major strides: a linear element offset is the element's distance from data
  bool fresh;          // its buffer is still untouched: stores to it go through the caches (MarkFresh)
};

template <typename T, int N>
inline GmTensor<T, N> MakeGm(uint8_t* data, Idx<N> shape, const char* name) {
  GmTensor<T, N> t;
  t.data = reinterpret_cast<T*>(data);
  t.name = name;
  int64_t stride = 1;
  for (int i = N - 1; i >= 0; --i) {
    t.shape[i] = shape.v[i];
    t.stride[i] = stride;
    stride *= shape.v[i];
  }
  t.lo = data;
  t.hi = data + stride * int64_t(sizeof(T));
  t.buffer = name;
  t.contiguous = true;
  t.fresh = false;
  return t;
}

namespace detail {

// Fault text with numbers in it (the device headers have no printf).
struct GmText {
  char text[384] = {};
  int size = 0;
  GmText& operator<<(const char* s) {
    while (s && *s && size < int(sizeof text) - 1) text[size++] = *s++;
    return *this;
  }
  GmText& operator<<(int64_t v) {
    char digits[24];
    int k = 0;
    uint64_t u = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
    do {
      digits[k++] = char('0' + u % 10);
      u /= 10;
    } while (u);
    if (v < 0) digits[k++] = '-';
    while (k && size < int(sizeof text) - 1) text[size++] = digits[--k];
    return *this;
  }
};

// The element at `off` along each axis of `gm` (a window's first element).
template <typename T, int N>
inline T* ElementAt(const GmTensor<T, N>& gm, const int64_t* off) {
  int64_t linear = 0;
  for (int i = 0; i < N; ++i) linear += off[i] * gm.stride[i];
  return gm.data + linear;
}

// Whether the elements an access touches, `extent[k]` along each axis k from element `off[k]`, lie in
// the tensor's launch buffer. [begin, end) are their bytes counted from the buffer's start (for
// messages); `overflow`: the address arithmetic overflowed (a stride too large for any buffer). An
// access of no element touches nothing and passes.
template <typename T, int N>
inline bool InBuffer(const GmTensor<T, N>& gm, const int64_t* off, const int64_t* extent, int64_t& begin,
                     int64_t& end, bool& overflow) {
  begin = end = 0;
  overflow = false;
  for (int k = 0; k < N; ++k) {
    if (extent[k] <= 0) return true;
  }
  int64_t first = 0, last = 0;
  for (int k = 0; k < N; ++k) {
    int64_t a, b;
    overflow |= __builtin_mul_overflow(off[k], gm.stride[k], &a) || __builtin_add_overflow(first, a, &first);
    overflow |= __builtin_mul_overflow(off[k] + extent[k] - 1, gm.stride[k], &b) ||
                __builtin_add_overflow(last, b, &last);
  }
  const int64_t size = int64_t(sizeof(T)), base = reinterpret_cast<const uint8_t*>(gm.data) - gm.lo;
  overflow |= __builtin_mul_overflow(first, size, &begin) || __builtin_add_overflow(begin, base, &begin);
  overflow |= __builtin_mul_overflow(last, size, &end) || __builtin_add_overflow(end, base + size, &end);
  return !overflow && begin >= 0 && end <= gm.hi - gm.lo;
}

// The fault of an access InBuffer refused: the buffer, its parameter and the bytes the access spans.
template <typename T, int N>
[[noreturn]] inline void BufferFault(CoreCtx& ctx, int line, const char* op, const GmTensor<T, N>& gm,
                                     const int64_t* off, const int64_t* extent, int64_t begin, int64_t end,
                                     bool overflow) {
  GmText m;
  m << "GM access outside the buffer passed for parameter '" << gm.buffer << "' (" << int64_t(gm.hi - gm.lo)
    << " bytes)";
  if (overflow) {
    m << ": the address of the window overflows (strides too large)";
  } else {
    m << ": it would touch bytes [" << begin << ", " << end << ") of that buffer";
  }
  PtoFaultDetail d{};
  d.op = op;
  d.message = m.text;
  d.tensor = gm.name;
  d.rank = N < PTO_FAULT_MAX_RANK ? N : PTO_FAULT_MAX_RANK;
  for (int i = 0; i < d.rank; ++i) {
    d.offsets[i] = off[i];
    d.extent[i] = extent[i];
    d.shape[i] = gm.shape[i];
  }
  Fault(ctx, line, d);
}

// Checks an access of `extent` elements from `off` against the tensor's buffer (the shape is checked
// first by the caller).
template <typename T, int N>
inline void CheckBuffer(CoreCtx& ctx, int line, const char* op, const GmTensor<T, N>& gm, const int64_t* off,
                        const int64_t* extent) {
  int64_t begin, end;
  bool overflow;
  if (__builtin_expect(!InBuffer(gm, off, extent, begin, end, overflow), 0)) {
    BufferFault(ctx, line, op, gm, off, extent, begin, end, overflow);
  }
}

}  // namespace detail

// One tile slot: a typed window at a byte address of a core's local memory. Tile variables in
// kernel code point at slots, so pl.set_validshape on a tile changes what later ops see.
// P: the pl.TilePad value that fills the region outside the valid window (0 null, 1 zero, 2 max, 3 min);
// K: the compact mode (TileType(compact=): 1 lets a fractal tile hold a partial window).
// The simulator keeps every tile's elements in logical row-major order; the hardware's byte order of
// NZ/ZN and wide DN tiles shows only where a kernel addresses elements by a linear offset
// (ElementIndex).
template <typename T, int R, int C, int M, int L = kND, int P = 0, int K = 0>
struct Tile {
  using Elem = T;
  static constexpr int kRows = R;
  static constexpr int kCols = C;
  static constexpr int kMem = M;
  static constexpr int kLayout = L;
  static constexpr int kPad = P;
  static constexpr int kCompact = K;
  T* data;
  int32_t valid_rows;
  int32_t valid_cols;
  uint32_t mutex_mask;  // bit i set: the slot carries TileGroup mutex id i
};

template <typename TileT>
inline void InitTile(CoreCtx& ctx, TileT& tile, uint32_t addr, int32_t valid_rows, int32_t valid_cols,
                     uint32_t mutex_mask) {
  tile.data = reinterpret_cast<typename TileT::Elem*>(ctx.mem[TileT::kMem] + addr);
  tile.valid_rows = valid_rows;
  tile.valid_cols = valid_cols;
  tile.mutex_mask = mutex_mask;
}

// Where `tile`'s bytes lie in core `peer`'s (PTO_PEER_*) copy of its memory; null outside a mixed
// kernel. Addresses mean the same in every core's memory, so the offset carries over: the data paths
// that cross the cores of a mixed block (Acc -> Vec, Vec -> Mat) write there.
template <typename T>
inline typename T::Elem* PeerData(CoreCtx& ctx, const T& tile, int peer) {
  uint8_t* base = ctx.api->peer_memory ? ctx.api->peer_memory(&ctx, peer, T::kMem) : nullptr;
  if (!base) return nullptr;
  return reinterpret_cast<typename T::Elem*>(base + (reinterpret_cast<const uint8_t*>(tile.data) - ctx.mem[T::kMem]));
}

namespace detail {
// tile[r0:r1, c0:c1] must lie inside the tile's rows x cols (pto::Subview and the tier-0 executor).
inline void CheckSubview(CoreCtx& ctx, int line, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t rows,
                         int64_t cols) {
  if (0 <= r0 && r0 <= r1 && r1 <= rows && 0 <= c0 && c0 <= c1 && c1 <= cols) return;
  PtoFaultDetail d{};
  d.op = "tile[r0:r1, c0:c1]";
  d.message = "the slice leaves the tile's shape";
  d.rank = 2;
  d.offsets[0] = r0;
  d.offsets[1] = c0;
  d.extent[0] = r1 - r0;
  d.extent[1] = c1 - c0;
  d.shape[0] = rows;
  d.shape[1] = cols;
  Fault(ctx, line, d);
}
}  // namespace detail

// tile[row0:row1, col0:col1] (a subview): the same bytes from (row0, col0) with the same row stride,
// its window the slice clamped to the tile's window. A slice outside the tile's shape is a fault.
template <typename TD, typename TS>
inline TD Subview(CoreCtx& ctx, int line, const TS& tile, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  static_assert(__is_same(typename TD::Elem, typename TS::Elem) && TD::kRows == TS::kRows && TD::kCols == TS::kCols &&
                    TD::kMem == TS::kMem,
                "a subview keeps its tile's type");
  detail::CheckSubview(ctx, line, r0, r1, c0, c1, TS::kRows, TS::kCols);
  TD view;
  view.data = tile.data + r0 * TS::kCols + c0;
  const int64_t rows = (r1 < tile.valid_rows ? r1 : tile.valid_rows) - r0;
  const int64_t cols = (c1 < tile.valid_cols ? c1 : tile.valid_cols) - c0;
  view.valid_rows = int32_t(rows > 0 ? rows : 0);
  view.valid_cols = int32_t(cols > 0 ? cols : 0);
  view.mutex_mask = tile.mutex_mask;
  return view;
}

// pl.reinterpret: the tile's bytes as another tile type of the same memory (no more bytes than the
// tile's; the compiler checks it); the view's whole shape is valid, and it keeps the tile's mutexes.
template <typename TD, typename TS>
inline TD Reinterpret(const TS& tile) {
  static_assert(TD::kMem == TS::kMem, "a view keeps its tile's memory");
  static_assert(int64_t(sizeof(typename TD::Elem)) * TD::kRows * TD::kCols <=
                    int64_t(sizeof(typename TS::Elem)) * TS::kRows * TS::kCols,
                "a view may not reach past its tile");
  TD view;
  view.data = reinterpret_cast<typename TD::Elem*>(tile.data);
  view.valid_rows = TD::kRows;
  view.valid_cols = TD::kCols;
  view.mutex_mask = tile.mutex_mask;
  return view;
}

// A fractal (NZ/ZN) tile without compact=1 must hold its whole shape when a data path moves it: the
// NPU places a partial window of such a tile only in compact mode (codegen emits the check).
inline void RequireCompactWindowOf(CoreCtx& ctx, int line, int32_t valid_rows, int32_t valid_cols, int64_t rows,
                                   int64_t cols, const char* op, const char* message) {
  if (__builtin_expect(valid_rows == rows && valid_cols == cols, 1)) return;
  PtoFaultDetail d{};
  d.op = op;
  d.message = message;
  d.rank = 2;
  d.extent[0] = valid_rows;
  d.extent[1] = valid_cols;
  d.shape[0] = rows;
  d.shape[1] = cols;
  Fault(ctx, line, d);
}

template <typename TileT>
inline void RequireCompactWindow(CoreCtx& ctx, int line, const TileT& tile, const char* op, const char* message) {
  RequireCompactWindowOf(ctx, line, tile.valid_rows, tile.valid_cols, TileT::kRows, TileT::kCols, op, message);
}

// Group cursors: next() advances then selects, current() selects, previous() the one before.
inline int32_t CursorNext(int32_t& cursor, int32_t depth) {
  cursor = cursor + 1 == depth ? 0 : cursor + 1;
  return cursor;
}
inline int32_t CursorPrevious(int32_t cursor, int32_t depth) { return cursor == 0 ? depth - 1 : cursor - 1; }

// `index` of `op` outside [0, count): the fault of a one-dimensional access (of `tensor`'s elements,
// when named).
[[noreturn]] inline void IndexFault(CoreCtx& ctx, int line, const char* op, const char* message, int64_t index,
                                    int64_t count, const char* tensor = nullptr) {
  PtoFaultDetail d{};
  d.op = op;
  d.message = message;
  d.tensor = tensor;
  d.rank = 1;
  d.offsets[0] = index;
  d.extent[0] = 1;
  d.shape[0] = count;
  Fault(ctx, line, d);
}

inline void CheckSlotIndex(CoreCtx& ctx, int line, int64_t index, int32_t depth) {
  if (index < 0 || index >= depth) {
    IndexFault(ctx, line, "tile group index", "tile group index out of range", index, depth);
  }
}

template <typename TileT>
inline TileT* SelectSlot(CoreCtx& ctx, int line, TileT* slots, int64_t index, int32_t depth) {
  CheckSlotIndex(ctx, line, index, depth);
  return &slots[index];
}

// A fault message with numbers in it, built without the C library.
struct FaultText {
  char text[256] = {};
  int size = 0;
  FaultText& operator<<(const char* s) {
    while (*s && size < int(sizeof text) - 1) text[size++] = *s++;
    return *this;
  }
  template <typename I>
  FaultText& operator<<(I v) {
    char digits[24];
    int k = 0;
    const bool negative = v < I(0);
    uint64_t u = negative ? uint64_t(0) - uint64_t(v) : uint64_t(v);
    do {
      digits[k++] = char('0' + u % 10);
      u /= 10;
    } while (u);
    if (negative) digits[k++] = '-';
    while (k && size < int(sizeof text) - 1) text[size++] = digits[--k];
    return *this;
  }
};

// ---- scalar helpers: integer division never traps the host ----
template <typename T>
inline T IntDiv(CoreCtx& ctx, int line, T a, T b) {
  if (b == 0) Fault(ctx, line, "scalar //", "integer division by zero");
  if (b == T(-1)) {  // INT_MIN / -1 wraps like the device instead of trapping the host
    T negated;
    __builtin_sub_overflow(T(0), a, &negated);
    return negated;
  }
  return a / b;
}
template <typename T>
inline T IntMod(CoreCtx& ctx, int line, T a, T b) {
  if (b == 0) Fault(ctx, line, "scalar %", "integer modulo by zero");
  if (b == T(-1)) return T(0);
  return a % b;
}
// Scalar shifts: an amount outside [0, bits) faults (C++ leaves it undefined); left shifts drop the
// bits shifted out, right shifts are arithmetic on signed values.
template <typename T>
inline T ShiftAmount(CoreCtx& ctx, int line, const char* op, T n) {
  if (__builtin_expect(n < 0 || n >= T(8 * sizeof(T)), 0)) {
    FaultText text;
    text << "shift amount " << int64_t(n) << " is outside [0, " << int(8 * sizeof(T)) << ") for a " << int(8 * sizeof(T))
         << "-bit value";
    Fault(ctx, line, op, text.text);
  }
  return n;
}
template <typename T>
inline T Shl(CoreCtx& ctx, int line, T a, T n) {
  return T(uint64_t(a) << unsigned(ShiftAmount(ctx, line, "scalar <<", n)));
}
template <typename T>
inline T Shr(CoreCtx& ctx, int line, T a, T n) {
  return T(a >> unsigned(ShiftAmount(ctx, line, "scalar >>", n)));
}
template <typename T>
inline T Min(T a, T b) { return b < a ? b : a; }

// The value pl.TilePad `pad` fills a tile's invalid region with: 0, or the dtype's largest / smallest
// value (+inf / -inf for floating types).
template <typename T>
inline T PadValue(int pad) {
  if constexpr (kIsFloatLike<T>) {
    return FromFloat<T>(pad == 1 ? 0.0f : (pad == 2 ? __builtin_inff() : -__builtin_inff()));
  } else if constexpr (__is_same(T, bool)) {
    return pad == 2;
  } else if constexpr (T(-1) < T(0)) {
    constexpr T kMax = T((uint64_t(1) << (8 * sizeof(T) - 1)) - 1);
    return pad == 1 ? T(0) : (pad == 2 ? kMax : T(-kMax - 1));
  } else {
    return pad == 2 ? T(~T(0)) : T(0);
  }
}

// Every element of a tile_rows x tile_cols tile at `data` outside its top-left rows x cols window =
// pad value `pad`.
template <typename E>
inline void FillOutsideWindowOf(E* data, int pad, int64_t tile_rows, int64_t tile_cols, int64_t rows, int64_t cols) {
  const E v = PadValue<E>(pad);
  if (rows < 0) rows = 0;
  if (cols < 0) cols = 0;
  for (int64_t r = 0; r < tile_rows; ++r) {
    for (int64_t c = r < rows ? cols : 0; c < tile_cols; ++c) data[r * tile_cols + c] = v;
  }
}

template <typename TileT>
inline void FillOutsideWindow(typename TileT::Elem* data, int64_t rows, int64_t cols) {
  static_assert(TileT::kPad != 0, "the tile has no pad value");
  FillOutsideWindowOf(data, TileT::kPad, TileT::kRows, TileT::kCols, rows, cols);
}
template <typename T>
inline T Max(T a, T b) { return a < b ? b : a; }
inline float FloorDiv(float a, float b) { return __builtin_floorf(a / b); }
inline float FloatMod(float a, float b) { return __builtin_fmodf(a, b); }

}  // namespace pto

namespace pto {

// A TilingData array read at an index outside it (ArrayAt; the tier-0 executor's PTO_T0_FIELD).
[[noreturn]] inline void ArrayIndexFault(CoreCtx& ctx, int line, int64_t index, int count) {
  IndexFault(ctx, line, "TilingData array", "TilingData array index out of range", index, count);
}

// tiling.array[index] with a run-time index: checked, like every other access of a kernel.
template <typename T, int N>
inline T ArrayAt(CoreCtx& ctx, int line, const T (&array)[N], int count, int64_t index) {
  if (index < 0 || index >= count) ArrayIndexFault(ctx, line, index, count);
  return array[index];
}

}  // namespace pto

namespace pto {

// ---- tile descriptors and single elements (scalar pipe S) ----

namespace detail {
// set_validshape's check of a rows x cols window against a tile_rows x tile_cols tile.
inline void CheckValidShape(CoreCtx& ctx, int line, int64_t rows, int64_t cols, int64_t tile_rows, int64_t tile_cols) {
  if (rows < 0 || rows > tile_rows || cols < 0 || cols > tile_cols) {
    PtoFaultDetail d{};
    d.op = "set_validshape";
    d.message = "valid shape outside the tile's shape";
    d.rank = 2;
    d.extent[0] = rows;
    d.extent[1] = cols;
    d.shape[0] = tile_rows;
    d.shape[1] = tile_cols;
    Fault(ctx, line, d);
  }
}
}  // namespace detail

template <typename TileT>
inline void set_validshape(CoreCtx& ctx, int line, TileT& tile, Idx<2> shape) {
  detail::CheckValidShape(ctx, line, shape.v[0], shape.v[1], TileT::kRows, TileT::kCols);
  tile.valid_rows = int32_t(shape.v[0]);
  tile.valid_cols = int32_t(shape.v[1]);
}

template <typename TileT>
inline void set_validshape(CoreCtx& ctx, int line, TileT& tile, Idx<1> shape) {
  set_validshape(ctx, line, tile, Idx<2>{{1, shape.v[0]}});
}

namespace detail {

// What an element reads as in scalar code: fp16/bf16 widen to fp32.
template <typename T>
struct ScalarOf {
  using type = T;
};
template <>
struct ScalarOf<half> {
  using type = float;
};
template <>
struct ScalarOf<bfloat16> {
  using type = float;
};

template <typename T, typename V>
inline T ToElement(V value) {
  if constexpr (kIsNarrowFloat<T>) return FromFloat<T>(float(value));
  else return T(value);
}

[[noreturn]] inline void ElementFault(CoreCtx& ctx, int line, const char* op, const char* tensor, int64_t offset,
                                      int64_t count) {
  IndexFault(ctx, line, op, "element offset out of range", offset, count, tensor);
}

template <typename T, int N>
inline int64_t Elements(const GmTensor<T, N>& t) {
  int64_t n = 1;
  for (int i = 0; i < N; ++i) n *= t.shape[i];
  return n;
}

// The element of a GM tensor at linear offset `offset`, counted row-major over its shape (the
// strides place it), checked against the shape and against the tensor's buffer.
template <typename T, int N>
inline T* GmElement(CoreCtx& ctx, int line, const char* op, const GmTensor<T, N>& tensor, int64_t offset) {
  const int64_t count = Elements(tensor);
  if (offset < 0 || offset >= count) ElementFault(ctx, line, op, tensor.name, offset, count);
  int64_t index[N], one[N];
  auto unravel = [&] {
    int64_t rest = offset;
    for (int k = N - 1; k >= 0; --k) {
      index[k] = rest % tensor.shape[k];
      rest /= tensor.shape[k];
    }
  };
  for (int k = 0; k < N; ++k) index[k] = 0, one[k] = 1;
  if (tensor.contiguous) {
    index[N - 1] = offset;  // row-major strides (the last is 1): the offset is the distance from data
  } else {
    unravel();
  }
  int64_t begin, end;
  bool overflow;
  if (__builtin_expect(!InBuffer(tensor, index, one, begin, end, overflow), 0)) {
    unravel();  // reported by its indices
    BufferFault(ctx, line, op, tensor, index, one, begin, end, overflow);
  }
  return reinterpret_cast<T*>(const_cast<uint8_t*>(tensor.lo) + begin);
}

}  // namespace detail

// The logical (row-major) index of the element at linear offset `offset` of the tile's storage on the
// NPU: row-major for ND tiles; column-major for DN; for NZ, 32-byte columns of C0 elements, each
// holding every row (the rows of a compact tile's partial window rounded up to 16) one after another;
// ZN is NZ of the transpose. `offset` is in [0, rows x cols).
// (ElementIndexOf: the same for a tile described at run time, as the tier-0 executor's slots are; with
// the template's constants it inlines to the same code.)
inline int64_t ElementIndexOf(int layout, int64_t R, int64_t C, int64_t elem_bytes, int compact, int64_t valid_rows,
                              int64_t valid_cols, int64_t offset) {
  if (layout == kDN) return (offset % R) * C + offset / R;
  if (layout != kNZ && layout != kZN) return offset;
  const bool nz = layout == kNZ;
  const int64_t c0 = 32 / elem_bytes;
  // The NZ view: ZN [R, C] is NZ [C, R] of the transposed matrix.
  const int64_t rows_nz = nz ? R : C, cols_nz = nz ? C : R;
  const int64_t valid = nz ? valid_rows : valid_cols;
  const int64_t stride = compact == 1 && valid < rows_nz ? (valid + 15) / 16 * 16 : rows_nz;
  int64_t r, c;  // in the NZ view
  if (offset < stride * cols_nz) {
    const int64_t block = offset / (stride * c0), within = offset % (stride * c0);
    r = within / c0;
    c = block * c0 + within % c0;
  } else {  // past a compact window's blocks: the rows below them, in order
    r = stride + (offset - stride * cols_nz) / cols_nz;
    c = (offset - stride * cols_nz) % cols_nz;
  }
  return nz ? r * C + c : c * C + r;
}

template <typename TileT>
inline int64_t ElementIndex(const TileT& tile, int64_t offset) {
  return ElementIndexOf(TileT::kLayout, TileT::kRows, TileT::kCols, int64_t(sizeof(typename TileT::Elem)),
                        TileT::kCompact, tile.valid_rows, tile.valid_cols, offset);
}

template <typename TileT>
inline typename detail::ScalarOf<typename TileT::Elem>::type getval(CoreCtx& ctx, int line, const TileT& tile,
                                                                    int64_t offset) {
  constexpr int64_t kCount = int64_t(TileT::kRows) * TileT::kCols;
  if (offset < 0 || offset >= kCount) detail::ElementFault(ctx, line, "getval", nullptr, offset, kCount);
  const int64_t at = ElementIndex(tile, offset);
  if constexpr (kIsNarrowFloat<typename TileT::Elem>) return ToFloat(tile.data[at]);
  else return tile.data[at];
}

template <typename T, int N>
inline typename detail::ScalarOf<T>::type getval(CoreCtx& ctx, int line, const GmTensor<T, N>& tensor,
                                                 int64_t offset) {
  const T* at = detail::GmElement(ctx, line, "getval", tensor, offset);
  if constexpr (kIsNarrowFloat<T>) return ToFloat(*at);
  else return *at;
}

template <typename TileT, typename V>
inline void setval(CoreCtx& ctx, int line, TileT& tile, int64_t offset, V value) {
  constexpr int64_t kCount = int64_t(TileT::kRows) * TileT::kCols;
  if (offset < 0 || offset >= kCount) detail::ElementFault(ctx, line, "setval", nullptr, offset, kCount);
  tile.data[ElementIndex(tile, offset)] = detail::ToElement<typename TileT::Elem>(value);
}

template <typename T, int N, typename V>
inline void setval(CoreCtx& ctx, int line, const GmTensor<T, N>& tensor, int64_t offset, V value) {
  *detail::GmElement(ctx, line, "setval", tensor, offset) = detail::ToElement<T>(value);
}

// A view variable (not const): the tensor's overload, not the tile's.
template <typename T, int N, typename V>
inline void setval(CoreCtx& ctx, int line, GmTensor<T, N>& tensor, int64_t offset, V value) {
  setval(ctx, line, static_cast<const GmTensor<T, N>&>(tensor), offset, value);
}

}  // namespace pto
