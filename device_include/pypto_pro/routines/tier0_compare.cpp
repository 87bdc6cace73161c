// The tier-0 executor's comparisons and selects (tier0_exec.h).
#define PTO_EXTERN_ROUTINES  // its tile ops call this library's routines, as a kernel compiled against it does
#include "pypto_pro/routines/routines.h"
#include "pypto_pro/tier0_exec.h"

namespace pto::tier0 {

void RunCompareSelect(CoreCtx& ctx, const PtoT0Program& p, const PtoT0Insn& in, const Frame& f) {
  [[maybe_unused]] const int64_t* r = f.r;
  const int32_t* t = f.t;
  const SlotState* s = f.s;
  switch (in.code) {
    case PTO_T0_COMPARE:
    case PTO_T0_COMPARES: {  // eq() ... ge() and their _scalar forms: Compare
      const PtoT0Slot &m = p.slots[t[in.a]], &sa = p.slots[t[in.b]];
      const SlotState &mask = s[t[in.a]], &lhs = s[t[in.b]];
      ByElem(sa.elem, [&]<typename T>() {
        ByCompare(in.e, [&]<typename F>() {
          uint8_t* out = reinterpret_cast<uint8_t*>(mask.data);
          const T* a = reinterpret_cast<const T*>(lhs.data);
          if (in.code == PTO_T0_COMPARE) {
            const T* b = reinterpret_cast<const T*>(s[t[in.c]].data);
            detail::CompareBody<F>(out, m.cols, a, sa.cols, mask.valid_rows, mask.valid_cols,
                                   [&](int64_t i) { return detail::Exact(b[i]); });
          } else {
            const auto v = WithScalar(r[in.c], in.d, [](auto x) { return detail::Exact(detail::AsElem<T>(x)); });
            detail::CompareBody<F>(out, m.cols, a, sa.cols, mask.valid_rows, mask.valid_cols,
                                   [&](int64_t) { return v; });
          }
        });
      });
      break;
    }
    case PTO_T0_VSELECT:
    case PTO_T0_VSELECTS: {  // select() / select_scalar(): Select
      const PtoT0Slot &d = p.slots[t[in.a]], &m = p.slots[t[in.b]];
      const SlotState &dst = s[t[in.a]], &mask = s[t[in.b]], &lhs = s[t[in.c]];
      ByElem(d.elem, [&]<typename T>() {
        T* o = reinterpret_cast<T*>(dst.data);
        const uint8_t* bits = reinterpret_cast<const uint8_t*>(mask.data);
        const T* a = reinterpret_cast<const T*>(lhs.data);
        if (in.code == PTO_T0_VSELECT) {
          const T* b = reinterpret_cast<const T*>(s[t[in.f]].data);
          detail::SelectBody(o, d.cols, bits, m.cols, a, dst.valid_rows, dst.valid_cols,
                             [&](int64_t i) { return b[i]; });
        } else {
          const T v = WithScalar(r[in.d], in.e, [](auto x) { return detail::AsElem<T>(x); });
          detail::SelectBody(o, d.cols, bits, m.cols, a, dst.valid_rows, dst.valid_cols, [&](int64_t) { return v; });
        }
      });
      break;
    }
    default: Fault(ctx, in.line, "tier-0", "unknown tier-0 instruction (a pypto_pro bug)");
  }
}

}  // namespace pto::tier0
