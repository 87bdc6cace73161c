// pl.printf and pl.pto_assert. The device passes the format and typed arguments to the runtime,
// which formats them: kernel.cpp stays free of <cstdio>, and output lines are printed whole.
#pragma once

#include "pypto_pro/tile.h"

namespace pto {

namespace detail {

inline PtoArg DebugArg(bool v) {
  PtoArg a{};
  a.kind = PTO_ARG_BOOL;
  a.bits = 1;
  a.value.i = v ? 1 : 0;
  return a;
}

template <typename T>
inline PtoArg DebugArg(T v) {
  PtoArg a{};
  a.bits = uint32_t(sizeof(T) * 8);
  if constexpr (__is_same(T, float) || __is_same(T, double)) {
    a.kind = PTO_ARG_FLOAT;
    a.value.f = double(v);
  } else if constexpr (T(-1) < T(0)) {
    a.kind = PTO_ARG_INT;
    a.value.i = int64_t(v);
  } else {
    a.kind = PTO_ARG_UINT;
    a.value.u = uint64_t(v);
  }
  return a;
}

}  // namespace detail

template <typename... Args>
inline void printf(CoreCtx& ctx, int line, const char* fmt, bool loc, Args... args) {
  const PtoArg list[sizeof...(Args) + 1] = {detail::DebugArg(args)..., PtoArg{}};
  ctx.api->print(&ctx, line, fmt, list, int32_t(sizeof...(Args)), loc ? PTO_PRINT_LOC : 0);
}

// A failed assertion is reported (printed, or a fault with PYPTO_PRO_ASSERT=raise); the kernel goes on.
template <typename... Args>
inline void pto_assert(CoreCtx& ctx, int line, const char* fmt, bool loc, const char* condition_text, bool condition,
                       Args... args) {
  if (__builtin_expect(condition, true)) return;
  const PtoArg list[sizeof...(Args) + 1] = {detail::DebugArg(args)..., PtoArg{}};
  ctx.api->assert_fail(&ctx, line, condition_text, fmt, list, int32_t(sizeof...(Args)), loc ? PTO_PRINT_LOC : 0);
}

// pl.trap(): the core stops; the launch ends with a fault at this line.
[[noreturn]] inline void trap(CoreCtx& ctx, int line) { Fault(ctx, line, "trap", "pl.trap() stopped the kernel"); }

}  // namespace pto
