// GM pointers and views (pl.Ptr parameters, pl.addptr, pl.make_ptr, pl.make_tensor, pl.set_stride).
// A pointer is an address inside one launch buffer and remembers that buffer; a view made from it (or
// from a tensor) keeps the buffer too, so every load, store, element access and dump through a view
// is checked against the bytes the launch really passed (GmTensor, tile.h), whatever shape and
// strides the view describes.
#pragma once

#include "pypto_pro/tile.h"

namespace pto {

// A pl.Ptr[T] value: `data` in the buffer [lo, hi) passed for parameter `buffer`.
template <typename T>
struct GmPtr {
  T* data;
  const uint8_t* lo;
  const uint8_t* hi;
  const char* buffer;
};

// A pl.Ptr parameter: the buffer the launch passed (its bytes counted by the launcher).
template <typename T>
inline GmPtr<T> MakeGmPtr(uint8_t* data, int64_t bytes, const char* name) {
  return GmPtr<T>{reinterpret_cast<T*>(data), data, data + bytes, name};
}

namespace detail {

// Whether a view's source lies in a buffer the launch found untouched (a tensor parameter's mark; a
// pointer's buffer is not examined).
template <typename T, int N>
inline bool FreshBuffer(const GmTensor<T, N>& t) { return t.fresh; }
template <typename T>
inline bool FreshBuffer(const GmPtr<T>&) { return false; }

template <typename Source>
[[noreturn]] inline void ViewFault(CoreCtx& ctx, int line, const char* op, const Source& src, const GmText& what) {
  GmText m;
  m << what.text << " (in the buffer passed for parameter '" << src.buffer << "', " << int64_t(src.hi - src.lo)
    << " bytes)";
  Fault(ctx, line, op, m.text);
}

// Element type U needs addresses aligned to its size, as the NPU's loads and stores do.
template <typename U, typename Source>
inline void CheckAligned(CoreCtx& ctx, int line, const char* op, const Source& src, const char* dtype) {
  const int64_t at = reinterpret_cast<const uint8_t*>(src.data) - src.lo;
  if (__builtin_expect(reinterpret_cast<uintptr_t>(src.data) % sizeof(U) == 0, 1)) return;
  GmText m;
  m << "the address (byte " << at << " of its buffer) is not aligned to the " << int64_t(sizeof(U)) << " bytes of "
    << dtype;
  ViewFault(ctx, line, op, src, m);
}

// Row-major strides: each the product of the dims after it.
template <int N>
inline bool RowMajor(const int64_t* shape, const int64_t* stride) {
  int64_t expected = 1;
  for (int i = N - 1; i >= 0; --i) {
    if (stride[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

template <int N>
inline void CheckStrides(CoreCtx& ctx, int line, const char* op, const char* name, const int64_t* stride) {
  for (int i = 0; i < N; ++i) {
    if (__builtin_expect(stride[i] < 0, 0)) {
      GmText m;
      m << "stride " << int64_t(i) << " of '" << name << "' is " << stride[i] << "; strides must not be negative";
      Fault(ctx, line, op, m.text);
    }
  }
}

}  // namespace detail

// pl.addptr(ptr, offset): `offset` elements of T further, which must stay in the pointer's buffer
// (its end included: a view of nothing may start there).
template <typename T>
inline GmPtr<T> AddPtr(CoreCtx& ctx, int line, const GmPtr<T>& p, int64_t offset) {
  const int64_t at = reinterpret_cast<const uint8_t*>(p.data) - p.lo;
  int64_t moved, to;
  const bool overflow = __builtin_mul_overflow(offset, int64_t(sizeof(T)), &moved) ||
                        __builtin_add_overflow(at, moved, &to);
  if (__builtin_expect(overflow || to < 0 || to > p.hi - p.lo, 0)) {
    detail::GmText m;
    m << "the pointer at byte " << at << " moved by " << offset << " elements of " << int64_t(sizeof(T))
      << " bytes leaves its buffer";
    detail::ViewFault(ctx, line, "addptr", p, m);
  }
  GmPtr<T> out = p;
  out.data = reinterpret_cast<T*>(const_cast<uint8_t*>(p.lo) + to);
  return out;
}

// pl.make_ptr(ptr, dtype): the same address read as U.
template <typename U, typename T>
inline GmPtr<U> CastPtr(CoreCtx& ctx, int line, const GmPtr<T>& p) {
  detail::CheckAligned<U>(ctx, line, "make_ptr", p, "the new dtype");
  return GmPtr<U>{reinterpret_cast<U*>(p.data), p.lo, p.hi, p.buffer};
}

// pl.make_tensor(source, shape, stride, dtype): a view of U elements from the source's address (a
// GmPtr or a GmTensor) in the source's buffer. Shape entries are 0..2147483647 (the tensor dims of
// the language), strides are not negative; without strides the view is row-major. Nothing is read:
// the accesses through the view are checked against its shape and its buffer.
template <typename U, int N, typename Source>
inline GmTensor<U, N> MakeView(CoreCtx& ctx, int line, const Source& src, Idx<N> shape, bool has_stride,
                               Idx<N> stride, const char* name) {
  for (int i = 0; i < N; ++i) {
    if (__builtin_expect(shape.v[i] < 0 || shape.v[i] > 2147483647, 0)) {
      detail::GmText m;
      m << "dim " << int64_t(i) << " of view '" << name << "' is " << shape.v[i] << "; dims are 0..2147483647";
      Fault(ctx, line, "make_tensor", m.text);
    }
  }
  if (!has_stride) {
    int64_t s = 1;
    for (int i = N - 1; i >= 0; --i) {
      stride.v[i] = s;
      s *= shape.v[i];
    }
  }
  detail::CheckStrides<N>(ctx, line, "make_tensor", name, stride.v);
  detail::CheckAligned<U>(ctx, line, "make_tensor", src, "the view's dtype");
  GmTensor<U, N> t;
  t.data = reinterpret_cast<U*>(src.data);
  for (int i = 0; i < N; ++i) {
    t.shape[i] = shape.v[i];
    t.stride[i] = stride.v[i];
  }
  t.name = name;
  t.lo = src.lo;
  t.hi = src.hi;
  t.buffer = src.buffer;
  t.contiguous = detail::RowMajor<N>(t.shape, t.stride);
  t.fresh = detail::FreshBuffer(src);
  return t;
}

// pl.set_stride(tensor, stride): the tensor's later accesses use these strides (its shape stays).
template <typename T, int N>
inline void set_stride(CoreCtx& ctx, int line, GmTensor<T, N>& tensor, Idx<N> stride) {
  detail::CheckStrides<N>(ctx, line, "set_stride", tensor.name, stride.v);
  for (int i = 0; i < N; ++i) tensor.stride[i] = stride.v[i];
  tensor.contiguous = detail::RowMajor<N>(tensor.shape, tensor.stride);
}

}  // namespace pto
