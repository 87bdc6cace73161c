// The tier-0 executor's cast() and the fused *_cast forms (tier0_exec.h): every pair of element types
// it runs, in two parts of the library (tier0_cast_to_*.cpp): to float-like and to integer element types.
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

// add_relu_cast() / sub_relu_cast() / mul_cast() (StepThenCast) of the instruction `in`: over each run
// of out's window, the step into lhs, then that run converted (the conversions RunCast instantiates).
template <bool kToFloat>
void RunStepCast(CoreCtx& ctx, const PtoT0Program& p, const PtoT0Insn& in, const Frame& f) {
  const PtoT0Slot &d = p.slots[f.t[in.a]], &ld = p.slots[f.t[in.b]];
  const SlotState &dst = f.s[f.t[in.a]], &lhs = f.s[f.t[in.b]], &rhs = f.s[f.t[in.c]];
  ByCastElem(d.elem, [&]<typename TD>() {
    if constexpr (kIsFloatLike<TD> == kToFloat) {
      ByCastElem(ld.elem, [&]<typename TA>() {
        TD* out = reinterpret_cast<TD*>(dst.data);
        TA* l = reinterpret_cast<TA*>(lhs.data);
        const TA* rr = reinterpret_cast<const TA*>(rhs.data);
        const RoundMode mode = detail::StepCastMode<TD, TA>(RoundMode(in.e));
        auto run = [&](auto step) {
          detail::ForWindowOf(d.cols, dst.valid_rows, dst.valid_cols, [&](int64_t off, int64_t n) {
            detail::MapLanes(l + off, n, step, l + off, rr + off);
            if constexpr (!kIsFloatLike<TD> && !kIsFloatLike<TA>) {
              detail::CastRun<RoundMode::CAST_NONE>(out + off, l + off, n);  // integers ignore the mode (RunCast)
            } else {
              detail::CastBody(ctx, in.line, mode, out + off, l + off, n, 1, n);
            }
          });
        };
        if (in.d == 2) {
          run(detail::WrapMulF<TA>{});
        } else if constexpr (kIsFloatLike<TA>) {  // (the compiler admits fp16 / fp32 lhs for the relu forms)
          if (in.d == 0) run(detail::AddReluStep<TA>{});
          else run(detail::SubReluStep<TA>{});
        }
      });
    } else {
      Fault(ctx, in.line, "cast", "tier-0 cast run by the wrong part of the executor (a pypto_pro bug)");
    }
  });
}

}  // namespace pto::tier0
