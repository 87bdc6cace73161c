// The tier-0 executor's expands(), column reductions, argmax / argmin, the three-operand fused ops,
// axpy(), the partial ops, fillpad(), transpose() and bitwise ops (tier0_exec.h).
#define PTO_EXTERN_ROUTINES  // its tile ops call this library's routines, as a kernel compiled against it does
#include "pypto_pro/routines/routines.h"
#include "pypto_pro/tier0_exec.h"

namespace pto::tier0 {

void RunTileOp(CoreCtx& ctx, const PtoT0Program& p, const PtoT0Insn& in, const Frame& f) {
  [[maybe_unused]] const int64_t* r = f.r;
  const int32_t* t = f.t;
  const SlotState* s = f.s;
  switch (in.code) {
    case PTO_T0_EXPANDS: {  // expands(): the scalar as the element type (AsElem) over the window
      const PtoT0Slot& d = p.slots[t[in.a]];
      const SlotState& sd = s[t[in.a]];
      ByElem(d.elem, [&]<typename T>() {
        const T e = WithScalar(r[in.c], in.d, [](auto v) { return detail::AsElem<T>(v); });
        detail::ExpandsBody(reinterpret_cast<T*>(sd.data), d.cols, sd.valid_rows, sd.valid_cols, e);
      });
      break;
    }
    case PTO_T0_COLREDUCE: {  // col_sum() / col_max() / col_min(): ColumnReduce
      const PtoT0Slot& sd = p.slots[t[in.b]];
      const SlotState &out = s[t[in.a]], &src = s[t[in.b]];
      ByElem(sd.elem, [&]<typename T>() {
        T* o = reinterpret_cast<T*>(out.data);
        const T* x = reinterpret_cast<const T*>(src.data);
        if (in.e == 0) detail::ColumnReduceBody<detail::AddF>(o, x, sd.cols, src.valid_rows, src.valid_cols);
        else if (in.e == 1) detail::ColumnReduceBody<detail::MaxF>(o, x, sd.cols, src.valid_rows, src.valid_cols);
        else detail::ColumnReduceBody<detail::MinF>(o, x, sd.cols, src.valid_rows, src.valid_cols);
      });
      break;
    }
    case PTO_T0_TERNARY: {  // addc() / mul_add_dst() / fused_mul_add() / fused_mul_add_relu(): their functions
      const PtoT0Slot& d = p.slots[t[in.a]];
      const SlotState &sd = s[t[in.a]], &x = s[t[in.b]], &y = s[t[in.c]], &z = s[t[in.f]];
      ByElem(d.elem, [&]<typename T>() {
        auto run = [&](auto f) {  // MapWindow: every operand by the destination's columns and window
          detail::ForWindowOf(d.cols, sd.valid_rows, sd.valid_cols, [&](int64_t off, int64_t n) {
            detail::Map(reinterpret_cast<T*>(sd.data) + off, n, f, reinterpret_cast<const T*>(x.data) + off,
                        reinterpret_cast<const T*>(y.data) + off, reinterpret_cast<const T*>(z.data) + off);
          });
        };
        if (in.e == 0) run(detail::AddcOf<T>{});
        else if (in.e == 1) run(detail::MulAddOf<T>{});
        else run(detail::MulAddReluOf<T>{});
      });
      break;
    }
    case PTO_T0_FILLINDEX: {  // fill_index(): its body
      const PtoT0Slot& d = p.slots[t[in.a]];
      const SlotState& sd = s[t[in.a]];
      ByElem(d.elem, [&]<typename T>() {
        if constexpr (!kIsFloatLike<T>) {  // (the compiler admits the integer types fill_index takes)
          const int64_t cols = sd.valid_cols < d.cols ? sd.valid_cols : d.cols;
          WithScalar(r[in.c], in.d, [&](auto v) {
            detail::FillIndexBody(reinterpret_cast<T*>(sd.data), cols, v);
            return 0;
          });
        }
      });
      break;
    }
    case PTO_T0_ARGREDUCE: {  // argmax() / argmin() / col_argmax() / col_argmin(): their bodies
      const PtoT0Slot &d = p.slots[t[in.a]], &sd = p.slots[t[in.b]];
      const SlotState &out = s[t[in.a]], &src = s[t[in.b]];
      ByElem(sd.elem, [&]<typename T>() {
        auto body = [&]<typename I>() {
          I* o = reinterpret_cast<I*>(out.data);
          const T* x = reinterpret_cast<const T*>(src.data);
          auto by = [&](auto better) {
            if (in.c == 0) detail::RowArgExtremeBody(o, d.cols, x, sd.cols, src.valid_rows, src.valid_cols, better);
            else detail::ColArgExtremeBody(o, x, sd.cols, src.valid_rows, src.valid_cols, better);
          };
          if (in.e == 0) by(detail::Greater{});
          else by(detail::Less{});
        };
        if (d.elem == PTO_T0_U32) body.template operator()<uint32_t>();
        else body.template operator()<int32_t>();
      });
      break;
    }
    case PTO_T0_TRANSPOSE: {  // transpose()
      const PtoT0Slot &d = p.slots[t[in.a]], &sd = p.slots[t[in.b]];
      const SlotState &dst = s[t[in.a]], &src = s[t[in.b]];
      ByElem(d.elem, [&]<typename T>() {
        detail::TransposeBody(ctx, in.line, reinterpret_cast<T*>(dst.data), d.cols,
                              reinterpret_cast<const T*>(src.data), sd.cols, src.valid_rows, src.valid_cols);
      });
      break;
    }
    case PTO_T0_BITWISE: {  // and_() / or_() / not_() / xor() / shl() / shr()
      const PtoT0Slot& d = p.slots[t[in.a]];
      const SlotState &sd = s[t[in.a]], &sa = s[t[in.b]];
      ByIntElem(d.elem, [&]<typename T>() {
        T* o = reinterpret_cast<T*>(sd.data);
        const T* a = reinterpret_cast<const T*>(sa.data);
        const T* b = in.e == 2 ? nullptr : reinterpret_cast<const T*>(s[t[in.c]].data);
        const int64_t rows = sd.valid_rows, cols = sd.valid_cols;
        switch (in.e) {
          case 0: detail::MapIntWindowOf(o, d.cols, rows, cols, detail::AndF{}, a, b); break;
          case 1: detail::MapIntWindowOf(o, d.cols, rows, cols, detail::OrF{}, a, b); break;
          case 2: detail::MapIntWindowOf(o, d.cols, rows, cols, detail::NotF{}, a); break;
          case 3:
            detail::XorBody(ctx, in.line, o, a, b, reinterpret_cast<const T*>(s[t[in.f]].data), d.cols,
                            p.slots[t[in.f]].cols, rows, cols);
            break;
          case 4: detail::ShiftBody<true>(ctx, in.line, o, a, b, p.slots[t[in.c]].rows, d.cols, rows, cols); break;
          default: detail::ShiftBody<false>(ctx, in.line, o, a, b, p.slots[t[in.c]].rows, d.cols, rows, cols); break;
        }
      });
      break;
    }
    case PTO_T0_BITWISES: {  // ands() / ors()
      const PtoT0Slot& d = p.slots[t[in.a]];
      const SlotState &sd = s[t[in.a]], &sa = s[t[in.b]];
      ByIntElem(d.elem, [&]<typename T>() {
        const T v = WithScalar(r[in.c], in.d, [](auto x) { return T(x); });
        T* o = reinterpret_cast<T*>(sd.data);
        const T* a = reinterpret_cast<const T*>(sa.data);
        if (in.e == 0) detail::BitwiseScalarOf<detail::AndF>(o, a, d.cols, sd.valid_rows, sd.valid_cols, v);
        else detail::BitwiseScalarOf<detail::OrF>(o, a, d.cols, sd.valid_rows, sd.valid_cols, v);
      });
      break;
    }
    case PTO_T0_AXPY: {  // axpy(): AxpyOf over the destination's window, alpha as the source's type
      const PtoT0Slot& d = p.slots[t[in.a]];
      const SlotState &sd = s[t[in.a]], &src = s[t[in.b]];
      auto run = [&]<typename TD, typename TS>() {
        const auto alpha = WithScalar(r[in.c], in.d, [](auto v) { return detail::ScalarAs<TS>(v); });
        detail::ForWindowOf(d.cols, sd.valid_rows, sd.valid_cols, [&](int64_t off, int64_t n) {
          detail::Map(reinterpret_cast<TD*>(sd.data) + off, n, detail::AxpyOf<TD, decltype(alpha)>{alpha},
                      reinterpret_cast<const TS*>(src.data) + off, reinterpret_cast<const TD*>(sd.data) + off);
        });
      };
      // the compiler admits fp16 and fp32 of one dtype, and fp16 into fp32
      if (d.elem == PTO_T0_F16) run.template operator()<half, half>();
      else if (p.slots[t[in.b]].elem == PTO_T0_F16) run.template operator()<float, half>();
      else run.template operator()<float, float>();
      break;
    }
    case PTO_T0_PART: {  // partadd() / partmax() / partmin() / partmul(): PartBody
      const PtoT0Slot& d = p.slots[t[in.a]];
      const SlotState &sd = s[t[in.a]], &x = s[t[in.b]], &y = s[t[in.c]];
      ByElem(d.elem, [&]<typename T>() {
        auto run = [&]<typename F>(const char* op) {
          detail::PartBody<F>(ctx, in.line, op, reinterpret_cast<T*>(sd.data), d.cols, sd.valid_rows, sd.valid_cols,
                              reinterpret_cast<const T*>(x.data), x.valid_rows, x.valid_cols,
                              reinterpret_cast<const T*>(y.data), y.valid_rows, y.valid_cols);
        };
        if (in.e == 0) run.template operator()<detail::WrapAddF<T>>("partadd");
        else if (in.e == 1) run.template operator()<detail::MaxF>("partmax");
        else if (in.e == 2) run.template operator()<detail::MinF>("partmin");
        else if constexpr (sizeof(T) < 8) run.template operator()<detail::WrapMulF<T>>("partmul");
      });
      break;
    }
    case PTO_T0_FILLPAD: {  // fillpad(): FillpadBody
      const PtoT0Slot &d = p.slots[t[in.a]], &sd = p.slots[t[in.b]];
      const SlotState &out = s[t[in.a]], &src = s[t[in.b]];
      ByElem(d.elem, [&]<typename T>() {
        detail::FillpadBody(ctx, in.line, in.e, reinterpret_cast<T*>(out.data), d.rows, d.cols, d.pad,
                            reinterpret_cast<const T*>(src.data), sd.rows, sd.cols, src.valid_rows, src.valid_cols);
      });
      break;
    }
    default: Fault(ctx, in.line, "tier-0", "unknown tier-0 instruction (a pypto_pro bug)");
  }
}

}  // namespace pto::tier0
