// The special registers of a core (docs/language.md#vector-mask-and-special-registers): the vector
// mask, CTRL and AR, kept in PtoCoreCtx and reset when a block starts (PtoResetRegisters). No built op
// reads them: the tile ops set the mask they need themselves, and the mask, the saturation bits of CTRL
// and AR belong to the vector-function ops (pl.Vf, planned), which will read and write them here.
#pragma once

#include "pypto_pro/tile.h"

namespace pto {

// ---- the vector mask ----

// Both halves are 64-bit patterns: a narrower signed run-time value is sign-extended (-1 is all ones).
template <typename H, typename L>
inline void set_vec_mask(CoreCtx& ctx, int, H mask_high, L mask_low) {
  ctx.vec_mask[1] = uint64_t(int64_t(mask_high));
  ctx.vec_mask[0] = uint64_t(int64_t(mask_low));
}
inline void set_mask_count(CoreCtx& ctx, int) { ctx.mask_count = 1; }
inline void set_mask_norm(CoreCtx& ctx, int) { ctx.mask_count = 0; }
inline void reset_mask(CoreCtx& ctx, int) { ctx.vec_mask[0] = ctx.vec_mask[1] = ~uint64_t(0); }

// ---- CTRL ----

constexpr uint64_t CtrlFieldMask(int first, int last) {
  return (last - first >= 63 ? ~uint64_t(0) : (uint64_t(1) << (last - first + 1)) - 1) << first;
}

// A write that leaves an encoding the hardware does not define (the device faults on it) faults here.
inline void CheckCtrlDefined(CoreCtx& ctx, int line, uint64_t ctrl) {
#define PTO_CTRL_UNDEFINED_CHECK_(first, last, value)                                                      \
  if (((ctrl & CtrlFieldMask(first, last)) >> (first)) == uint64_t(value)) {                               \
    FaultText text;                                                                                        \
    text << "the write leaves CTRL bits " << (first) << ".." << (last) << " = " << (value)                 \
         << ", an atomic encoding the hardware does not define (the NPU faults on it)";                    \
    Fault(ctx, line, "set_ctrl_spr", text.text);                                                           \
  }
  PTO_HW_CTRL_UNDEFINED(PTO_CTRL_UNDEFINED_CHECK_)
#undef PTO_CTRL_UNDEFINED_CHECK_
}

// CTRL[end:start] = value. The bit range is compile-time and checked there (a writable field); the
// value must fit it, a run-time one is checked here.
template <typename V>
inline void set_ctrl_spr(CoreCtx& ctx, int line, int start, int end, V value) {
  const int width = end - start + 1;
  const uint64_t max = width >= 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
  bool fits = uint64_t(value) <= max;
  if constexpr (V(-1) < V(0)) fits = fits && value >= V(0);
  if (__builtin_expect(!fits, 0)) {
    FaultText text;
    text << "value " << value << " does not fit CTRL ";
    if (start == end) text << "bit " << start;
    else text << "bits " << start << ".." << end;
    text << ", a " << width << "-bit field (0.." << max << ")";
    Fault(ctx, line, "set_ctrl_spr", text.text);
  }
  const uint64_t next = (ctx.ctrl & ~CtrlFieldMask(start, end)) | (uint64_t(value) << start);
  CheckCtrlDefined(ctx, line, next);
  ctx.ctrl = next;
}

inline void reset_ctrl_spr(CoreCtx& ctx, int, int start, int end) {
  const uint64_t field = CtrlFieldMask(start, end);
  ctx.ctrl = (ctx.ctrl & ~field) | (PTO_HW_CTRL_DEFAULT & field);
}

inline int64_t get_ctrl_spr(CoreCtx& ctx, int start, int end) {
  return int64_t((ctx.ctrl & CtrlFieldMask(start, end)) >> start);
}

// `mode` indexes pypto_pro::hw::kSaturationFlags (pl.SaturationFlagMode).
inline void set_saturation_flag(CoreCtx& ctx, int, int mode, int enable) {
  const pypto_pro::hw::SaturationFlagRow& flag = pypto_pro::hw::kSaturationFlags[mode];
  const uint64_t bit = uint64_t(flag.inverted ? !enable : enable != 0);
  ctx.ctrl = (ctx.ctrl & ~(uint64_t(1) << flag.bit)) | (bit << flag.bit);
}

inline bool get_saturation_flag(CoreCtx& ctx, int mode) {
  const pypto_pro::hw::SaturationFlagRow& flag = pypto_pro::hw::kSaturationFlags[mode];
  const bool bit = (ctx.ctrl >> flag.bit) & 1;
  return flag.inverted ? !bit : bit;
}

// ---- AR ----

// The byte count pl.Vf.squeeze leaves (planned): 0 until something writes it.
inline int64_t get_spr(CoreCtx& ctx) { return ctx.ar; }

}  // namespace pto
