// Cube ops: pl.matmul / matmul_acc (pipe M) and pl.move between tiles. Cube tiles keep a logical
// row-major store (docs/device.md#cube-layouts): move, matmul and store give the hardware's results without
// emulating the NZ/ZN fractal byte order.
#pragma once

#include "pypto_pro/data_movement.h"
#include "pypto_pro/gemm.h"
#include "pypto_pro/tile.h"

namespace pto {

// forward_moves (docs/device.md#forwarded-moves): where a load whose Mat tile only forwarded matmuls
// read left its window: in GM (the window's first element and row stride) when its columns lie
// together there, else in the tile. launch: the launch during which its values cannot change (a
// window in GM of a tensor no written buffer of the launch overlaps), else 0 (gemm::Reuse).
template <typename T>
struct InPlace {
  const T* data;
  int64_t stride;
  uint64_t launch;
};

// A forwarded matmul operand read in place: the Mat tile's type and window, its elements at `data`.
template <typename TileT>
struct InPlaceTile {
  using Elem = typename TileT::Elem;
  static constexpr int kRows = TileT::kRows;
  static constexpr int kCols = TileT::kCols;
  static constexpr int kMem = TileT::kMem;
  const Elem* data;
  int64_t stride;
  int32_t valid_rows;
  int32_t valid_cols;
  uint64_t launch;
};

template <typename TileT>
inline InPlaceTile<TileT> ReadInPlace(const TileT& tile, const InPlace<typename TileT::Elem>& at) {
  return {at.data, at.stride, tile.valid_rows, tile.valid_cols, at.launch};
}

namespace detail {

template <typename TileT>
constexpr int64_t RowStride(const TileT&) {
  return TileT::kCols;
}
template <typename TileT>
inline int64_t RowStride(const InPlaceTile<TileT>& t) {
  return t.stride;
}

// The launch during which a matmul operand's values cannot change (gemm::Reuse), or 0.
template <typename TileT>
constexpr uint64_t SteadyDuring(const TileT&) {
  return 0;
}
template <typename TileT>
inline uint64_t SteadyDuring(const InPlaceTile<TileT>& t) {
  return t.launch;
}

// Whether buffer x shares no byte with any of `written` (the buffers a launch writes).
template <int N>
inline bool ApartFrom(PtoRange x, const PtoRange (&written)[N]) {
  const uintptr_t lo = uintptr_t(x.lo), hi = lo + uintptr_t(x.bytes);
  for (const PtoRange& w : written) {
    const uintptr_t w_lo = uintptr_t(w.lo), w_hi = w_lo + uintptr_t(w.bytes);
    if (lo < w_hi && w_lo < hi) return false;
  }
  return true;
}

// The load's checks (the same faults at the same line), then its window left where it is when the
// matmul can read it there: the tensor's last two axes, columns together, rows apart and ascending.
// steady: no buffer the launch writes overlaps src's (the kernel's entry checks, ApartFrom).
template <typename TileT, typename T, int N>
inline InPlace<T> LoadInPlace(CoreCtx& ctx, int line, const char* op, int order, bool tile_units, TileT& dst,
                              const GmTensor<T, N>& src, Idx<N> index, bool steady) {
  static_assert(__is_same(typename TileT::Elem, T), "tile and tensor dtypes differ");
  if constexpr (N >= 2) {
    if (order < 0 && src.stride[N - 1] == 1 && src.stride[N - 2] >= TileT::kCols) {
      const Axes axes = DecodeOrder<N>(-1);
      const Idx<N> offsets = tile_units ? TileOffsets<TileT>(index, axes) : index;
      return {CheckedWindow(ctx, line, op, dst, src, offsets, axes), src.stride[N - 2], steady ? ctx.launch_id : 0};
    }
  }
  Load(ctx, line, op, order, tile_units, RefOf(dst), src, index);
  return {dst.data, TileT::kCols, 0};
}

// The cube unit takes M and K from the left matrix and N from the right one (the right tile's valid
// rows are not consulted), each in [1, 4095]; a window outside its tile is a kernel fault.
inline void CheckMatmulWindowOf(CoreCtx& ctx, int line, const char* op, int32_t m, int32_t k, int32_t n,
                                int64_t lhs_rows, int64_t lhs_cols, int64_t rhs_cols) {
  const bool ok = m >= 1 && k >= 1 && n >= 1 && m <= lhs_rows && k <= lhs_cols && n <= rhs_cols && m <= 4095 &&
                  k <= 4095 && n <= 4095;
  if (__builtin_expect(!ok, 0)) {
    PtoFaultDetail d{};
    d.op = op;
    d.message = "the matmul window [M, K, N] (lhs valid rows and cols, rhs valid cols) is empty, exceeds its tiles "
                "or exceeds 4095";
    d.rank = 3;
    const int64_t window[3] = {m, k, n}, shape[3] = {lhs_rows, lhs_cols, rhs_cols};
    for (int i = 0; i < 3; ++i) {
      d.extent[i] = window[i];
      d.shape[i] = shape[i];
    }
    Fault(ctx, line, d);
  }
}

template <typename TL, typename TR>
inline void CheckMatmulWindow(CoreCtx& ctx, int line, const char* op, const TL& lhs, const TR& rhs) {
  CheckMatmulWindowOf(ctx, line, op, lhs.valid_rows, lhs.valid_cols, rhs.valid_cols, TL::kRows, TL::kCols, TR::kCols);
}

template <typename TD, typename TL, typename TR>
constexpr bool kMatmulShapes = TL::kRows == TD::kRows && TL::kCols == TR::kRows && TR::kCols == TD::kCols;

template <typename TD, typename TL, typename TR>
inline void Matmul(CoreCtx& ctx, int line, const char* op, TD& dst, const TL& lhs, const TR& rhs,
                   gemm::Init<typename TD::Elem> init) {
  static_assert(kMatmulShapes<TD, TL, TR>, "matmul shapes: lhs [M, K] x rhs [K, N] -> dst [M, N]");
  CheckMatmulWindow(ctx, line, op, lhs, rhs);
  gemm::Gemm(lhs.valid_rows, rhs.valid_cols, lhs.valid_cols, lhs.data, RowStride(lhs), rhs.data, RowStride(rhs),
             dst.data, TD::kCols, init, gemm::Reuse{SteadyDuring(lhs), SteadyDuring(rhs)});
}

}  // namespace detail

template <typename TileT, typename T, int N>
inline InPlace<T> load_in_place(CoreCtx& ctx, int line, int order, TileT& dst, const GmTensor<T, N>& src,
                                Idx<N> offsets, bool steady) {
  return detail::LoadInPlace(ctx, line, "load", order, false, dst, src, offsets, steady);
}

template <typename TileT, typename T, int N>
inline InPlace<T> load_tile_in_place(CoreCtx& ctx, int line, int order, TileT& dst, const GmTensor<T, N>& src,
                                     Idx<N> tile_idx, bool steady) {
  return detail::LoadInPlace(ctx, line, "load_tile", order, true, dst, src, tile_idx, steady);
}

// fuse_k_loops (docs/device.md#k-loops): steps [lo, hi) of a K loop that loads ta = A[row, kk] and
// tb = B[kk, col] in place and runs matmul(acc, ...) at step 0 and matmul_acc(acc, acc, ...) after,
// run as one GEMM (gemm::KLoop; ta, tb: any slot of the loop's Mat tiles, all of one whole window).
// Returns false, having changed nothing, when the loop must run as written: fewer than two steps, a
// window not in GM or failing its load's checks (the loop faults at its step), operands the launch
// could change (steady_*: the kernel's entry checks), or a GEMM that would not give the steps' bits.
// `also` (rows ld_also apart), when given, gets the finished sums too (gemm::KLoop).
template <typename TD, typename TA, typename TB, typename T>
inline bool k_loop_matmul(CoreCtx& ctx, TD& acc, const TA& ta, const TB& tb, const GmTensor<T, 2>& a, int64_t row,
                          const GmTensor<T, 2>& b, int64_t col, int64_t lo, int64_t hi, bool steady_a, bool steady_b,
                          typename TD::Elem* also = nullptr, int64_t ld_also = 0) {
  static_assert(detail::kMatmulShapes<TD, TA, TB>, "matmul shapes: lhs [M, K] x rhs [K, N] -> dst [M, N]");
  if (!steady_a || !steady_b || ctx.launch_id == 0 || lo != 0 || hi - lo < 2 || hi - lo > gemm::kKLoopMaxSteps) {
    return false;
  }
  // LoadInPlace's condition (columns together, rows apart), each step's load checks, the matmul's window.
  if (a.stride[1] != 1 || a.stride[0] < TA::kCols || b.stride[1] != 1 || b.stride[0] < TB::kCols) return false;
  using namespace detail;
  const Axes axes = DecodeOrder<2>(-1);
  for (int64_t step = lo; step < hi; ++step) {
    if (!WindowPasses(ta.valid_rows, ta.valid_cols, TA::kRows, TA::kCols, a, TileOffsets<TA>(Idx<2>{{row, step}}, axes),
                      axes) ||
        !WindowPasses(tb.valid_rows, tb.valid_cols, TB::kRows, TB::kCols, b, TileOffsets<TB>(Idx<2>{{step, col}}, axes),
                      axes)) {
      return false;
    }
  }
  const int32_t m = ta.valid_rows, k = ta.valid_cols, n = tb.valid_cols;
  if (m != TA::kRows || k != TA::kCols || n != TB::kCols || m > 4095 || k > 4095 || n > 4095) return false;
  const Idx<2> a_at = TileOffsets<TA>(Idx<2>{{row, lo}}, axes), b_at = TileOffsets<TB>(Idx<2>{{lo, col}}, axes);
  return gemm::KLoop(m, n, k, int(hi - lo), ElementAt(a, a_at.v), a.stride[0], int64_t(TA::kCols), ElementAt(b, b_at.v),
                     b.stride[0], int64_t(TB::kRows) * b.stride[0], acc.data, int64_t(TD::kCols), ctx.launch_id,
                     also, ld_also);
}

// A K loop and the store of its accumulator that follows it (store_tile with kTileUnits, else store;
// no options): 2 when the GEMM wrote the finished sums to acc and to the store's window, which passed
// the store's checks first (the store is done: it would copy the same bytes); 1 when it ran the steps
// only, the store to run as written (its window would fault, or the store would convert); 0 when
// k_loop_matmul declined. c's window cannot overlap A's or B's: a tensor the launch writes is not
// steady. The sums reach c from the tile unit directly instead of through acc and a copy (bf16 1024^3
// K loop 5-7% faster, Intel Xeon).
template <bool kTileUnits, typename TD, typename TA, typename TB, typename T, typename TC>
inline int k_loop_matmul_store(CoreCtx& ctx, TD& acc, const TA& ta, const TB& tb, const GmTensor<T, 2>& a,
                               int64_t row, const GmTensor<T, 2>& b, int64_t col, int64_t lo, int64_t hi,
                               bool steady_a, bool steady_b, const GmTensor<TC, 2>& c, Idx<2> index) {
  typename TD::Elem* to = nullptr;
  if constexpr (__is_same(typename TD::Elem, TC)) {  // the store's plain copy (no fixpipe conversion)
    const detail::Axes axes = detail::DecodeOrder<2>(-1);
    const Idx<2> at = kTileUnits ? detail::TileOffsetsOf(index, TD::kRows, TD::kCols, axes) : index;
    if (acc.valid_rows == TD::kRows && acc.valid_cols == TD::kCols && c.stride[1] == 1 && c.stride[0] >= TD::kCols &&
        detail::WindowPasses(acc.valid_rows, acc.valid_cols, TD::kRows, TD::kCols, c, at, axes)) {
      to = detail::ElementAt(c, at.v);
    }
  }
  if (!k_loop_matmul(ctx, acc, ta, tb, a, row, b, col, lo, hi, steady_a, steady_b, to, to ? c.stride[0] : 0)) return 0;
  return to ? 2 : 1;
}

// dst[:M, :N] = lhs[:M, :K] x rhs[:K, :N]; phase: the unit-flag handshake (fixpipe.h)
template <typename TD, typename TL, typename TR>
inline void matmul(CoreCtx& ctx, int line, int phase, TD& dst, const TL& lhs, const TR& rhs) {
  UnitFlagWait(ctx, line, "matmul", phase, 0);
  detail::Matmul(ctx, line, "matmul", dst, lhs, rhs, {});
  UnitFlagDone(ctx, phase, 1);
}

// dst[:M, :N] = lhs x rhs + bias[0, :N] on every row
template <typename TD, typename TL, typename TR, typename TB>
inline void matmul_bias(CoreCtx& ctx, int line, int phase, TD& dst, const TL& lhs, const TR& rhs, const TB& bias) {
  static_assert(TB::kCols == TD::kCols && __is_same(typename TB::Elem, typename TD::Elem), "bias: one per column");
  UnitFlagWait(ctx, line, "matmul", phase, 0);
  detail::Matmul(ctx, line, "matmul", dst, lhs, rhs, {bias.data, 0});
  UnitFlagDone(ctx, phase, 1);
}

// dst[:M, :N] = acc[:M, :N] + lhs x rhs; dst may be acc itself
template <typename TD, typename TA, typename TL, typename TR>
inline void matmul_acc(CoreCtx& ctx, int line, int phase, TD& dst, const TA& acc, const TL& lhs, const TR& rhs) {
  static_assert(TA::kRows == TD::kRows && TA::kCols == TD::kCols, "matmul_acc: acc has the shape of dst");
  UnitFlagWait(ctx, line, "matmul_acc", phase, 0);
  detail::Matmul(ctx, line, "matmul_acc", dst, lhs, rhs, {acc.data, TA::kCols});
  UnitFlagDone(ctx, phase, 1);
}


// acc_to_vec_mode, numbered like the choices of move(acc_to_vec_mode=) (-1: not given).
enum AccToVecMode : int { kSingleModeVec0 = 0, kSingleModeVec1 = 1, kDualModeSplitM = 2, kDualModeSplitN = 3 };

// How a dual mode splits an Acc window of rows x cols between the two AIVs: AIV 0 takes the first
// `AccToVecShare` rows (SplitM: half of rows rounded up to even) or columns (SplitN: half of cols
// rounded up to a multiple of 32, all of them up to 16), AIV 1 the rest. Single modes: everything.
constexpr int32_t AccToVecShare(int mode, int32_t rows, int32_t cols) {
  if (mode == kDualModeSplitM) return (rows + 1) / 2;
  if (mode == kDualModeSplitN) return cols <= 16 ? cols : (cols + 31) / 32 * 16;
  return rows;
}
// The window AIV 0 receives (the larger share), for sanitizer mode's bookkeeping.
constexpr int32_t AccToVecShareRows(int mode, int32_t rows) {
  return mode == kDualModeSplitM ? AccToVecShare(mode, rows, 0) : rows;
}
constexpr int32_t AccToVecShareCols(int mode, int32_t cols) {
  return mode == kDualModeSplitN ? AccToVecShare(mode, 0, cols) : cols;
}

namespace detail {

[[noreturn]] inline void MoveWindowFault(CoreCtx& ctx, int line, const char* op, int32_t rows, int32_t cols,
                                         int32_t max_rows, int32_t max_cols, int64_t row0 = 0, int64_t col0 = 0) {
  PtoFaultDetail d{};
  d.op = op;
  d.message = row0 || col0 ? "the window at the offset does not fit the source or the destination tile"
                           : "the source's valid window does not fit the source or the destination tile";
  d.rank = 2;
  d.offsets[0] = row0;
  d.offsets[1] = col0;
  d.extent[0] = rows;
  d.extent[1] = cols;
  d.shape[0] = max_rows;
  d.shape[1] = max_cols;
  Fault(ctx, line, d);
}

// One element converted on a move: through the fixpipe from an accumulator, else fp16/bf16 <-> fp32.
template <typename TD, typename TS>
inline TD MoveElem(TS v, const Fixpipe& f) {
  if constexpr (__is_same(TD, TS) && !kFixpipeSource<TS>) {
    return v;
  } else if constexpr (kFixpipeSource<TS>) {
    return __is_same(TD, TS) && f.Plain() ? v : FixpipeElem<TD>(v, f);
  } else {
    return FromFloat<TD>(ToFloat(v));
  }
}

// rows x cols elements between row-major windows, converted like the path converts.
template <typename TD, typename TS>
inline void CopyWindowBody(TD* out, int64_t out_stride, const TS* in, int64_t in_stride, int32_t rows, int32_t cols,
                           const Fixpipe& f) {
  if constexpr (__is_same(TD, TS)) {
    if (kFixpipeSource<TS> && !f.Plain()) {
      FixpipeCopy2D(out, out_stride, in, in_stride, rows, cols, f);
    } else {
      Copy2D(out, out_stride, in, in_stride, rows, cols);
    }
  } else if constexpr (kIsFloatLike<TD> && kIsFloatLike<TS>) {
    if (f.Plain()) {
      ConvertCopy2D(out, out_stride, in, in_stride, rows, cols);
    } else {
      FixpipeCopy2D(out, out_stride, in, in_stride, rows, cols, f);
    }
  } else {
    FixpipeCopy2D(out, out_stride, in, in_stride, rows, cols, f);
  }
}

// out[c][r] = in[r][c] for the rows x cols window of `in`, in 16 x 16 blocks so both sides stay in cache.
template <typename TD, typename TS>
inline void TransposeWindowBody(TD* out, int64_t out_stride, const TS* in, int64_t in_stride, int32_t rows,
                                int32_t cols, const Fixpipe& f) {
  if constexpr (__is_same(TD, TS)) {
    if (!kFixpipeSource<TS> || f.Plain()) return Transpose2D(out, out_stride, in, in_stride, rows, cols);
  }
  constexpr int32_t kBlock = 16;
  for (int32_t r0 = 0; r0 < rows; r0 += kBlock) {
    for (int32_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int32_t r1 = Min(r0 + kBlock, rows), c1 = Min(c0 + kBlock, cols);
      for (int32_t c = c0; c < c1; ++c) {
        for (int32_t r = r0; r < r1; ++r) out[int64_t(c) * out_stride + r] = MoveElem<TD>(in[int64_t(r) * in_stride + c], f);
      }
    }
  }
}

// The moves between tiles of one element type run in the routines library in a kernel compiled with
// PTO_EXTERN_ROUTINES (routines/*.cpp, docs/jit.md#precompiled-device-headers-and-routines); the same
// code either way.
template <typename T>
__attribute__((visibility("default"))) void CopyWindowRoutine(T* out, int64_t out_stride, const T* in,
                                                              int64_t in_stride, int32_t rows, int32_t cols,
                                                              const Fixpipe& f);
template <typename T>
__attribute__((visibility("default"))) void TransposeWindowRoutine(T* out, int64_t out_stride, const T* in,
                                                                   int64_t in_stride, int32_t rows, int32_t cols,
                                                                   const Fixpipe& f);

template <typename TD, typename TS>
inline void CopyWindow(TD* out, int64_t out_stride, const TS* in, int64_t in_stride, int32_t rows, int32_t cols,
                       const Fixpipe& f) {
  if constexpr (kExternRoutines && __is_same(TD, TS) && kRoutineElem<TD>) {
    CopyWindowRoutine(out, out_stride, in, in_stride, rows, cols, f);
  } else {
    CopyWindowBody(out, out_stride, in, in_stride, rows, cols, f);
  }
}

template <typename TD, typename TS>
inline void TransposeWindow(TD* out, int64_t out_stride, const TS* in, int64_t in_stride, int32_t rows, int32_t cols,
                            const Fixpipe& f) {
  if constexpr (kExternRoutines && __is_same(TD, TS) && kRoutineElem<TD>) {
    TransposeWindowRoutine(out, out_stride, in, in_stride, rows, cols, f);
  } else {
    TransposeWindowBody(out, out_stride, in, in_stride, rows, cols, f);
  }
}

// Where a move writes `dst`: in a mixed kernel, the paths that cross cores land in the destination
// core's memory (Acc -> Vec: the UB of the AIV acc_to_vec_mode names; Vec -> Mat: the AIC's L1).
template <typename TD, typename TS>
inline typename TD::Elem* MoveTarget(CoreCtx& ctx, int acc_to_vec_mode, TD& dst) {
  if constexpr (TS::kMem == kAcc && TD::kMem == kVec) {
    const int peer = acc_to_vec_mode == kSingleModeVec1 ? PTO_PEER_AIV1 : PTO_PEER_AIV0;
    if (auto* in_peer = PeerData(ctx, dst, peer)) return in_peer;
  } else if constexpr (TS::kMem == kVec && TD::kMem == kMat) {
    if (auto* in_peer = PeerData(ctx, dst, PTO_PEER_AIC)) return in_peer;
  }
  (void)ctx;
  (void)acc_to_vec_mode;
  return dst.data;
}

// The fixpipe splitting an Acc window between the UBs of AIV 0 and AIV 1 (each share at the top-left
// of that AIV's destination tile, a d_rows x d_cols tile at aiv0 / aiv1; null outside a mixed kernel).
// (MoveSplit below, and the tier-0 executor's slots.)
template <typename ED, typename ES>
inline void MoveSplitOf(CoreCtx& ctx, int line, int mode, ED* aiv0, ED* aiv1, int32_t d_rows, int32_t d_cols,
                        const ES* src, int32_t s_cols, int32_t rows, int32_t cols, const Fixpipe& f) {
  if (!aiv0 || !aiv1) {
    Fault(ctx, line, "move", mode == kDualModeSplitM
                                 ? "acc_to_vec_mode=DualModeSplitM splits between the two AIVs of a mixed kernel; "
                                   "this kernel has none"
                                 : "acc_to_vec_mode=DualModeSplitN splits between the two AIVs of a mixed kernel; "
                                   "this kernel has none");
  }
  const int32_t share = AccToVecShare(mode, rows, cols);
  const bool by_rows = mode == kDualModeSplitM;
  const int32_t rows0 = by_rows ? share : rows, cols0 = by_rows ? cols : share;
  if (rows0 > d_rows || cols0 > d_cols) MoveWindowFault(ctx, line, "move", rows0, cols0, d_rows, d_cols);
  CopyWindow(aiv0, d_cols, src, s_cols, rows0, cols0, f);
  if (by_rows) {
    CopyWindow(aiv1, d_cols, src + int64_t(share) * s_cols, s_cols, rows - share, cols, f);
  } else {
    CopyWindow(aiv1, d_cols, src + share, s_cols, rows, cols - share, f);
  }
}

template <typename TD, typename TS>
inline void MoveSplit(CoreCtx& ctx, int line, int mode, TD& dst, const TS& src, int32_t rows, int32_t cols,
                      const Fixpipe& f) {
  MoveSplitOf(ctx, line, mode, PeerData(ctx, dst, PTO_PEER_AIV0), PeerData(ctx, dst, PTO_PEER_AIV1), TD::kRows,
              TD::kCols, src.data, TS::kCols, rows, cols, f);
}

// UB -> L1 copies an NZ source's fractal blocks as they are: into a ZN tile, whose bytes read as the
// transposed matrix, they land transposed (ir::MoveForm::kInsertTransposed), the offset counting in
// the source's (NZ) frame.
template <typename TD, typename TS>
constexpr bool kInsertTransposes = TS::kMem == kVec && TD::kMem == kMat && TS::kLayout == kNZ && TD::kLayout == kZN;

// The source's rows x cols valid window (of an s_rows x s_cols tile) written at `off` into `out`, a
// d_rows x d_cols tile, transposed (kInsertTransposes) or not. (Insert below, and the tier-0 executor.)
template <typename T>
inline void InsertOf(CoreCtx& ctx, int line, const char* op, T* out, int64_t d_rows, int64_t d_cols, bool transposed,
                     const T* src, int32_t s_rows, int32_t s_cols, int32_t rows, int32_t cols, Idx<2> off) {
  const int64_t dst_rows = transposed ? d_cols : d_rows, dst_cols = transposed ? d_rows : d_cols;
  const bool fits = rows >= 0 && cols >= 0 && rows <= s_rows && cols <= s_cols && off.v[0] >= 0 &&
                    off.v[1] >= 0 && off.v[0] + rows <= dst_rows && off.v[1] + cols <= dst_cols;
  if (__builtin_expect(!fits, 0)) MoveWindowFault(ctx, line, op, rows, cols, dst_rows, dst_cols, off.v[0], off.v[1]);
  if (transposed) {
    TransposeWindow(out + off.v[1] * d_cols + off.v[0], d_cols, src, s_cols, rows, cols, MakeFixpipe(0, -1));
  } else {
    CopyWindow(out + off.v[0] * d_cols + off.v[1], d_cols, src, s_cols, rows, cols, MakeFixpipe(0, -1));
  }
}

// The source's valid window written into `dst` at `off` (pl.insert, and move's insert form).
template <typename TD, typename TS>
inline void Insert(CoreCtx& ctx, int line, const char* op, TD& dst, const TS& src, Idx<2> off) {
  static_assert(__is_same(typename TD::Elem, typename TS::Elem), "UB -> L1 keeps the dtype");
  InsertOf(ctx, line, op, MoveTarget<TD, TS>(ctx, -1, dst), TD::kRows, TD::kCols, kInsertTransposes<TD, TS>, src.data,
           TS::kRows, TS::kCols, src.valid_rows, src.valid_cols, off);
}

// NZ <-> ZN tiles of swapped, non-square shapes: the bytes stay, the logical matrix transposes.
// The rows x cols source window of a move copied (or, between NZ and ZN tiles of transposed shapes,
// transposed) to `out`, a d_rows x d_cols tile, through the fixpipe's stages; a window the
// destination cannot hold is a fault. (move() and the tier-0 executor.)
// kMayTranspose: false where the tile types can never transpose (no transposing code is compiled).
template <bool kMayTranspose, typename ED, typename ES>
inline void MoveWindowOf(CoreCtx& ctx, int line, ED* out, int32_t d_rows, int32_t d_cols, const ES* in,
                         int32_t s_rows, int32_t s_cols, int32_t rows, int32_t cols, bool transposes,
                         const Fixpipe& f) {
  if constexpr (kMayTranspose) {
    if (transposes) {
      if (__builtin_expect(cols > d_rows || rows > d_cols, 0)) {
        MoveWindowFault(ctx, line, "move", cols, rows, d_rows, d_cols);
      }
      TransposeWindow(out, d_cols, in, s_cols, rows, cols, f);
      return;
    }
  }
  if (__builtin_expect(rows > d_rows || cols > d_cols, 0)) {
    MoveWindowFault(ctx, line, "move", rows, cols, Min(d_rows, s_rows), Min(d_cols, s_cols));
  }
  CopyWindow(out, d_cols, in, s_cols, rows, cols, f);
}

template <typename TD, typename TS>
constexpr bool kTransposes = ((TS::kLayout == kNZ && TD::kLayout == kZN) || (TS::kLayout == kZN && TD::kLayout == kNZ)) &&
                             TS::kRows == TD::kCols && TS::kCols == TD::kRows && TS::kRows != TS::kCols;
// NZ <-> ZN tiles where only the transposed destination fits the source: an offset move extracts
// the transposed window (ir::MoveForm::kExtractTransposed).
template <typename TD, typename TS>
constexpr bool kExtractsTransposed =
    ((TS::kLayout == kNZ && TD::kLayout == kZN) || (TS::kLayout == kZN && TD::kLayout == kNZ)) &&
    !(TD::kRows <= TS::kRows && TD::kCols <= TS::kCols) && TD::kRows <= TS::kCols && TD::kCols <= TS::kRows;
// A source that fits inside a different destination (into L1 between NZ and ZN: transposed): move(...,
// offset) inserts it there.
template <typename TD, typename TS>
constexpr int kInsertRows = kInsertTransposes<TD, TS> ? TS::kCols : TS::kRows;
template <typename TD, typename TS>
constexpr int kInsertCols = kInsertTransposes<TD, TS> ? TS::kRows : TS::kCols;
template <typename TD, typename TS>
constexpr bool kFitsInside = kInsertRows<TD, TS> <= TD::kRows && kInsertCols<TD, TS> <= TD::kCols &&
                             !(kInsertRows<TD, TS> == TD::kRows && kInsertCols<TD, TS> == TD::kCols);

}  // namespace detail

// Copies the source's valid window to the top-left of the destination (whose own valid window is
// left as it is), converting on Acc -> Vec (the fixpipe: relu_pre_mode, scale, then the dtype) and
// fp16/bf16 to fp32 on Mat -> Bias; between NZ and ZN tiles of swapped shapes it transposes. A
// window that does not fit the destination is a kernel fault.
// In a mixed kernel the data paths that cross cores land in the destination core's memory, as on
// a5: Acc -> Vec is the AIC's fixpipe writing the UB of AIV 0 (acc_to_vec_mode SingleModeVec0, the
// default) or AIV 1 (SingleModeVec1), or splitting the window's rows (DualModeSplitM) or columns
// (DualModeSplitN) between both; Vec -> Mat is an AIV's MTE3 writing the AIC's L1.
template <typename TD, typename TS>
inline void move(CoreCtx& ctx, int line, int acc_to_vec_mode, int relu_pre_mode, int64_t scale, TD& dst,
                 const TS& src) {
  const Fixpipe f = MakeFixpipe(relu_pre_mode, scale);
  const int32_t rows = src.valid_rows, cols = src.valid_cols;
  if (__builtin_expect(rows < 0 || cols < 0 || rows > TS::kRows || cols > TS::kCols, 0)) {
    detail::MoveWindowFault(ctx, line, "move", rows, cols, TS::kRows, TS::kCols);
  }
  if constexpr (TS::kMem == kAcc && TD::kMem == kVec) {
    if (acc_to_vec_mode == kDualModeSplitM || acc_to_vec_mode == kDualModeSplitN) {
      detail::MoveSplit(ctx, line, acc_to_vec_mode, dst, src, rows, cols, f);
      return;
    }
  }
  if constexpr (TS::kMem == kVec && TD::kMem == kMat) {  // UB -> L1: an insert at [0, 0]
    detail::Insert(ctx, line, "move", dst, src, Idx<2>{{0, 0}});
    return;
  }
  typename TD::Elem* out = detail::MoveTarget<TD, TS>(ctx, acc_to_vec_mode, dst);
  constexpr bool kTransposes = detail::kTransposes<TD, TS>;
  detail::MoveWindowOf<kTransposes>(ctx, line, out, TD::kRows, TD::kCols, src.data, TS::kRows, TS::kCols, rows, cols,
                                    kTransposes, f);
}

// move(dst, src, offset): a source that fits inside the destination is inserted at `offset` (unless
// a fixpipe option is given); otherwise the destination's valid window is extracted from the source
// at `offset`, which must lie inside the source's valid window.
template <typename TD, typename TS>
inline void move_offset(CoreCtx& ctx, int line, int acc_to_vec_mode, int relu_pre_mode, int64_t scale, TD& dst,
                        const TS& src, Idx<2> off) {
  const bool fixpipe_option = acc_to_vec_mode >= 0 || relu_pre_mode == 1 || scale >= 0;
  if constexpr (detail::kFitsInside<TD, TS>) {
    if (!fixpipe_option) {
      detail::Insert(ctx, line, "move", dst, src, off);
      return;
    }
  }
  // The window read from the source: the destination's, transposed between NZ and ZN tiles.
  constexpr bool kTransposed = detail::kExtractsTransposed<TD, TS>;
  const int32_t rows = kTransposed ? dst.valid_cols : dst.valid_rows;
  const int32_t cols = kTransposed ? dst.valid_rows : dst.valid_cols;
  const bool fits = dst.valid_rows >= 0 && dst.valid_cols >= 0 && dst.valid_rows <= TD::kRows &&
                    dst.valid_cols <= TD::kCols && off.v[0] >= 0 && off.v[1] >= 0 && src.valid_rows <= TS::kRows &&
                    src.valid_cols <= TS::kCols && off.v[0] + rows <= src.valid_rows &&
                    off.v[1] + cols <= src.valid_cols;
  if (__builtin_expect(!fits, 0)) {
    detail::MoveWindowFault(ctx, line, "move", rows, cols, src.valid_rows, src.valid_cols, off.v[0], off.v[1]);
  }
  typename TD::Elem* out = detail::MoveTarget<TD, TS>(ctx, acc_to_vec_mode, dst);
  const typename TS::Elem* in = src.data + off.v[0] * TS::kCols + off.v[1];
  if constexpr (kTransposed) {
    detail::TransposeWindow(out, TD::kCols, in, TS::kCols, rows, cols, MakeFixpipe(relu_pre_mode, scale));
  } else {
    detail::CopyWindow(out, TD::kCols, in, TS::kCols, rows, cols, MakeFixpipe(relu_pre_mode, scale));
  }
}

// move(vec, acc, scale=<run-time scalar>): an fp32 factor, or an integer carrying its bits.
template <typename TD, typename TS, typename S>
inline void move_scaled(CoreCtx& ctx, int line, int acc_to_vec_mode, int relu_pre_mode, TD& dst, const TS& src,
                        S scale) {
  move(ctx, line, acc_to_vec_mode, relu_pre_mode, detail::ScaleBits(scale), dst, src);
}

// move(vec, acc, scale=<Scaling tile>): column c times the fp32 factor in the low 32 bits of the
// tile's element c (the rest must be 0), into the UB of the AIV acc_to_vec_mode names.
template <typename TD, typename TS, typename TF>
inline void move_fp(CoreCtx& ctx, int line, int acc_to_vec_mode, int /*relu_pre_mode: excluded*/, TD& dst,
                    const TS& src, const TF& scaling) {
  static_assert(TS::kMem == kAcc && TD::kMem == kVec, "a per-channel scale goes from Acc to Vec");
  const int32_t rows = src.valid_rows, cols = src.valid_cols;
  if (__builtin_expect(rows < 0 || cols < 0 || rows > TS::kRows || cols > TS::kCols || rows > TD::kRows ||
                           cols > TD::kCols, 0)) {
    detail::MoveWindowFault(ctx, line, "move", rows, cols, Min(TD::kRows, TS::kRows), Min(TD::kCols, TS::kCols));
  }
  float factors[TF::kCols];
  detail::PerChannelFactors(ctx, line, "move", scaling, cols, factors);
  typename TD::Elem* out = detail::MoveTarget<TD, TS>(ctx, acc_to_vec_mode, dst);
  for (int32_t r = 0; r < rows; ++r) {
    for (int32_t c = 0; c < cols; ++c) {
      out[int64_t(r) * TD::kCols + c] =
          detail::FixpipeElem<typename TD::Elem>(src.data[int64_t(r) * TS::kCols + c], Fixpipe{false, true, factors[c]});
    }
  }
}

// pl.insert(dst, src, offset): Vec -> Mat on MTE3, the source's valid window at `offset` of `dst`.
template <typename TD, typename TS>
inline void insert(CoreCtx& ctx, int line, TD& dst, const TS& src, Idx<2> off) {
  static_assert(TS::kMem == kVec && TD::kMem == kMat, "insert goes from Vec to Mat");
  detail::Insert(ctx, line, "insert", dst, src, off);
}

}  // namespace pto
