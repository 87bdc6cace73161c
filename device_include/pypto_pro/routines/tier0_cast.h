// The tier-0 executor's cast() (tier0_exec.h): every pair of element types it runs, in two parts
// of the library (tier0_cast_to_*.cpp): to float-like and to integer element types.
#pragma once
#define PTO_EXTERN_ROUTINES  // its tile ops call this library's routines, as a kernel compiled against it does
#include "pypto_pro/routines/routines.h"
#include "pypto_pro/tier0_exec.h"

namespace pto::tier0 {

// cast() of the instruction `in` to a float-like destination (kToFloat) or an integer one.
template <bool kToFloat>
void RunCast(CoreCtx& ctx, const PtoT0Program& p, const PtoT0Insn& in, const Frame& f) {
  const PtoT0Slot &d = p.slots[f.t[in.a]], &sd = p.slots[f.t[in.b]];
  const SlotState &dst = f.s[f.t[in.a]], &src = f.s[f.t[in.b]];
  ByCastElem(d.elem, [&]<typename TD>() {
    if constexpr (kIsFloatLike<TD> == kToFloat) {
      ByCastElem(sd.elem, [&]<typename TS>() {
        TD* out = reinterpret_cast<TD*>(dst.data);
        const TS* in_data = reinterpret_cast<const TS*>(src.data);
        if constexpr (!kIsFloatLike<TD> && !kIsFloatLike<TS>) {
          // Integer to integer ignores the round mode (CastRun): one instantiation, not seven
          // (the routines library's compile time).
          detail::ForWindowOf(d.cols, dst.valid_rows, dst.valid_cols, [&](int64_t off, int64_t n) {
            detail::CastRun<RoundMode::CAST_NONE>(out + off, in_data + off, n);
          });
        } else {
          detail::CastBody(ctx, in.line, RoundMode(in.e), out, in_data, d.cols, dst.valid_rows, dst.valid_cols);
        }
      });
    } else {
      Fault(ctx, in.line, "cast", "tier-0 cast run by the wrong part of the executor (a pypto_pro bug)");
    }
  });
}

}  // namespace pto::tier0
