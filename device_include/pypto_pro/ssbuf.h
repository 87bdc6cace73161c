// pl.ssbuf_store / pl.ssbuf_load: a struct's fields, laid out as the C struct of their types, copied
// to / from the block's SuperScalar buffer (ctx.ssbuf, PTO_SSBUF_BYTES shared by the block's cores)
// at a byte offset. The offset must be 4-byte aligned and the struct must fit, or the op faults.
#pragma once

#include "pypto_pro/tile.h"

namespace pto {

namespace detail {

// The C struct of the fields' types: each at its own alignment, the size rounded up to the largest
// alignment and at least 4 (the SSBUF is copied in 32-bit words). The compiler refuses the same
// layouts (ir::SsbufLayoutOf) for constant offsets.
template <typename... F>
struct SsbufLayout {
  static constexpr int kCount = sizeof...(F);
  int64_t offsets[kCount > 0 ? kCount : 1] = {};
  int64_t bytes = 0;
  constexpr SsbufLayout() {
    const int64_t sizes[] = {int64_t(sizeof(F))...};
    int64_t align = 4;
    for (int i = 0; i < kCount; ++i) {
      bytes = (bytes + sizes[i] - 1) / sizes[i] * sizes[i];
      offsets[i] = bytes;
      bytes += sizes[i];
      align = sizes[i] > align ? sizes[i] : align;
    }
    bytes = (bytes + align - 1) / align * align;
  }
};

inline void CheckSsbufWindow(CoreCtx& ctx, int line, const char* op, const char* name, int64_t offset, int64_t bytes) {
  if (__builtin_expect(offset >= 0 && offset % 4 == 0 && offset + bytes <= PTO_SSBUF_BYTES, 1)) return;
  FaultText text;
  text << "struct '" << name << "' (" << bytes << " bytes) at byte offset " << offset;
  if (offset % 4 != 0) {
    text << " is not 4-byte aligned (the SSBUF is copied in 32-bit words)";
  } else {
    text << " does not fit the SSBUF of " << int64_t(PTO_SSBUF_BYTES) << " bytes";
  }
  Fault(ctx, line, op, text.text);
}

}  // namespace detail

template <typename Offset, typename... F>
inline void ssbuf_store(CoreCtx& ctx, int line, const char* name, Offset offset, F... fields) {
  constexpr detail::SsbufLayout<F...> layout;
  detail::CheckSsbufWindow(ctx, line, "ssbuf_store", name, int64_t(offset), layout.bytes);
  uint8_t* at = ctx.ssbuf + int64_t(offset);
  __builtin_memset(at, 0, size_t(layout.bytes));  // padding bytes are stored as 0
  int i = 0;
  ((__builtin_memcpy(at + layout.offsets[i++], &fields, sizeof(F))), ...);
}

template <typename Offset, typename... F>
inline void ssbuf_load(CoreCtx& ctx, int line, const char* name, Offset offset, F&... fields) {
  constexpr detail::SsbufLayout<F...> layout;
  detail::CheckSsbufWindow(ctx, line, "ssbuf_load", name, int64_t(offset), layout.bytes);
  const uint8_t* at = ctx.ssbuf + int64_t(offset);
  int i = 0;
  ((__builtin_memcpy(&fields, at + layout.offsets[i++], sizeof(F))), ...);
}

}  // namespace pto
