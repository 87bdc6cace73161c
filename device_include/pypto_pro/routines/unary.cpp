// The unary vector ops, row and column broadcasts and row reductions of every element type (the math
// functions of the float-like ones).
#include "pypto_pro/routines/routines.h"

namespace pto::detail {

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

#define PTO_INSTANTIATE_UNARY_(F, T) template void UnaryRoutine<F, T>(T*, const T*, int64_t, int64_t, int64_t);
#define PTO_INSTANTIATE_EXPANDS_(F, T)                                                                          \
  template void RowExpandRoutine<F, T>(CoreCtx&, int, T*, int64_t, const T*, int64_t, const T*, int64_t, int64_t, \
                                       int64_t);                                                                \
  template void ColExpandRoutine<F, T>(CoreCtx&, int, T*, int64_t, const T*, int64_t, const T*, int64_t, int64_t);
#define PTO_INSTANTIATE_VECTOR_(T)                                                                           \
  PTO_INSTANTIATE_UNARY_(NegF, T) PTO_INSTANTIATE_UNARY_(AbsF, T) PTO_INSTANTIATE_UNARY_(ReluF, T)            \
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

}  // namespace pto::detail
