// The fixpipe: how an accumulator leaves L0C (pl.store / store_tile from Acc to GM, pl.move from Acc
// to Vec). Its stages, in order: ReLU (relu_pre_mode=NormalRelu), the per-tensor scale (scale=),
// then the conversion to the destination dtype: fp16/bf16 round to nearest even, int8 rounds to
// nearest even and saturates to [-128, 127] (NaN becomes 0). Without ReLU or scale the plain
// conversion runs, 16 lanes at a time. GM stores may add into the tensor atomically (atomic=).
#pragma once

#include "pypto_pro/abi.h"
#include "pypto_pro/numeric.h"

namespace pto {

// The unit-flag handshake of phase= (pl.AccPhase on matmul, pl.STPhase on stores from Acc; 0 not
// given, 1 Partial, 2 Final): a phase= matmul writes L0C once the flag is 0 and a Final one sets
// it to 1; a phase= store reads L0C once it is 1 and a Final one clears it. A core runs its ops in
// program order, so a wait the flag does not satisfy would wait forever on the NPU: a fault here.
enum : int { kPhaseNone = 0, kPhasePartial = 1, kPhaseFinal = 2 };

inline void UnitFlagWait(PtoCoreCtx& ctx, int line, const char* op, int phase, int32_t want) {
  if (phase == kPhaseNone || ctx.unit_flag == want) return;
  PtoFaultDetail d{};
  d.op = op;
  d.message = want == 0 ? "phase=: the cube waits for the unit flag to be cleared by a store with "
                          "phase=pl.STPhase.Final after the last Final matmul, and none came; this hangs on the NPU"
                        : "phase=: the fixpipe waits for the unit flag to be set by a matmul with "
                          "phase=pl.AccPhase.Final, and none came since the last Final store; this hangs on the NPU";
  ctx.api->fault(&ctx, line, &d);
  __builtin_unreachable();
}

inline void UnitFlagDone(PtoCoreCtx& ctx, int phase, int32_t value) {
  if (phase == kPhaseFinal) ctx.unit_flag = value;
}

struct Fixpipe {
  bool relu;
  bool scaled;
  float scale;
  bool Plain() const { return !relu && !scaled; }
};

// relu_pre_mode's index (0 NoRelu, 1 NormalRelu) and scale='s float32 bit pattern (-1: not given).
inline Fixpipe MakeFixpipe(int relu_pre_mode, int64_t scale_bits) {
  return Fixpipe{relu_pre_mode == 1, scale_bits >= 0, scale_bits >= 0 ? BitsFloat(uint32_t(scale_bits)) : 1.0f};
}

namespace detail {

// The element types accumulators have (what the fixpipe's stages read).
template <typename T>
constexpr bool kFixpipeSource = __is_same(T, float) || __is_same(T, int32_t);

inline int8_t SaturateInt8(float x) {
  if (!(x == x)) return 0;
  const float r = __builtin_rintf(x);  // the host's default rounding: to nearest even
  return int8_t(r < -128.0f ? -128.0f : (r > 127.0f ? 127.0f : r));
}

// One element through the fixpipe's stages.
template <typename TD, typename TS>
inline TD FixpipeElem(TS v, const Fixpipe& f) {
  if constexpr (__is_same(TS, int32_t) && __is_same(TD, int32_t)) {
    return f.relu && v < 0 ? 0 : v;  // integer accumulators stay exact without a scale
  } else {
    float x = __is_same(TS, int32_t) ? float(v) : ToFloat(v);
    if (f.relu && x < 0.0f) x = 0.0f;
    x *= f.scale;
    if constexpr (__is_same(TD, int8_t)) {
      return SaturateInt8(x);
    } else {
      return FromFloat<TD>(x);
    }
  }
}

template <typename T>
struct AtomicBits;
template <>
struct AtomicBits<float> {
  using U = uint32_t;
};
template <>
struct AtomicBits<half> {
  using U = uint16_t;
};
template <>
struct AtomicBits<bfloat16> {
  using U = uint16_t;
};

// *p += v as one indivisible read-modify-write: blocks run on different host threads and may add
// into the same GM element (atomic=AtomicAdd). Integers wrap; floats add in the tensor's dtype.
template <typename T>
inline void AtomicAdd(T* p, T v) {
  if constexpr (kIsFloatLike<T>) {
    using U = typename AtomicBits<T>::U;
    U* word = reinterpret_cast<U*>(p);
    U seen = __atomic_load_n(word, __ATOMIC_RELAXED);
    for (;;) {
      const T sum = FromFloat<T>(ToFloat(__builtin_bit_cast(T, seen)) + ToFloat(v));
      if (__atomic_compare_exchange_n(word, &seen, __builtin_bit_cast(U, sum), true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
        return;
      }
    }
  } else {
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
  }
}

// rows x cols elements from `src` (row stride `src_stride`) to `dst`, through the fixpipe.
template <typename TD, typename TS>
inline void FixpipeCopy2D(TD* dst, int64_t dst_stride, const TS* src, int64_t src_stride, int64_t rows, int64_t cols,
                          const Fixpipe& f) {
  if constexpr (kFixpipeSource<TS>) {  // only accumulators go through the fixpipe
    for (int64_t r = 0; r < rows; ++r) {
      TD* d = dst + r * dst_stride;
      const TS* s = src + r * src_stride;
      for (int64_t c = 0; c < cols; ++c) d[c] = FixpipeElem<TD>(s[c], f);
    }
  }
}

}  // namespace detail

}  // namespace pto
