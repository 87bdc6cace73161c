// load / load_tile and store / store_tile of every element type and rank a kernel's transfers may
// call with.
#include "pypto_pro/routines/routines.h"

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

#define PTO_INSTANTIATE_(T, N)                                                                                   \
  template void LoadRoutine<T, N>(CoreCtx&, int, const char*, int, bool, const TileRef<T>&, const GmTensor<T, N>&, \
                                  Idx<N>);                                                                       \
  template void StoreRoutine<T, N>(CoreCtx&, int, const char*, int, int64_t, int, int, int, bool, bool,          \
                                   const GmTensor<T, N>&, const TileRef<T>&, Idx<N>);
#define PTO_INSTANTIATE_RANKS_(T) PTO_ROUTINE_RANKS(PTO_INSTANTIATE_, T)
PTO_ROUTINE_ELEMS(PTO_INSTANTIATE_RANKS_)

}  // namespace pto::detail
