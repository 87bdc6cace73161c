// Device routines compiled once per compiler, CPU, flags and device headers into
// libpto_routines.so (docs/jit.md#precompiled-device-headers-and-routines), next to the precompiled
// headers: kernels built with PTO_EXTERN_ROUTINES call these instead of compiling them themselves
// (the GEMM, the GM <-> tile transfers, the copies of moves between tiles, the binary and unary vector
// ops, row and column broadcasts, row reductions). Compiled with the
// kernels' own flags from the same source, so the code is the same.
#include "pypto_pro/device.h"
#include "pypto_pro/tier0_exec.h"

#define PTO_ROUTINE extern "C" __attribute__((visibility("default")))

namespace g = pto::gemm;

PTO_ROUTINE void pto_gemm_f16(int m, int n, int k, const pto::half* a, int64_t lda, const pto::half* b, int64_t ldb,
                              float* c, int64_t ldc, const float* init, int64_t init_row_stride) {
  g::GemmBody(m, n, k, a, lda, b, ldb, c, ldc, g::Init<float>{init, init_row_stride});
}

PTO_ROUTINE void pto_gemm_bf16(int m, int n, int k, const pto::bfloat16* a, int64_t lda, const pto::bfloat16* b,
                               int64_t ldb, float* c, int64_t ldc, const float* init, int64_t init_row_stride) {
  g::GemmBody(m, n, k, a, lda, b, ldb, c, ldc, g::Init<float>{init, init_row_stride});
}

PTO_ROUTINE void pto_gemm_f32(int m, int n, int k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                              int64_t ldc, const float* init, int64_t init_row_stride) {
  g::GemmBody(m, n, k, a, lda, b, ldb, c, ldc, g::Init<float>{init, init_row_stride});
}

PTO_ROUTINE void pto_gemm_i8(int m, int n, int k, const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb,
                             int32_t* c, int64_t ldc, const int32_t* init, int64_t init_row_stride) {
  g::GemmBody(m, n, k, a, lda, b, ldb, c, ldc, g::Init<int32_t>{init, init_row_stride});
}

namespace pto::detail {

template <typename T, int N>
void LoadRoutine(CoreCtx& ctx, int line, const char* op, int order, bool tile_units, const TileRef<T>& dst,
                 const GmTensor<T, N>& src, Idx<N> index) {
  LoadBody(ctx, line, op, order, tile_units, dst, src, index);
}

template <typename T, int N>
void StoreRoutine(CoreCtx& ctx, int line, const char* op, int relu_pre_mode, int64_t scale, int order, int atomic,
                  int phase, bool tile_units, bool cached, const GmTensor<T, N>& dst, const TileRef<T>& src,
                  Idx<N> index) {
  StoreBody(ctx, line, op, relu_pre_mode, scale, order, atomic, phase, tile_units, cached, dst, src, index);
}

template <typename T>
void CopyWindowRoutine(T* out, int64_t out_stride, const T* in, int64_t in_stride, int32_t rows, int32_t cols,
                       const Fixpipe& f) {
  CopyWindowBody(out, out_stride, in, in_stride, rows, cols, f);
}

template <typename T>
void TransposeWindowRoutine(T* out, int64_t out_stride, const T* in, int64_t in_stride, int32_t rows, int32_t cols,
                            const Fixpipe& f) {
  TransposeWindowBody(out, out_stride, in, in_stride, rows, cols, f);
}

#define PTO_INSTANTIATE_MOVES_(T)                                                                           \
  template void CopyWindowRoutine<T>(T*, int64_t, const T*, int64_t, int32_t, int32_t, const Fixpipe&);    \
  template void TransposeWindowRoutine<T>(T*, int64_t, const T*, int64_t, int32_t, int32_t, const Fixpipe&);
PTO_ROUTINE_ELEMS(PTO_INSTANTIATE_MOVES_)

template <typename F, typename T>
void BinaryRoutine(CoreCtx& ctx, int line, T* d, const T* a, const T* b, int64_t tile_cols, int64_t rows,
                   int64_t cols) {
  BinaryBody<F>(ctx, line, d, a, b, tile_cols, rows, cols);
}

#define PTO_INSTANTIATE_BINARY_(F, T) \
  template void BinaryRoutine<F, T>(CoreCtx&, int, T*, const T*, const T*, int64_t, int64_t, int64_t);
#define PTO_INSTANTIATE_BINARIES_(T)                                                                    \
  PTO_INSTANTIATE_BINARY_(AddF, T) PTO_INSTANTIATE_BINARY_(SubF, T) PTO_INSTANTIATE_BINARY_(MulF, T)     \
  PTO_INSTANTIATE_BINARY_(DivF, T) PTO_INSTANTIATE_BINARY_(MaxF, T) PTO_INSTANTIATE_BINARY_(MinF, T)
PTO_ROUTINE_ELEMS(PTO_INSTANTIATE_BINARIES_)

template <typename F, typename T>
void UnaryRoutine(T* d, const T* s, int64_t tile_cols, int64_t rows, int64_t cols) {
  UnaryBody<F>(d, s, tile_cols, rows, cols);
}

template <typename F, typename T>
void RowExpandRoutine(CoreCtx& ctx, int line, T* d, int64_t d_cols, const T* s, int64_t s_cols, const T* c,
                      int64_t c_cols, int64_t rows, int64_t cols) {
  RowExpandBody<F>(ctx, line, d, d_cols, s, s_cols, c, c_cols, rows, cols);
}

template <typename F, typename T>
void ColExpandRoutine(CoreCtx& ctx, int line, T* d, int64_t d_cols, const T* s, int64_t s_cols, const T* row,
                      int64_t rows, int64_t cols) {
  ColExpandBody<F>(ctx, line, d, d_cols, s, s_cols, row, rows, cols);
}

template <typename Fold, typename T>
void RowReduceRoutine(T* out, int64_t out_cols, const T* src, int64_t src_cols, int64_t rows, int64_t cols) {
  RowReduceBody<Fold>(out, out_cols, src, src_cols, rows, cols);
}

template <typename F, typename T>
void ScalarRoutine(CoreCtx& ctx, int line, T* d, const T* a, int64_t tile_cols, int64_t rows, int64_t cols, T e) {
  ScalarBody<F>(ctx, line, d, a, tile_cols, rows, cols, e);
}

#define PTO_INSTANTIATE_UNARY_(F, T) template void UnaryRoutine<F, T>(T*, const T*, int64_t, int64_t, int64_t);
#define PTO_INSTANTIATE_SCALAR_(F, T) \
  template void ScalarRoutine<F, T>(CoreCtx&, int, T*, const T*, int64_t, int64_t, int64_t, T);
#define PTO_INSTANTIATE_EXPANDS_(F, T)                                                                          \
  template void RowExpandRoutine<F, T>(CoreCtx&, int, T*, int64_t, const T*, int64_t, const T*, int64_t, int64_t, \
                                       int64_t);                                                                \
  template void ColExpandRoutine<F, T>(CoreCtx&, int, T*, int64_t, const T*, int64_t, const T*, int64_t, int64_t);
#define PTO_INSTANTIATE_VECTOR_(T)                                                                           \
  PTO_INSTANTIATE_UNARY_(NegF, T) PTO_INSTANTIATE_UNARY_(AbsF, T) PTO_INSTANTIATE_UNARY_(ReluF, T)            \
  PTO_INSTANTIATE_SCALAR_(AddF, T) PTO_INSTANTIATE_SCALAR_(SubF, T) PTO_INSTANTIATE_SCALAR_(MulF, T)          \
  PTO_INSTANTIATE_SCALAR_(DivF, T) PTO_INSTANTIATE_SCALAR_(MaxF, T) PTO_INSTANTIATE_SCALAR_(MinF, T)          \
  PTO_INSTANTIATE_EXPANDS_(AddF, T) PTO_INSTANTIATE_EXPANDS_(SubF, T) PTO_INSTANTIATE_EXPANDS_(MulF, T)       \
  PTO_INSTANTIATE_EXPANDS_(DivF, T) PTO_INSTANTIATE_EXPANDS_(MaxF, T) PTO_INSTANTIATE_EXPANDS_(MinF, T)       \
  template void RowReduceRoutine<RowSumOf, T>(T*, int64_t, const T*, int64_t, int64_t, int64_t);              \
  template void RowReduceRoutine<RowExtremeOf<MaxF>, T>(T*, int64_t, const T*, int64_t, int64_t, int64_t);    \
  template void RowReduceRoutine<RowExtremeOf<MinF>, T>(T*, int64_t, const T*, int64_t, int64_t, int64_t);
PTO_ROUTINE_ELEMS(PTO_INSTANTIATE_VECTOR_)
// The math functions: float-like elements only (kUnaryRoutine).
#define PTO_INSTANTIATE_MATH_(T)                                                                          \
  PTO_INSTANTIATE_UNARY_(ExpF, T) PTO_INSTANTIATE_UNARY_(LogF, T) PTO_INSTANTIATE_UNARY_(SqrtF, T)         \
  PTO_INSTANTIATE_UNARY_(RsqrtF, T) PTO_INSTANTIATE_UNARY_(RecipF, T)
PTO_INSTANTIATE_MATH_(half)
PTO_INSTANTIATE_MATH_(bfloat16)
PTO_INSTANTIATE_MATH_(float)

// Every element type and rank a kernel's transfers may call with.
#define PTO_INSTANTIATE_(T, N)                                                                                   \
  template void LoadRoutine<T, N>(CoreCtx&, int, const char*, int, bool, const TileRef<T>&, const GmTensor<T, N>&, \
                                  Idx<N>);                                                                       \
  template void StoreRoutine<T, N>(CoreCtx&, int, const char*, int, int64_t, int, int, int, bool, bool,          \
                                   const GmTensor<T, N>&, const TileRef<T>&, Idx<N>);
#define PTO_INSTANTIATE_RANKS_(T) PTO_ROUTINE_RANKS(PTO_INSTANTIATE_, T)
PTO_ROUTINE_ELEMS(PTO_INSTANTIATE_RANKS_)

}  // namespace pto::detail

// The tier-0 executor's kernel entry (PtoKernelDesc::entry of a tier-0 launch; its arguments are a
// PtoT0Args).
PTO_ROUTINE void pto_tier0_entry(PtoCoreCtx* ctx, const void* raw_args) {
  const PtoT0Args* args = static_cast<const PtoT0Args*>(raw_args);
  pto::tier0::Run(*ctx, *args->program, args->slots);
}
