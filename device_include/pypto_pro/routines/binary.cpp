// The copies of moves between tiles, and the binary and tile-scalar vector ops, of every element type.
#include "pypto_pro/routines/routines.h"

namespace pto::detail {

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

template <typename F, typename T>
void ScalarRoutine(CoreCtx& ctx, int line, T* d, const T* a, int64_t tile_cols, int64_t rows, int64_t cols, T e) {
  ScalarBody<F>(ctx, line, d, a, tile_cols, rows, cols, e);
}

#define PTO_INSTANTIATE_BINARY_(F, T) \
  template void BinaryRoutine<F, T>(CoreCtx&, int, T*, const T*, const T*, int64_t, int64_t, int64_t);
#define PTO_INSTANTIATE_SCALAR_(F, T) \
  template void ScalarRoutine<F, T>(CoreCtx&, int, T*, const T*, int64_t, int64_t, int64_t, T);
#define PTO_INSTANTIATE_BINARIES_(T)                                                                    \
  PTO_INSTANTIATE_BINARY_(AddF, T) PTO_INSTANTIATE_BINARY_(SubF, T) PTO_INSTANTIATE_BINARY_(MulF, T)     \
  PTO_INSTANTIATE_BINARY_(DivF, T) PTO_INSTANTIATE_BINARY_(MaxF, T) PTO_INSTANTIATE_BINARY_(MinF, T)     \
  PTO_INSTANTIATE_SCALAR_(AddF, T) PTO_INSTANTIATE_SCALAR_(SubF, T) PTO_INSTANTIATE_SCALAR_(MulF, T)     \
  PTO_INSTANTIATE_SCALAR_(DivF, T) PTO_INSTANTIATE_SCALAR_(MaxF, T) PTO_INSTANTIATE_SCALAR_(MinF, T)
PTO_ROUTINE_ELEMS(PTO_INSTANTIATE_BINARIES_)

}  // namespace pto::detail
