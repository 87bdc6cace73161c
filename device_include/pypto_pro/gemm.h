// The arithmetic of the cube unit: C[m, n] = init + A[m, k] x B[k, n] on row-major arrays, with
// fp16/bf16/fp32 inputs accumulated in fp32 and int8 inputs accumulated exactly in int32.
//
// It is the hot loop of every cube kernel, so it is a register-blocked GEMM: panels of A and B are
// packed (and converted to fp32) into thread-local buffers, and a kMR x kNR tile of C lives in
// registers while k runs. bf16 inputs use the native bf16 dot product (vdpbf16ps: two products per
// lane and instruction, exact like an FMA since bf16 x bf16 fits fp32) when the host has it.
// int8 uses the byte dot product (vpdpbusd: four products per lane and instruction, exact int32
// sums) when the host has AVX-512 VNNI. Elsewhere int8 products are exact in fp32 and so are sums of
// up to 2^24 / 2^14 = 1024 of them, so int8 runs on the fp32 path in k blocks of kKC (<= 1024) whose
// sums are added in int32. On a host with AMX (namespace amx below) bf16, int8 and fp16 (as exact
// bf16 parts) run on the tile unit instead.
// No <immintrin.h>: it costs ~250 ms per kernel compile; the builtins below do not.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pypto_pro/numeric.h"

// Kernels compile at -O1 (first launches are faster); this routine needs -O3's unrolling and
// scheduling to keep its register tile in registers.
#pragma GCC push_options
#pragma GCC optimize("O3")

namespace pto::gemm {

typedef int32_t i32x16 __attribute__((vector_size(64)));
typedef int8_t i8x16 __attribute__((vector_size(16)));
typedef uint8_t u8x16 __attribute__((vector_size(16)));
typedef short i16x32 __attribute__((vector_size(64)));
typedef uint16_t u16x32 __attribute__((vector_size(64)));

// A 4 x 64 register tile: 16 accumulators, and per k 4 broadcasts and 4 loads for 16 FMAs (an 8 x 32
// tile needs 10 loads; 4 x 64 ran a 128^3 fp16 matmul 10-13% faster on an Intel Xeon, bit-identical).
constexpr int kMR = 4;         // rows of the register tile
constexpr int kNV = 4;         // 16-lane vectors across its columns
constexpr int kNR = 16 * kNV;  // columns of the register tile
constexpr int kKC = 256;       // k per packed block: one A panel (4 KiB) and one B panel (64 KiB) in L1/L2
constexpr int kNC = 128;       // columns per packed block of B (128 KiB, in L2)
static_assert(kKC % 2 == 0 && kKC <= 1024, "int8 sums of kKC products must stay exact in fp32");

// The builtin's name and operand types differ between compilers (and clang 17 changed them again).
#if defined(__AVX512BF16__) && (!defined(__clang__) || __clang_major__ < 17)
#define PTO_GEMM_BF16_DOT 1
#endif

#if defined(__AVX512VNNI__)
#define PTO_GEMM_INT8_DOT 1
#endif

// AMX (Sapphire Rapids and later): bf16 and int8 matmuls on the tile unit (16 x 16 x 32 bf16 or
// 16 x 16 x 64 int8 multiply-accumulates per instruction). Kernels are built with -march=native, so the host the kernel runs on decides; on
// one without AMX (or where Linux refuses the tile state) the vector paths below run instead.
#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__x86_64__) && defined(__linux__)
#define PTO_GEMM_AMX 1
#if defined(__AMX_INT8__)
#define PTO_GEMM_AMX_INT8 1
#else
#define PTO_GEMM_AMX_INT8 0
#endif
#endif

// Where the result starts from: nothing, a row vector broadcast over the rows (bias), or a matrix
// (the accumulator of matmul_acc, possibly C itself).
// The most steps KLoop runs as one GEMM (a longer loop runs as written).
constexpr int kKLoopMaxSteps = 64;

template <typename TC>
struct Init {
  const TC* data = nullptr;
  int64_t row_stride = 0;  // 0: every row of C adds the same row
};

// The launch (PtoCoreCtx::launch_id) during which A's (B's) values cannot change, or 0: forward_moves'
// in-place windows of tensors the launch does not write (cube_ops.h). What Gemm derives from such an
// operand (B packed for the tile unit, A's smallest magnitudes) is kept for the launch's later matmuls
// that read the same window: a K loop reads each window once per output tile of its row or column.
struct Reuse {
  uint64_t a_launch = 0;
  uint64_t b_launch = 0;
};

namespace detail {

inline f32x16 Broadcast(float x) { return f32x16{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }

// FusedMulAdd16 (numeric.h), defined again inside this -O3 region (see there).
inline f32x16 Fma(f32x16 a, f32x16 b, f32x16 c) { PTO_FUSED_MUL_ADD16_BODY(a, b, c) }

// 16 consecutive elements as fp32.
template <typename T>
__attribute__((always_inline)) inline f32x16 LoadAsFloat(const T* p) {
  if constexpr (__is_same(T, int8_t)) {
    i8x16 raw;
    __builtin_memcpy(&raw, p, sizeof raw);
    return __builtin_convertvector(raw, f32x16);
  } else {
    return Load16(p);
  }
}

template <typename T>
inline float ToFloat1(T x) {
  if constexpr (__is_same(T, int8_t)) return float(x);
  else return ToFloat(x);
}

// The fp32 path converts A's rows to fp32 as they are (ap[i * kc + p]: contiguous vector stores, the
// kernel broadcasts from kMR row streams) and packs B k-major (bp[p * kNR + j]).
template <typename T>
inline void PackA(float* __restrict ap, const T* a, int64_t lda, int mr, int kc) {
  for (int i = 0; i < mr; ++i) {
    const T* row = a + i * lda;
    float* out = ap + i * kc;
    int p = 0;
    for (; p + 16 <= kc; p += 16) Store16(out + p, LoadAsFloat(row + p));
    for (; p < kc; ++p) out[p] = ToFloat1(row[p]);
  }
  for (int i = mr; i < kMR; ++i) {
    for (int p = 0; p < kc; ++p) ap[i * kc + p] = 0.0f;
  }
}

template <typename T>
inline void PackB(float* __restrict bp, const T* b, int64_t ldb, int kc, int nc) {
  for (int j0 = 0; j0 < nc; j0 += kNR) {
    const int w = nc - j0 < kNR ? nc - j0 : kNR;
    float* panel = bp + int64_t(j0) * kc;
    for (int p = 0; p < kc; ++p) {
      const T* row = b + p * ldb + j0;
      float* out = panel + p * kNR;
      if (w == kNR) {
#pragma GCC unroll 4
        for (int v = 0; v < kNV; ++v) Store16(out + 16 * v, LoadAsFloat(row + 16 * v));
      } else {
        for (int j = 0; j < kNR; ++j) out[j] = j < w ? ToFloat1(row[j]) : 0.0f;
      }
    }
  }
}

struct Tile {
  f32x16 v[kMR][kNV];
};

// acc = sum over p < kc of A[:, p] x B[p, :] on A's kMR rows (`a_stride` apart: PackA's panel, or
// fp32 A itself) and the fp32 panel PackB wrote, for the panel's first NV vectors of columns (a
// narrower last panel skips the zeros PackB padded it with; the tile's other vectors stay zero).
template <int NV>
inline Tile KernelFma(int kc, const float* __restrict ap, int64_t a_stride, const float* __restrict bp) {
  Tile t;
  const float* rows[kMR];
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) rows[i] = ap + i * a_stride;
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) t.v[i][v] = f32x16{};
  }
#pragma GCC unroll 4
  for (int p = 0; p < kc; ++p) {
    f32x16 b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) __builtin_memcpy(&b[v], bp + 16 * v, sizeof(f32x16));
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      const f32x16 a = Broadcast(rows[i][p]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) t.v[i][v] = Fma(a, b[v], t.v[i][v]);
    }
    bp += kNR;
  }
  return t;
}

// KernelFma for a panel of `width` columns.
inline Tile KernelFmaOf(int width, int kc, const float* ap, int64_t a_stride, const float* bp) {
  static_assert(kNV == 4, "one case per vector count");
  switch ((width + 15) / 16) {
    case 1: return KernelFma<1>(kc, ap, a_stride, bp);
    case 2: return KernelFma<2>(kc, ap, a_stride, bp);
    case 3: return KernelFma<3>(kc, ap, a_stride, bp);
    default: return KernelFma<4>(kc, ap, a_stride, bp);
  }
}

// The host's bf16 dot products (AMX tdpbf16ps, AVX-512 vdpbf16ps) treat subnormal inputs as zero and
// flush subnormal results to zero; the device's contract is IEEE fp32 arithmetic on exact products.
// They agree when no input is subnormal and no product or partial sum can be: a bf16 value of exponent
// e is a multiple of 2^(e - 7), so with ea, eb the smallest exponents of A's and B's nonzero values
// every product is a multiple of g = 2^(ea + eb - 14), and so is every fp32 rounding of a sum of them
// (below 2^24 g it is exact; above, fp32's spacing is a multiple of g). With ea + eb >= -112, g =
// 2^-126: every nonzero product and partial sum is a normal number. Inputs smaller than that (below
// 2^-56 on both sides, or a subnormal) send the matmul to the fp32 path.

// The smallest nonzero magnitude of bf16 values is tracked as the unsigned minimum of |bits| - 1 (a zero
// wraps to the largest value), per lane while scanning, then as its exponent field.
inline u16x32 LowerMagnitudes(u16x32 lowest, u16x32 bits) {
  const u16x32 v = (bits & 0x7fff) - 1;
  return v < lowest ? v : lowest;
}

// The exponent field (1..255; 0: a subnormal; 512: all zeros) of the smallest of the lanes and `lowest1`.
inline int ExponentFieldOf(u16x32 lowest, uint16_t lowest1) {
  for (int l = 0; l < 32; ++l) lowest1 = lowest[l] < lowest1 ? lowest[l] : lowest1;
  return (int(lowest1) + 1) >> 7;
}

// The exponent field of the smallest nonzero magnitude among rows x cols values of x.
inline int MinExponentField(const bfloat16* x, int64_t ld, int rows, int cols) {
  u16x32 lowest = ~u16x32{};
  uint16_t lowest1 = 0xffff;
  for (int i = 0; i < rows; ++i) {
    const bfloat16* row = x + int64_t(i) * ld;
    int j = 0;
    for (; j + 32 <= cols; j += 32) {
      u16x32 v;
      __builtin_memcpy(&v, row + j, 64);
      lowest = LowerMagnitudes(lowest, v);
    }
    for (; j < cols; ++j) {
      const uint16_t v = uint16_t((row[j].bits & 0x7fff) - 1);
      lowest1 = v < lowest1 ? v : lowest1;
    }
  }
  return ExponentFieldOf(lowest, lowest1);
}

// Whether exponent fields of A's and B's smallest nonzero magnitudes let the host's bf16 dot products
// give IEEE's sums (see above).
inline bool Bf16DotIsExact(int a_field, int b_field) {
  return a_field != 0 && b_field != 0 && (a_field - 127) + (b_field - 127) >= -112;
}

#if PTO_GEMM_BF16_DOT
// acc[l] += a.bf16[2l] * b.bf16[2l] + a.bf16[2l + 1] * b.bf16[2l + 1]
inline f32x16 DotBf16(f32x16 acc, u32x16 a, u32x16 b) {
#if defined(__clang__)
  return __builtin_ia32_dpbf16ps_512(acc, (i32x16)a, (i32x16)b);
#else
  return __builtin_ia32_dpbf16ps_v16sf(acc, (i16x32)a, (i16x32)b);
#endif
}

// The bf16 path packs pairs of consecutive k as one 32-bit word (low half = even k):
// A as ap[q * kMR + i], B as bp[q * kNR + j] for q = p / 2; an odd k is padded with zeros.
inline void PackPairsA(uint32_t* __restrict ap, const bfloat16* a, int64_t lda, int mr, int kc) {
  const int pairs = (kc + 1) / 2;
  for (int i = 0; i < mr; ++i) {
    const bfloat16* row = a + i * lda;
    for (int q = 0; q < kc / 2; ++q) {
      uint32_t word;
      __builtin_memcpy(&word, row + 2 * q, sizeof word);
      ap[q * kMR + i] = word;
    }
    if (kc % 2) ap[(pairs - 1) * kMR + i] = row[kc - 1].bits;
  }
  for (int i = mr; i < kMR; ++i) {
    for (int q = 0; q < pairs; ++q) ap[q * kMR + i] = 0;
  }
}

inline void PackPairsB(uint32_t* __restrict bp, const bfloat16* b, int64_t ldb, int kc, int nc) {
  const int pairs = (kc + 1) / 2;
  for (int j0 = 0; j0 < nc; j0 += kNR) {
    const int w = nc - j0 < kNR ? nc - j0 : kNR;
    uint32_t* panel = bp + int64_t(j0) * pairs;
    for (int q = 0; q < pairs; ++q) {
      const bfloat16* even = b + 2 * q * ldb + j0;
      const bfloat16* odd = 2 * q + 1 < kc ? even + ldb : nullptr;
      uint32_t* out = panel + q * kNR;
      if (w == kNR && odd) {
#pragma GCC unroll 4
        for (int v = 0; v < kNV; ++v) {
          u16x16 lo, hi;
          __builtin_memcpy(&lo, even + 16 * v, sizeof lo);
          __builtin_memcpy(&hi, odd + 16 * v, sizeof hi);
          u32x16 word = __builtin_convertvector(lo, u32x16) | (__builtin_convertvector(hi, u32x16) << 16);
          __builtin_memcpy(out + 16 * v, &word, sizeof word);
        }
      } else {
        for (int j = 0; j < kNR; ++j) {
          uint32_t lo = j < w ? even[j].bits : 0, hi = j < w && odd ? odd[j].bits : 0;
          out[j] = lo | (hi << 16);
        }
      }
    }
  }
}

inline Tile KernelBf16Dot(int kc, const uint32_t* __restrict ap, const uint32_t* __restrict bp) {
  Tile t;
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) t.v[i][v] = f32x16{};
  }
  const int pairs = (kc + 1) / 2;
  for (int q = 0; q < pairs; ++q) {
    u32x16 b[kNV];
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) __builtin_memcpy(&b[v], bp + 16 * v, sizeof(u32x16));
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      const uint32_t w = ap[i];
      const u32x16 a = {w, w, w, w, w, w, w, w, w, w, w, w, w, w, w, w};
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) t.v[i][v] = DotBf16(t.v[i][v], a, b[v]);
    }
    ap += kMR;
    bp += kNR;
  }
  return t;
}
#endif

#if PTO_GEMM_INT8_DOT
// acc[l] += sum over r < 4 of u.ubyte[4l + r] * s.sbyte[4l + r] (int32, wrapping)
inline i32x16 DotU8S8(i32x16 acc, i32x16 u, i32x16 s) {
#if defined(__clang__)
  return __builtin_ia32_vpdpbusd512(acc, u, s);
#else
  return __builtin_ia32_vpdpbusd_v16si(acc, u, s);
#endif
}

// vpmovzxbd (GCC turns the generic conversion into sixteen scalar inserts).
inline u32x16 ZeroExtend(u8x16 bytes) {
#if defined(__clang__)
  return __builtin_convertvector(bytes, u32x16);
#else
  typedef char c8x16 __attribute__((vector_size(16)));
  return (u32x16)__builtin_ia32_pmovzxbd512_mask((c8x16)bytes, i32x16{}, (unsigned short)0xffff);
#endif
}

// The byte dot product multiplies unsigned by signed bytes: A is packed offset to unsigned (a + 128)
// and B stays signed, so a lane sums a * b + 128 * b, and each column's 128 * sum(b) is taken off at
// the end. Both sides wrap in int32, so the result is exact modulo 2^32 like the device's accumulator.
// k runs in quads (one 32-bit word, low byte = lowest k). A is packed as kMR rows of `quads` words
// (padding: 0x80, the offset zero); B as bp[q * kNR + j] (padding: 0), with col_sums[j] = the sum of
// column j over the block's kc rows.
inline void PackQuadsA(uint8_t* __restrict ap, const int8_t* a, int64_t lda, int mr, int kc) {
  typedef uint8_t u8x64 __attribute__((vector_size(64)));
  const int width = (kc + 3) / 4 * 4;
  for (int i = 0; i < kMR; ++i) {
    uint8_t* out = ap + i * width;
    const int copied = i < mr ? kc : 0;
    const int8_t* row = copied ? a + i * lda : a;
    int p = 0;
    for (; p + 64 <= copied; p += 64) {
      u8x64 bytes;
      __builtin_memcpy(&bytes, row + p, sizeof bytes);
      bytes ^= 0x80;
      __builtin_memcpy(out + p, &bytes, sizeof bytes);
    }
    for (; p < copied; ++p) out[p] = uint8_t(row[p]) ^ 0x80;
    for (; p < width; ++p) out[p] = 0x80;
  }
}

inline void PackQuadsB(uint32_t* __restrict bp, int32_t* col_sums, const int8_t* b, int64_t ldb, int kc, int nc) {
  constexpr int32_t kOnes = 0x01010101;
  const i32x16 ones = {kOnes, kOnes, kOnes, kOnes, kOnes, kOnes, kOnes, kOnes,
                       kOnes, kOnes, kOnes, kOnes, kOnes, kOnes, kOnes, kOnes};
  const int quads = (kc + 3) / 4;
  for (int j0 = 0; j0 < nc; j0 += kNR) {
    const int w = nc - j0 < kNR ? nc - j0 : kNR;
    uint32_t* panel = bp + int64_t(j0) * quads;
    i32x16 sums[kNV] = {};
    for (int q = 0; q < quads; ++q) {
      uint32_t* out = panel + q * kNR;
      if (w == kNR && 4 * q + 4 <= kc) {
        const int8_t* row = b + 4 * q * ldb + j0;
#pragma GCC unroll 4
        for (int v = 0; v < kNV; ++v) {
          u32x16 word = {};
#pragma GCC unroll 4
          for (int r = 0; r < 4; ++r) {
            u8x16 bytes;
            __builtin_memcpy(&bytes, row + r * ldb + 16 * v, sizeof bytes);
            word |= ZeroExtend(bytes) << (8 * r);
          }
          __builtin_memcpy(out + 16 * v, &word, sizeof word);
          sums[v] = DotU8S8(sums[v], ones, (i32x16)word);  // 1 x each signed byte
        }
      } else {
        for (int j = 0; j < kNR; ++j) {
          uint32_t word = 0;
          for (int r = 0; r < 4 && j < w && 4 * q + r < kc; ++r) {
            word |= uint32_t(uint8_t(b[(4 * q + r) * ldb + j0 + j])) << (8 * r);
          }
          out[j] = word;
        }
#pragma GCC unroll 4
        for (int v = 0; v < kNV; ++v) {
          i32x16 word;
          __builtin_memcpy(&word, out + 16 * v, sizeof word);
          sums[v] = DotU8S8(sums[v], ones, word);
        }
      }
    }
    __builtin_memcpy(col_sums + j0, sums, sizeof sums);
  }
}

// The int32 sums of a kMR x (16 NV) register tile, as lanes of Tile (whose vectors hold their bits).
template <int NV>
inline Tile KernelInt8Dot(int kc, const uint8_t* ap, const uint32_t* __restrict bp, const int32_t* col_sums) {
  const int quads = (kc + 3) / 4;
  const uint8_t* rows[kMR];
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) rows[i] = ap + i * quads * 4;
  i32x16 acc[kMR][kNV];
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) acc[i][v] = i32x16{};
  }
#pragma GCC unroll 2
  for (int q = 0; q < quads; ++q) {
    i32x16 b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) __builtin_memcpy(&b[v], bp + 16 * v, sizeof(i32x16));
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      int32_t w;
      __builtin_memcpy(&w, rows[i] + 4 * q, sizeof w);
      const i32x16 quad = {w, w, w, w, w, w, w, w, w, w, w, w, w, w, w, w};
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = DotU8S8(acc[i][v], quad, b[v]);
    }
    bp += kNR;
  }
  Tile t;
#pragma GCC unroll 4
  for (int v = 0; v < kNV; ++v) {
    u32x16 offset;
    __builtin_memcpy(&offset, col_sums + 16 * v, sizeof offset);
    offset <<= 7;
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) t.v[i][v] = (f32x16)((u32x16)acc[i][v] - offset);
  }
  return t;
}

inline Tile KernelInt8DotOf(int width, int kc, const uint8_t* ap, const uint32_t* bp, const int32_t* col_sums) {
  switch ((width + 15) / 16) {
    case 1: return KernelInt8Dot<1>(kc, ap, bp, col_sums);
    case 2: return KernelInt8Dot<2>(kc, ap, bp, col_sums);
    case 3: return KernelInt8Dot<3>(kc, ap, bp, col_sums);
    default: return KernelInt8Dot<4>(kc, ap, bp, col_sums);
  }
}
#endif

// Writes rows [0, mr) x cols [0, nr) of the register tile to C: the first k block adds `init`, the
// others add what C already holds. int32 results add in unsigned arithmetic: they wrap like the
// device's accumulator instead of being undefined.
// kIntBits: the tile's lanes hold int32 sums as bits (KernelInt8Dot), not fp32 values.
template <typename TC, bool kIntBits = false>
inline void StoreTile(const Tile& t, TC* c, int64_t ldc, int mr, int nr, bool first, const Init<TC>& init,
                      int64_t row0, int64_t col0) {
  for (int i = 0; i < mr; ++i) {
    TC* out = c + i * ldc;
    const TC* base = !first ? out : init.data ? init.data + (row0 + i) * init.row_stride + col0 : nullptr;
    if (nr == kNR) {
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) {
        if constexpr (__is_same(TC, float)) {
          f32x16 sum = t.v[i][v];
          if (base) sum += Load16(base + 16 * v);
          Store16(out + 16 * v, sum);
        } else {
          u32x16 sum = kIntBits ? (u32x16)t.v[i][v] : (u32x16)__builtin_convertvector(t.v[i][v], i32x16);
          if (base) {
            u32x16 prior;
            __builtin_memcpy(&prior, base + 16 * v, sizeof prior);
            sum += prior;
          }
          __builtin_memcpy(out + 16 * v, &sum, sizeof sum);
        }
      }
    } else {
      for (int j = 0; j < nr; ++j) {
        const float x = t.v[i][j / 16][j % 16];
        if constexpr (__is_same(TC, float)) {
          out[j] = base ? base[j] + x : x;
        } else {
          const uint32_t sum = kIntBits ? ((u32x16)t.v[i][j / 16])[j % 16] : uint32_t(int32_t(x));
          out[j] = TC(sum + (base ? uint32_t(base[j]) : 0u));
        }
      }
    }
  }
}

// Per-thread packing buffers: a cube core runs one matmul at a time, and host threads run cores.
struct Scratch {
  alignas(64) float a[kMR * kKC];
  alignas(64) float b[kKC * kNC];
  alignas(64) int32_t b_sums[kNC];  // int8 dot product: the packed B block's column sums
};

inline Scratch& ThreadScratch() {
  static thread_local Scratch scratch;
  return scratch;
}

// A thread_local's address taken once: GCC otherwise re-derives it at uses inside the loops, which in
// a shared library (the routines, the kernels) is a __tls_get_addr call each time (13% of an int8
// matmul's time before this).
template <typename T>
inline T& Pinned(T& object) {
  T* p = &object;
  __asm__("" : "+r"(p));
  return *p;
}

}  // namespace detail

#if PTO_GEMM_AMX
}  // namespace pto::gemm
// glibc's (declared here: <unistd.h> would cost every kernel compile its parse time).
extern "C" long syscall(long number, ...) noexcept;
namespace pto::gemm {

namespace amx {

// Linux gives a process the AMX tile state only when it asks (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA); once per library (two threads racing both ask, which is harmless), false
// where the kernel refuses. A constant-initialised flag, not a static bool initialised by the call:
// that would need libstdc++'s guard functions, which kernel libraries do not link.
inline bool Enabled() {
  static int state = 0;  // 0: not asked yet, 1: granted, 2: refused
  int s = __atomic_load_n(&state, __ATOMIC_RELAXED);
  if (s == 0) {
    s = syscall(158 /* SYS_arch_prctl */, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0 ? 1 : 2;
    __atomic_store_n(&state, s, __ATOMIC_RELAXED);
  }
  return s == 1;
}

// Every tile used: 16 rows of 64 bytes (C: 16 x 16 fp32 or int32; A: 16 rows of 64 bytes of k; B: 16
// words of k x 16 columns).
struct alignas(64) Config {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

#define PTO_AMX_LOAD(t, base, stride)                                                                  \
  __asm__ volatile("{tileloadd\t(%0,%1,1), %%tmm" #t "|tileloadd\t%%tmm" #t ", [%0+%1*1]}" ::"r"(base), \
                   "r"(int64_t(stride)) : "memory")
#define PTO_AMX_STORE(t, base, stride)                                                                   \
  __asm__ volatile("{tilestored\t%%tmm" #t ", (%0,%1,1)|tilestored\t[%0+%1*1], %%tmm" #t "}" ::"r"(base), \
                   "r"(int64_t(stride)) : "memory")
#define PTO_AMX_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
#define PTO_AMX_DOT(op, c, a, b) \
  __asm__ volatile("{" op "\t%%tmm" #b ", %%tmm" #a ", %%tmm" #c "|" op "\t%%tmm" #c ", %%tmm" #a ", %%tmm" #b "}" ::)

// A kM x kN block of fp32 / int32 sums in tiles 0-3 (0, 1: its first 16 rows; 2, 3: the next 16), its
// rows `row` elements apart in memory.
template <typename TC>
__attribute__((always_inline)) inline void LoadSums(const TC* p, int64_t row) {
  PTO_AMX_LOAD(0, p, row * 4);
  PTO_AMX_LOAD(1, p + 16, row * 4);
  PTO_AMX_LOAD(2, p + 16 * row, row * 4);
  PTO_AMX_LOAD(3, p + 16 * row + 16, row * 4);
}
template <typename TC>
__attribute__((always_inline)) inline void StoreSums(TC* p, int64_t row) {
  PTO_AMX_STORE(0, p, row * 4);
  PTO_AMX_STORE(1, p + 16, row * 4);
  PTO_AMX_STORE(2, p + 16 * row, row * 4);
  PTO_AMX_STORE(3, p + 16 * row + 16, row * 4);
}
__attribute__((always_inline)) inline void ZeroSums() {
  PTO_AMX_ZERO(0);
  PTO_AMX_ZERO(1);
  PTO_AMX_ZERO(2);
  PTO_AMX_ZERO(3);
}

constexpr int kM = 32, kN = 32;          // a block of C in four tiles
constexpr int kTileBytes = 1024;         // 16 rows of 64 bytes
constexpr int kMaxAcc = 128 * 1024;      // fp32 / int32 accumulator elements (L0C holds 64 Ki)
constexpr int kPanelBytes = 256 * 1024;  // a packed A panel, and a packed B panel

// How k is laid out in the tiles' 32-bit words (A: a tile row is 16 words of one row of A; B: a tile
// row is one word of k for 16 columns), per input type:
// - bf16: pairs of consecutive k, fp32 sums (tdpbf16ps; bf16 x bf16 products are exact in fp32);
// - int8: quads of k, exact int32 sums that wrap like the device's accumulator (tdpbssd);
// - fp16: each value split exactly into bf16 hi + lo (hi: its first 8 significant bits, lo: the other
//   3). A's word of one k is (hi, lo); B has two tiles per k tile, of words (hi, hi) and (lo, lo), and
//   both multiply the same A tile into the same sums: one k adds A.hi B.hi + A.lo B.hi + A.hi B.lo +
//   A.lo B.lo = A B, every product exact in fp32, and no product or partial sum is below 2^-48 (none
//   meets the tile unit's flushing of fp32 denormals). Four times the bf16 work, still faster than
//   fp32 FMAs. An infinity or NaN cannot be split (inf - inf), so a matmul whose inputs hold one runs
//   on the vector path instead.
template <typename TIn>
struct Traits;
template <>
struct Traits<bfloat16> {
  static constexpr int kTileK = 32;      // k per tile
  static constexpr int kBytesPerK = 2;   // packed bytes per k of one row of A (and one column of B)
  static constexpr int kBParts = 1;      // B tiles per k tile and column tile
};
template <>
struct Traits<int8_t> {
  static constexpr int kTileK = 64;
  static constexpr int kBytesPerK = 1;
  static constexpr int kBParts = 1;
};
template <>
struct Traits<half> {
  static constexpr int kTileK = 16;
  static constexpr int kBytesPerK = 8;  // B's; A's are 4
  static constexpr int kBParts = 2;     // (hi, hi) and (lo, lo)
};

struct Scratch {
  alignas(64) uint32_t acc[kMaxAcc];          // C (fp32 or int32), padded to whole blocks, between k panels
  alignas(64) uint8_t a[kPanelBytes];         // A panel: tile (row tile i, k tile p) at (i * k_tiles + p) KiB
  alignas(64) uint8_t b[kPanelBytes];         // B panel: tile (column tile j, k tile p, part r) at ((j * k_tiles + p) * parts + r) KiB
  alignas(64) uint32_t block[2][kM * kN];     // finished blocks of C on their way to C (double-buffered)
};

inline Scratch& ThreadScratch() {
  static thread_local Scratch scratch;
  return scratch;
}

// B panels packed during a launch from windows that cannot change during it (Reuse::b_launch), in a
// ring of kBytes, and A's smallest magnitudes per block of rows. Panels are kept from the launch's
// first until the ring is full, then the launch packs into Scratch::b as before: a K loop reads its B
// windows round-robin, and evicting the oldest for the newest would keep none of them (fp16 1024^3:
// 32 windows of 128 KiB per thread, 18% slower that way, Intel Xeon). A new launch starts afresh.
struct Reused {
  static constexpr int kPanels = 128;
  static constexpr int kSlots = 256;  // an open-addressed index of the panels by address: a K loop's GEMM
                                      // looks up two panels per step (a scan of them: 5% of its time)
  static constexpr int64_t kBytes = int64_t(4) << 20;  // a 1024^3 bf16 K loop's panels of one thread: 3 MiB
  static constexpr int kFields = 512;  // direct-mapped by address: a K loop looks one up per 32 rows
  struct Panel {
    const void* at = nullptr;
    int64_t ld = 0;
    int kc = 0, n = 0, type = 0;
    int64_t offset = 0;
    int b_field = 0;
    bool finite = false;
  };
  struct Field {
    uint64_t launch = 0;  // 0: empty
    const void* at = nullptr;
    int64_t ld = 0;
    int rows = 0, cols = 0, field = 0;
  };
  uint64_t launch = 0;  // the launch the panels are of
  int panel_count = 0;
  uint8_t slots[kSlots];  // panel index + 1, 0: empty
  int64_t used = 0;  // bytes of the ring
  Panel panels[kPanels];
  Field fields[kFields];
  alignas(64) uint8_t ring[kBytes];
};

inline Reused& ThreadReused() {
  static thread_local Reused reused;
  return reused;
}

inline int SlotOf(const void* at) { return int((uint64_t(uintptr_t(at)) >> 6) * 0x9e3779b97f4a7c15ull >> 56); }
static_assert(Reused::kSlots == 256 && Reused::kPanels < Reused::kSlots, "SlotOf's 8 bits index the slots");

// The packed panel of B's window (at, ld, kc x n, packed as type) kept in this launch, or null.
inline Reused::Panel* FindPanel(Reused& r, uint64_t launch, const void* at, int64_t ld, int kc, int n, int type) {
  if (r.launch != launch) {
    r.launch = launch, r.panel_count = 0, r.used = 0;
    __builtin_memset(r.slots, 0, sizeof r.slots);
  }
  for (int slot = SlotOf(at); r.slots[slot] != 0; slot = (slot + 1) % Reused::kSlots) {
    Reused::Panel& p = r.panels[r.slots[slot] - 1];
    if (p.at == at && p.ld == ld && p.kc == kc && p.n == n && p.type == type) return &p;
  }
  return nullptr;
}

// Room for a new panel of `bytes` (after FindPanel of the same launch), or null when the ring is full.
inline Reused::Panel* NewPanel(Reused& r, const void* at, int64_t ld, int kc, int n, int type, int64_t bytes) {
  if (r.panel_count == Reused::kPanels || r.used + bytes > Reused::kBytes) return nullptr;
  int slot = SlotOf(at);
  while (r.slots[slot] != 0) slot = (slot + 1) % Reused::kSlots;
  r.slots[slot] = uint8_t(r.panel_count + 1);
  Reused::Panel& p = r.panels[r.panel_count++];
  p = Reused::Panel{at, ld, kc, n, type, r.used, 0, false};
  r.used = (r.used + bytes + 63) / 64 * 64;
  return &p;
}

// MinExponentField of the rows x cols window of bf16 A at `at` (rows ld apart), kept for the rest of
// the launch when A cannot change during it (launch != 0).
inline int MinExponentFieldOf(Reused& r, uint64_t launch, const bfloat16* at, int64_t ld, int rows, int cols) {
  if (launch == 0) return detail::MinExponentField(at, ld, rows, cols);
  Reused::Field& f = r.fields[(uint64_t(uintptr_t(at)) >> 6) * 0x9e3779b97f4a7c15ull >> 55];
  static_assert(Reused::kFields == 1 << (64 - 55), "the hash's bits index the table");
  if (f.launch == launch && f.at == at && f.ld == ld && f.rows == rows && f.cols == cols) return f.field;
  const int field = detail::MinExponentField(at, ld, rows, cols);
  f = Reused::Field{launch, at, ld, rows, cols, field};
  return field;
}

inline int RoundUp(int x, int to) { return (x + to - 1) / to * to; }

// The tile unit flushes subnormal fp32 inputs and results too (a prior of 3 x 2^-149 reads as 0; 2^-126 +
// 2^-149 - 2^-126 gives 0, not 2^-149). The products and partial sums Gemm sends it are multiples of
// 2^-126 (bf16: Bf16DotIsExact; fp16 parts: of 2^-48), so a prior is added in the tiles exactly as IEEE
// would when each of its values is zero or a multiple of 2^-126 itself: an exponent of -103 or more (an
// fp32 spacing of 2^-126 or more). Whether the 32 x 32 block at p (rows row_stride apart) is.
inline bool PriorFitsTiles(const float* p, int64_t row_stride) {
  u32x16 lowest = ~u32x16{};  // of |bits| - 1: a zero wraps to the largest value
  for (int i = 0; i < kM; ++i, p += row_stride) {
    for (int j = 0; j < kN; j += 16) {
      u32x16 v;
      __builtin_memcpy(&v, p + j, 64);
      v = (v & 0x7fffffffu) - 1;
      lowest = v < lowest ? v : lowest;
    }
  }
  uint32_t low = 0xffffffffu;
  for (int l = 0; l < 16; ++l) low = lowest[l] < low ? lowest[l] : low;
  return ((uint64_t(low) + 1) >> 23) >= 127 - 103;
}

// Whether Gemm below takes an m x n result of TIn inputs: its accumulator holds it, and a panel of one
// k tile of the wider side fits a packed panel (fp16's 8 bytes per k and column: n up to 2048).
template <typename TIn>
inline bool Fits(int m, int n) {
  const int64_t m_pad = RoundUp(m, kM), n_pad = RoundUp(n, kN);
  return m_pad * n_pad <= kMaxAcc &&
         int64_t(Traits<TIn>::kTileK) * Traits<TIn>::kBytesPerK * (m_pad > n_pad ? m_pad : n_pad) <= kPanelBytes;
}

typedef uint8_t u8x64 __attribute__((vector_size(64)));

inline bool AnyLaneSet(u32x16 v) {
  bool any = false;
  for (int l = 0; l < 16; ++l) any |= v[l] != 0;
  return any;
}

// fp16 split: the words (hi | lo << 16) of 16 values, and whether one of them is an infinity or a NaN.
inline u32x16 SplitWords(f32x16 x, u32x16& non_finite) {
  const u32x16 bits = (u32x16)x;
  const u32x16 hi = bits & 0xffff0000u;
  const f32x16 lo = x - (f32x16)hi;  // exact: the 3 significant bits hi left out
  non_finite |= (u32x16)((bits & 0x7f800000u) == 0x7f800000u);
  return (hi >> 16) | ((u32x16)lo & 0xffff0000u);
}

inline uint32_t SplitWord(half h, bool& non_finite) {
  const float x = ToFloat(h);
  const uint32_t bits = FloatBits(x), hi = bits & 0xffff0000u;
  non_finite |= (bits & 0x7f800000u) == 0x7f800000u;
  return (hi >> 16) | (FloatBits(x - BitsFloat(hi)) & 0xffff0000u);
}

// Packs rows [0, m_pad) x k [k0, k0 + kc) of A as tiles (rows past m and k past kc are zeros); false
// when an fp16 value is an infinity or a NaN.
template <typename TIn>
inline bool PackA(uint8_t* __restrict tiles, const TIn* a, int64_t lda, int m, int m_pad, int kc) {
  constexpr int kTileK = Traits<TIn>::kTileK;
  const int k_tiles = (kc + kTileK - 1) / kTileK;
  u32x16 non_finite{};
  bool scalar_non_finite = false;
  for (int i = 0; i < m_pad; ++i) {
    uint8_t* row_tiles = tiles + int64_t(i / 16) * k_tiles * kTileBytes + (i % 16) * 64;
    const TIn* row = a + int64_t(i) * lda;
    const int copied = i < m ? kc : 0;
    int p = 0;
    if constexpr (__is_same(TIn, half)) {
      for (; p + 16 <= copied; p += 16) {
        const u32x16 w = SplitWords(Load16(row + p), non_finite);
        __builtin_memcpy(row_tiles + int64_t(p / 16) * kTileBytes, &w, 64);
      }
      for (; p < k_tiles * kTileK; ++p) {
        reinterpret_cast<uint32_t*>(row_tiles + int64_t(p / 16) * kTileBytes)[p % 16] =
            p < copied ? SplitWord(row[p], scalar_non_finite) : 0;
      }
    } else {
      for (; p + kTileK <= copied; p += kTileK) __builtin_memcpy(row_tiles + int64_t(p / kTileK) * kTileBytes, row + p, 64);
      for (; p < k_tiles * kTileK; p += kTileK) {  // a partial tile, or rows past m: zeros
        TIn* out = reinterpret_cast<TIn*>(row_tiles + int64_t(p / kTileK) * kTileBytes);
        for (int q = 0; q < kTileK; ++q) out[q] = p + q < copied ? row[p + q] : TIn{};
      }
    }
  }
  return !(scalar_non_finite || AnyLaneSet(non_finite));
}

// The word of B's tile row q (column j, k tile kt) from the scalar elements, zeros past kc and n.
template <typename TIn>
inline uint32_t BWord(const TIn* b, int64_t ldb, int kc, int n, int kt, int q, int part, int j, bool& non_finite) {
  if (j >= n) return 0;
  if constexpr (__is_same(TIn, half)) {
    const int p = kt * 16 + q;
    if (p >= kc) return 0;
    const uint32_t w = SplitWord(b[int64_t(p) * ldb + j], non_finite);
    const uint32_t half_bits = part ? w >> 16 : w & 0xffffu;  // (hi, hi) or (lo, lo)
    return half_bits | (half_bits << 16);
  } else {
    constexpr int kPer = 4 / int(sizeof(TIn));
    uint32_t word = 0;
    for (int r = 0; r < kPer; ++r) {
      const int p = kt * Traits<TIn>::kTileK + q * kPer + r;
      if (p < kc) {
        uint32_t bits;
        if constexpr (__is_same(TIn, bfloat16)) bits = b[int64_t(p) * ldb + j].bits;
        else bits = uint8_t(b[int64_t(p) * ldb + j]);
        word |= bits << (r * 32 / kPer);
      }
    }
    return word;
  }
}

// Packs k [0, kc) x columns [0, n_pad) of B as tiles; false when an fp16 value is an infinity or a NaN.
// bf16: *b_field is the exponent field of B's smallest nonzero magnitude (detail::Bf16DotIsExact).
template <typename TIn>
inline bool PackB(uint8_t* __restrict tiles, const TIn* b, int64_t ldb, int kc, int n, int n_pad, int* b_field) {
  constexpr int kTileK = Traits<TIn>::kTileK;
  const int k_tiles = (kc + kTileK - 1) / kTileK;
  u32x16 non_finite{};
  bool scalar_non_finite = false;
  [[maybe_unused]] u16x32 lowest = ~u16x32{};  // bf16: B's magnitudes, from the loads below
  constexpr int kParts = Traits<TIn>::kBParts;
  auto tile_row = [&](int jt, int kt, int q, int part = 0) {
    return reinterpret_cast<uint32_t*>(tiles + ((int64_t(jt) * k_tiles + kt) * kParts + part) * kTileBytes) + 16 * q;
  };
  // From a tile row to the same row of the next column tile: the whole-vector loops below step their
  // output pointers by it (index arithmetic per store was most of their time).
  const int64_t tile_step = int64_t(k_tiles) * kParts * kTileBytes;
  for (int kt = 0; kt < k_tiles; ++kt) {
    for (int q = 0; q < 16; ++q) {
      int j = 0;  // the columns done by whole vectors
      if constexpr (__is_same(TIn, bfloat16)) {  // rows 2q, 2q + 1: 32 columns to two tiles at a time
        const int p = kt * kTileK + 2 * q;
        if (p + 1 < kc) {
          const bfloat16* even_row = b + int64_t(p) * ldb;
          uint8_t* out = reinterpret_cast<uint8_t*>(tile_row(0, kt, q));
          for (; j + 32 <= n; j += 32, out += 2 * tile_step) {
            u16x32 even, odd;
            __builtin_memcpy(&even, even_row + j, 64);
            __builtin_memcpy(&odd, even_row + ldb + j, 64);
            lowest = detail::LowerMagnitudes(detail::LowerMagnitudes(lowest, even), odd);
            const u16x32 w0 = __builtin_shufflevector(even, odd, 0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                                      8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47);
            const u16x32 w1 = __builtin_shufflevector(even, odd, 16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22,
                                                      54, 23, 55, 24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62,
                                                      31, 63);
            __builtin_memcpy(out, &w0, 64);
            __builtin_memcpy(out + tile_step, &w1, 64);
          }
        }
      } else if constexpr (__is_same(TIn, int8_t)) {  // rows 4q .. 4q + 3: 64 columns to four tiles
        const int p = kt * kTileK + 4 * q;
        if (p + 3 < kc) {
          uint8_t* out = reinterpret_cast<uint8_t*>(tile_row(0, kt, q));
          for (; j + 64 <= n; j += 64, out += 4 * tile_step) {
            u8x64 r0, r1, r2, r3;
            const int8_t* src = b + int64_t(p) * ldb + j;
            __builtin_memcpy(&r0, src, 64);
            __builtin_memcpy(&r1, src + ldb, 64);
            __builtin_memcpy(&r2, src + 2 * ldb, 64);
            __builtin_memcpy(&r3, src + 3 * ldb, 64);
#define PTO_LO32 0, 64, 1, 65, 2, 66, 3, 67, 4, 68, 5, 69, 6, 70, 7, 71, 8, 72, 9, 73, 10, 74, 11, 75, 12, 76, 13, 77, \
                 14, 78, 15, 79, 16, 80, 17, 81, 18, 82, 19, 83, 20, 84, 21, 85, 22, 86, 23, 87, 24, 88, 25, 89, 26, \
                 90, 27, 91, 28, 92, 29, 93, 30, 94, 31, 95
#define PTO_HI32 32, 96, 33, 97, 34, 98, 35, 99, 36, 100, 37, 101, 38, 102, 39, 103, 40, 104, 41, 105, 42, 106, 43, \
                 107, 44, 108, 45, 109, 46, 110, 47, 111, 48, 112, 49, 113, 50, 114, 51, 115, 52, 116, 53, 117, 54,   \
                 118, 55, 119, 56, 120, 57, 121, 58, 122, 59, 123, 60, 124, 61, 125, 62, 126, 63, 127
            // byte pairs (row 0, row 1) and (row 2, row 3) per column, then the pairs of pairs
            const u16x32 p01lo = (u16x32)__builtin_shufflevector(r0, r1, PTO_LO32);
            const u16x32 p01hi = (u16x32)__builtin_shufflevector(r0, r1, PTO_HI32);
            const u16x32 p23lo = (u16x32)__builtin_shufflevector(r2, r3, PTO_LO32);
            const u16x32 p23hi = (u16x32)__builtin_shufflevector(r2, r3, PTO_HI32);
#undef PTO_LO32
#undef PTO_HI32
#define PTO_QUADS(x, y, base)                                                                                        \
  __builtin_shufflevector(x, y, base + 0, base + 32, base + 1, base + 33, base + 2, base + 34, base + 3, base + 35, \
                          base + 4, base + 36, base + 5, base + 37, base + 6, base + 38, base + 7, base + 39,       \
                          base + 8, base + 40, base + 9, base + 41, base + 10, base + 42, base + 11, base + 43,     \
                          base + 12, base + 44, base + 13, base + 45, base + 14, base + 46, base + 15, base + 47)
            const u16x32 w0 = PTO_QUADS(p01lo, p23lo, 0), w1 = PTO_QUADS(p01lo, p23lo, 16);
            const u16x32 w2 = PTO_QUADS(p01hi, p23hi, 0), w3 = PTO_QUADS(p01hi, p23hi, 16);
#undef PTO_QUADS
            __builtin_memcpy(out, &w0, 64);
            __builtin_memcpy(out + tile_step, &w1, 64);
            __builtin_memcpy(out + 2 * tile_step, &w2, 64);
            __builtin_memcpy(out + 3 * tile_step, &w3, 64);
          }
        }
      } else {  // fp16: row kt * 16 + q to the hi tile and the lo tile, 16 columns at a time
        const int p = kt * kTileK + q;
        if (p < kc) {
          const half* row = b + int64_t(p) * ldb;
          uint8_t* out = reinterpret_cast<uint8_t*>(tile_row(0, kt, q));
          for (; j + 16 <= n; j += 16, out += tile_step) {
            const u32x16 w = SplitWords(Load16(row + j), non_finite);
            const u32x16 hi = w & 0xffffu, lo = w >> 16;
            const u32x16 hi_words = hi | (hi << 16), lo_words = lo | (lo << 16);
            __builtin_memcpy(out, &hi_words, 64);
            __builtin_memcpy(out + kTileBytes, &lo_words, 64);  // part 1: the next tile
          }
        }
      }
      for (; j < n_pad; ++j) {
        for (int part = 0; part < kParts; ++part) {
          tile_row(j / 16, kt, q, part)[j % 16] = BWord(b, ldb, kc, n, kt, q, part, j, scalar_non_finite);
        }
      }
    }
  }
  if constexpr (__is_same(TIn, bfloat16)) {  // the loads saw every value unless a row or column was left over
    const bool all_seen = kc % 2 == 0 && n % 32 == 0;
    *b_field = all_seen ? detail::ExponentFieldOf(lowest, 0xffff) : detail::MinExponentField(b, ldb, kc, n);
  }
  return !(scalar_non_finite || AnyLaneSet(non_finite));
}

// Whether every value of the m x k matrix is finite.
inline bool AllFinite(const half* x, int64_t ld, int rows, int cols) {
  bool non_finite = false;
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) non_finite |= (x[int64_t(i) * ld + j].bits & 0x7c00) == 0x7c00;
  }
  return !non_finite;
}

// C = init + sum for rows [i0, i0 + 32) x columns [j0, j0 + 32) of C within m x n (int32 in unsigned
// arithmetic: it wraps); sum: the block's 32 x 32 sums.
template <typename TC>
inline void FinishBlock(const TC* sum, TC* c, int64_t ldc, const Init<TC>& init, int m, int n, int i0, int j0) {
  const int rows = m - i0 < kM ? m - i0 : kM, cols = n - j0 < kN ? n - j0 : kN;
  for (int i = 0; i < rows; ++i, sum += kN) {
    const TC* base = init.data ? init.data + int64_t(i0 + i) * init.row_stride + j0 : nullptr;
    TC* out = c + int64_t(i0 + i) * ldc + j0;
    int j = 0;
    for (; j + 16 <= cols; j += 16) {
      u32x16 v;
      __builtin_memcpy(&v, sum + j, 64);
      if (base) {
        u32x16 prior;
        __builtin_memcpy(&prior, base + j, 64);
        if constexpr (__is_same(TC, float)) v = (u32x16)((f32x16)prior + (f32x16)v);
        else v += prior;
      }
      __builtin_memcpy(out + j, &v, 64);
    }
    for (; j < cols; ++j) {
      if constexpr (__is_same(TC, float)) out[j] = base ? base[j] + sum[j] : sum[j];
      else out[j] = TC(uint32_t(sum[j]) + (base ? uint32_t(base[j]) : 0u));
    }
  }
}

// The packed panel of A's window at `at` (is_a: rows x kc, rows ld apart) or of B's (kc x rows) kept
// in this launch, or packed now into the ring, or null when the ring is full. finite, field: PackA's
// and PackB's findings (field: B's; a kept A panel leaves it alone).
template <typename TIn>
inline const uint8_t* KeptPanel(Reused& r, uint64_t launch, const TIn* at, int64_t ld, int kc, int rows, int rows_pad,
                                bool is_a, bool* finite, int* field) {
  constexpr int kTypeB = int(sizeof(TIn)) * 4 + Traits<TIn>::kBParts;  // A's: -kTypeB
  if (Reused::Panel* p = FindPanel(r, launch, at, ld, kc, rows, is_a ? -kTypeB : kTypeB)) {
    *finite = p->finite;
    if (!is_a) *field = p->b_field;
    return r.ring + p->offset;
  }
  const int k_tiles = (kc + Traits<TIn>::kTileK - 1) / Traits<TIn>::kTileK;
  const int64_t bytes = int64_t(k_tiles) * (rows_pad / 16) * (is_a ? 1 : Traits<TIn>::kBParts) * kTileBytes;
  Reused::Panel* p = NewPanel(r, at, ld, kc, rows, is_a ? -kTypeB : kTypeB, bytes);
  if (!p) return nullptr;
  uint8_t* into = r.ring + p->offset;
  *finite = is_a ? PackA(into, at, ld, rows, rows_pad, kc) : PackB(into, at, ld, kc, rows, rows_pad, field);
  p->finite = *finite;
  if (!is_a) p->b_field = *field;
  return into;
}

// One block's products over k_tiles tiles of k into tiles 0-3: A's row tiles at a0 and a1 (16 rows
// `a_row` bytes apart, the next k tile `a_step` bytes on), B's column tiles packed at b0 and b1. Gemm
// and KLoop both run it: the same instructions in the same order give the same sums.
template <typename TIn>
__attribute__((always_inline)) inline void BlockProducts(int k_tiles, const uint8_t* a0, const uint8_t* a1,
                                                         int64_t a_row, int64_t a_step, const uint8_t* b0,
                                                         const uint8_t* b1) {
  for (int kt = 0; kt < k_tiles; ++kt) {  // loads between the products they feed
    const int64_t off = int64_t(kt) * kTileBytes, a_off = kt * a_step;
    if constexpr (__is_same(TIn, half)) {  // B's hi tile, then its lo tile, per column tile
      const int64_t b_off = off * 2;
      PTO_AMX_LOAD(4, a0 + a_off, a_row);
      PTO_AMX_LOAD(5, a1 + a_off, a_row);
      PTO_AMX_LOAD(6, b0 + b_off, 64);
      PTO_AMX_DOT("tdpbf16ps", 0, 4, 6);
      PTO_AMX_DOT("tdpbf16ps", 2, 5, 6);
      PTO_AMX_LOAD(7, b0 + b_off + kTileBytes, 64);
      PTO_AMX_DOT("tdpbf16ps", 0, 4, 7);
      PTO_AMX_DOT("tdpbf16ps", 2, 5, 7);
      PTO_AMX_LOAD(6, b1 + b_off, 64);
      PTO_AMX_DOT("tdpbf16ps", 1, 4, 6);
      PTO_AMX_DOT("tdpbf16ps", 3, 5, 6);
      PTO_AMX_LOAD(7, b1 + b_off + kTileBytes, 64);
      PTO_AMX_DOT("tdpbf16ps", 1, 4, 7);
      PTO_AMX_DOT("tdpbf16ps", 3, 5, 7);
      continue;
    }
    PTO_AMX_LOAD(4, a0 + a_off, a_row);
    PTO_AMX_LOAD(6, b0 + off, 64);
    if constexpr (__is_same(TIn, int8_t)) {
      PTO_AMX_DOT("tdpbssd", 0, 4, 6);
      PTO_AMX_LOAD(7, b1 + off, 64);
      PTO_AMX_DOT("tdpbssd", 1, 4, 7);
      PTO_AMX_LOAD(5, a1 + a_off, a_row);
      PTO_AMX_DOT("tdpbssd", 2, 5, 6);
      PTO_AMX_DOT("tdpbssd", 3, 5, 7);
    } else {
      PTO_AMX_DOT("tdpbf16ps", 0, 4, 6);
      PTO_AMX_LOAD(7, b1 + off, 64);
      PTO_AMX_DOT("tdpbf16ps", 1, 4, 7);
      PTO_AMX_LOAD(5, a1 + a_off, a_row);
      PTO_AMX_DOT("tdpbf16ps", 2, 5, 6);
      PTO_AMX_DOT("tdpbf16ps", 3, 5, 7);
    }
  }
}

// C[m, n] = init + A x B (C may be init.data: matmul_acc in place). Returns the rows of C it wrote: m,
// or fewer when the tile unit cannot give the fp32 path's results for the others, which the caller runs
// on the fp32 path: 0 when fp16 inputs hold an infinity or a NaN; for bf16 inputs too small for the tile
// unit (detail::Bf16DotIsExact) the rows from the first row block whose A values are. B's magnitudes are
// taken as PackB reads it, A's a row block at a time as its products start (C's rows depend on their own
// rows of A only, and the scan leaves the lines in cache for the tile loads); with several k panels all
// of A first (C is written in the last panel only).
// When C is whole blocks, a block's sums start from its prior in the tiles (none, int32 sums, which wrap
// the same in any order, or, with one k panel, an fp32 prior block that PriorFitsTiles) and are stored
// straight to C (int8 1024^3 K loop 11% faster; bf16 128^3 matmul_acc in place 13%, Intel Xeon).
// Otherwise they start from zero and, once finished, FinishBlock adds the prior and writes C's window.
template <typename TIn, typename TC>
inline int Gemm(int m, int n, int k, const TIn* a, int64_t lda, const TIn* b, int64_t ldb, TC* c, int64_t ldc,
                const Init<TC>& init, const Reuse& reuse) {
  using Tr = Traits<TIn>;
  Scratch& s = detail::Pinned(ThreadScratch());
  Reused& reused = detail::Pinned(ThreadReused());
  TC* const acc_base = reinterpret_cast<TC*>(s.acc);
  const int m_pad = RoundUp(m, kM), n_pad = RoundUp(n, kN);
  // k per panel: whole tiles, and both packed panels within kPanelBytes
  const int widest = m_pad > n_pad ? m_pad : n_pad;
  int kc_max = kPanelBytes / (widest * Tr::kBytesPerK) / Tr::kTileK * Tr::kTileK;
  if (kc_max < Tr::kTileK) kc_max = Tr::kTileK;
  if constexpr (__is_same(TIn, half)) {  // a later panel can no longer turn back: look at everything first
    if (k > kc_max && !(AllFinite(a, lda, m, k) && AllFinite(b, ldb, k, n))) return 0;
  }
  const bool a_checked_first = __is_same(TIn, bfloat16) && k > kc_max;
  int a_field = 0, b_field = 0;  // bf16: exponent fields of all of A's smallest magnitude, of the panel of B's
  if (a_checked_first) {
    a_field = MinExponentFieldOf(reused, reuse.a_launch, reinterpret_cast<const bfloat16*>(a), lda, m, k);
    if (a_field == 0) return 0;
  }
  const bool whole = m == m_pad && n == n_pad;
  const bool in_tiles = whole && (!init.data || (__is_same(TC, int32_t) && init.row_stride != 0));
  const bool fp32_prior_blocks = whole && __is_same(TC, float) && init.data && init.row_stride != 0 && k <= kc_max;
  const Config config;
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
  bool pending = false;  // a block's sums wait in s.block[!parity] for FinishBlock
  int parity = 0, pending_i = 0, pending_j = 0;
  for (int k0 = 0; k0 < k; k0 += kc_max) {
    const int kc = k - k0 < kc_max ? k - k0 : kc_max;
    const int k_tiles = (kc + Tr::kTileK - 1) / Tr::kTileK;
    // A's and B's packed panels: kept from earlier in the launch, packed now and kept, or packed into
    // Scratch. A's tiles are loaded straight from A when it cannot be kept and needs no zeros (whole
    // blocks of rows, whole tiles of k) and no conversion (not fp16). A kept copy is faster even so:
    // A's rows in GM are often a power of two apart, and the tile loads' lines then crowd a few L1
    // sets (a 1024^3 bf16 K loop 15% faster from contiguous A, Intel Xeon).
    auto packed = [&](const TIn* at, int64_t ld, int rows, int rows_pad, uint64_t launch, uint8_t* scratch, bool is_a,
                      bool* finite, int* field) -> const uint8_t* {
      if (launch) {
        if (const uint8_t* kept = KeptPanel(reused, launch, at, ld, kc, rows, rows_pad, is_a, finite, field)) return kept;
      }
      if (is_a && !__is_same(TIn, half) && rows == rows_pad && kc % Tr::kTileK == 0) return nullptr;
      *finite = is_a ? PackA(scratch, at, ld, rows, rows_pad, kc) : PackB(scratch, at, ld, kc, rows, rows_pad, field);
      return scratch;
    };
    bool a_finite = true, b_finite = true;
    int no_field = 0;
    const uint8_t* const b_packed =
        packed(b + int64_t(k0) * ldb, ldb, n, n_pad, reuse.b_launch, s.b, false, &b_finite, &b_field);
    const uint8_t* const a_packed = packed(a + k0, lda, m, m_pad, reuse.a_launch, s.a, true, &a_finite, &no_field);
    const bool direct = a_packed == nullptr;
    const bool finite = a_finite && b_finite;
    if (!finite || (a_checked_first && !detail::Bf16DotIsExact(a_field, b_field))) {  // before any write to C
      __asm__ volatile("tilerelease" ::);
      return 0;
    }
    const bool first = k0 == 0, last = k0 + kc >= k;
    const int64_t packed_stride = int64_t(k_tiles) * kTileBytes;  // to the next row (column) tile
    const int64_t b_stride = packed_stride * Tr::kBParts;
    // A tile: 16 rows of 64 bytes, `a_row` bytes apart; the next k tile `a_step` bytes on
    const uint8_t* const a_bytes = direct ? reinterpret_cast<const uint8_t*>(a + k0) : a_packed;
    const int64_t a_row = direct ? lda * int64_t(sizeof(TIn)) : 64;
    const int64_t a_step = direct ? 64 : kTileBytes;
    const int64_t a_tile_rows = direct ? 16 * a_row : packed_stride;  // to the next row tile
    for (int i0 = 0; i0 < m_pad; i0 += kM) {
      if constexpr (__is_same(TIn, bfloat16)) {
        if (!a_checked_first &&
            !detail::Bf16DotIsExact(MinExponentFieldOf(reused, reuse.a_launch, a + int64_t(i0) * lda, lda,
                                                       m - i0 < kM ? m - i0 : kM, k),
                                    b_field)) {
          if (pending) FinishBlock(reinterpret_cast<const TC*>(s.block[!parity]), c, ldc, init, m, n, pending_i, pending_j);
          __asm__ volatile("tilerelease" ::);
          return i0;
        }
      }
      const uint8_t* a0 = a_bytes + (i0 / 16) * a_tile_rows;
      const uint8_t* a1 = a0 + a_tile_rows;
      for (int j0 = 0; j0 < n_pad; j0 += kN) {
        const uint8_t* b0 = b_packed + (j0 / 16) * b_stride;
        const uint8_t* b1 = b0 + b_stride;
        TC* acc = acc_base + int64_t(i0) * n_pad + j0;
        const TC* prior = init.data ? init.data + int64_t(i0) * init.row_stride + j0 : nullptr;
        bool block_in_tiles = in_tiles;
        if constexpr (__is_same(TC, float)) {
          if (fp32_prior_blocks) block_in_tiles = PriorFitsTiles(prior, init.row_stride);
        }
        if (first && block_in_tiles && init.data) {
          LoadSums(prior, init.row_stride);
        } else if (first) {
          ZeroSums();
        } else {
          LoadSums(acc, n_pad);
        }
        BlockProducts<TIn>(k_tiles, a0, a1, a_row, a_step, b0, b1);
        if (!last) {
          StoreSums(acc, n_pad);
          continue;
        }
        if (block_in_tiles) {
          StoreSums(c + int64_t(i0) * ldc + j0, ldc);
          continue;
        }
        // The block's sums go to C one block later: reading lines the tile unit has just stored stalls,
        // and finishing the previous block here overlaps the products still in flight.
        TC* block = reinterpret_cast<TC*>(s.block[parity]);
        if (pending) FinishBlock(reinterpret_cast<const TC*>(s.block[!parity]), c, ldc, init, m, n, pending_i, pending_j);
        StoreSums(block, kN);
        pending = true;
        pending_i = i0;
        pending_j = j0;
        parity = !parity;
      }
    }
  }
  if (pending) FinishBlock(reinterpret_cast<const TC*>(s.block[!parity]), c, ldc, init, m, n, pending_i, pending_j);
  __asm__ volatile("tilerelease" ::);
  return m;
}

// fuse_k_loops (docs/device.md#k-loops): C[m, n] = the sum over steps s of A_s[m, kt] x B_s[kt, n]
// (A_s at a + s * a_step, B_s at b + s * b_step), as Gemm called for step 0 without a prior and for
// each later step with C as its prior (matmul, then matmul_acc in place) leaves it, with each block's
// sums kept in the tiles over several steps instead of going through C between steps.
// The same bits when every step's Gemm would keep its prior in the tiles: whole blocks, one k panel
// per step, and inputs whose products and partial sums are all multiples of 2^-103 (bf16: exponents
// of A's and B's smallest magnitudes adding up to -89 or more, so each prior passes PriorFitsTiles; fp16
// parts: multiples of 2^-48) and never sent to another path (fp16: finite). Returns false, having
// written nothing, otherwise, or when the steps' packed panels cannot all be kept for the launch
// (Reuse): the caller runs the steps as written.
// `also` (rows ld_also apart), when given, gets the finished sums too, from the last chunk's tiles: the
// window of the store that follows the loop (fuse_k_loops), which so never holds a partial sum.
template <typename TIn, typename TC>
inline bool KLoop(int m, int n, int kt, int steps, const TIn* a, int64_t lda, int64_t a_step, const TIn* b,
                  int64_t ldb, int64_t b_step, TC* c, int64_t ldc, uint64_t launch, TC* also = nullptr,
                  int64_t ld_also = 0) {
  using Tr = Traits<TIn>;
  constexpr int kMaxSteps = kKLoopMaxSteps;
  if (launch == 0 || steps < 1 || steps > kMaxSteps || m % kM || n % kN || kt % Tr::kTileK || !Fits<TIn>(m, n)) {
    return false;
  }
  const int widest = m > n ? m : n;
  if (kt > kPanelBytes / (widest * Tr::kBytesPerK) / Tr::kTileK * Tr::kTileK) return false;  // Gemm's kc_max
  Reused& reused = detail::Pinned(ThreadReused());
  const uint8_t* a_panels[kMaxSteps];
  const uint8_t* b_panels[kMaxSteps];
  for (int step = 0; step < steps; ++step) {
    const TIn* a_s = a + step * a_step;
    bool a_finite = true, b_finite = true;
    int b_field = 0, unused = 0;
    b_panels[step] = KeptPanel(reused, launch, b + step * b_step, ldb, kt, n, n, false, &b_finite, &b_field);
    a_panels[step] = KeptPanel(reused, launch, a_s, lda, kt, m, m, true, &a_finite, &unused);
    if (!a_panels[step] || !b_panels[step] || !a_finite || !b_finite) return false;
    if constexpr (__is_same(TIn, bfloat16)) {
      if (b_field == 0) return false;
      for (int i0 = 0; i0 < m; i0 += kM) {
        const int a_field = MinExponentFieldOf(reused, launch, a_s + int64_t(i0) * lda, lda, kM, kt);
        if (a_field == 0 || (a_field - 127) + (b_field - 127) < -89) return false;
      }
    }
  }
  const int k_tiles = kt / Tr::kTileK;
  const int64_t packed_stride = int64_t(k_tiles) * kTileBytes, b_stride = packed_stride * Tr::kBParts;
  const Config config;
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
  // Steps in chunks whose A row panels (16 KiB) stay in L1 while the chunk's blocks along the row read
  // them; between chunks the sums go through C as between Gemm calls (exact). 1024^3 K loops of
  // 128-deep steps in chunks rather than one pass: bf16 (two steps) 8% faster, int8 (four) ~13%
  // (Intel Xeon).
  const int in_l1 = int((16 * kTileBytes) / (2 * packed_stride));  // steps of a 16 KiB A row panel
  const int chunk = in_l1 > 1 ? in_l1 : 1;
  for (int c0 = 0; c0 < steps; c0 += chunk) {
    const int c1 = c0 + chunk < steps ? c0 + chunk : steps;
    for (int i0 = 0; i0 < m; i0 += kM) {
      for (int j0 = 0; j0 < n; j0 += kN) {
        TC* out = c + int64_t(i0) * ldc + j0;
        if (c0 == 0) {
          ZeroSums();
        } else {
          LoadSums(out, ldc);
        }
        for (int step = c0; step < c1; ++step) {
          const uint8_t* a0 = a_panels[step] + (i0 / 16) * packed_stride;
          const uint8_t* b0 = b_panels[step] + (j0 / 16) * b_stride;
          BlockProducts<TIn>(k_tiles, a0, a0 + packed_stride, 64, kTileBytes, b0, b0 + b_stride);
        }
        StoreSums(out, ldc);
        if (also && c1 == steps) StoreSums(also + int64_t(i0) * ld_also + j0, ld_also);
      }
    }
  }
  __asm__ volatile("tilerelease" ::);
  return true;
}

#undef PTO_AMX_LOAD
#undef PTO_AMX_STORE
#undef PTO_AMX_DOT
#undef PTO_AMX_ZERO

}  // namespace amx
#endif

// C[m, n] = init + A[m, k] x B[k, n]. TIn: half, bfloat16, float (TC float) or int8_t (TC int32_t).
// C may be init.data itself (matmul_acc in place); it must not overlap A or B.
// kFp32: bf16 on the fp32 path (inputs the host's bf16 dot products would flush, Bf16DotIsExact).
template <typename TIn, typename TC, bool kFp32 = false>
inline void GemmBody(int m, int n, int k, const TIn* a, int64_t lda, const TIn* b, int64_t ldb, TC* c, int64_t ldc,
                     Init<TC> init, Reuse reuse = {}) {
  static_assert(__is_same(TC, float) ? !__is_same(TIn, int8_t) : (__is_same(TC, int32_t) && __is_same(TIn, int8_t)),
                "fp16/bf16/fp32 accumulate in fp32, int8 in int32");
  using namespace detail;
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // an empty sum: C = init
    Tile zero{};
    for (int i0 = 0; i0 < m; i0 += kMR) {
      for (int j0 = 0; j0 < n; j0 += kNR) {
        StoreTile(zero, c + i0 * ldc + j0, ldc, m - i0 < kMR ? m - i0 : kMR, n - j0 < kNR ? n - j0 : kNR, true, init,
                  i0, j0);
      }
    }
    return;
  }
#if PTO_GEMM_AMX
  if constexpr ((__is_same(TIn, bfloat16) && !kFp32) || __is_same(TIn, half) ||
                (PTO_GEMM_AMX_INT8 && __is_same(TIn, int8_t))) {
    if (amx::Fits<TIn>(m, n) && amx::Enabled()) {
      const int done = amx::Gemm(m, n, k, a, lda, b, ldb, c, ldc, init, reuse);
      if (done == m) return;
      if constexpr (__is_same(TIn, bfloat16)) {  // the rest on the fp32 path (fp16: all of it, below)
        const Init<TC> rest{init.data ? init.data + int64_t(done) * init.row_stride : nullptr, init.row_stride};
        return GemmBody<TIn, TC, true>(m - done, n, k, a + int64_t(done) * lda, lda, b, ldb, c + int64_t(done) * ldc,
                                       ldc, rest);
      }
    }
  }
#endif
#if PTO_GEMM_BF16_DOT
  if constexpr (__is_same(TIn, bfloat16) && !kFp32) {
    if (!Bf16DotIsExact(MinExponentField(a, lda, m, k), MinExponentField(b, ldb, k, n))) {
      return GemmBody<TIn, TC, true>(m, n, k, a, lda, b, ldb, c, ldc, init);
    }
  }
#endif
  Scratch& s = Pinned(ThreadScratch());
#if PTO_GEMM_BF16_DOT
  constexpr bool kBf16Dot = __is_same(TIn, bfloat16) && !kFp32;
#else
  constexpr bool kBf16Dot = false;
#endif
#if PTO_GEMM_INT8_DOT
  constexpr bool kInt8Dot = __is_same(TIn, int8_t);
#else
  constexpr bool kInt8Dot = false;
#endif
  [[maybe_unused]] uint32_t* const a_words = reinterpret_cast<uint32_t*>(s.a);
  [[maybe_unused]] uint32_t* const b_words = reinterpret_cast<uint32_t*>(s.b);
  for (int j0 = 0; j0 < n; j0 += kNC) {
    const int nc = n - j0 < kNC ? n - j0 : kNC;
    for (int k0 = 0; k0 < k; k0 += kKC) {
      const int kc = k - k0 < kKC ? k - k0 : kKC;
      // B's panels of kNR columns: fp32 rows of k, or words of k pairs (bf16) or quads (int8).
      const int64_t panel_stride = int64_t(kNR) * (kBf16Dot ? (kc + 1) / 2 : kInt8Dot ? (kc + 3) / 4 : kc);
#if PTO_GEMM_BF16_DOT
      if constexpr (kBf16Dot) PackPairsB(b_words, b + k0 * ldb + j0, ldb, kc, nc);
#endif
#if PTO_GEMM_INT8_DOT
      if constexpr (kInt8Dot) PackQuadsB(b_words, s.b_sums, b + k0 * ldb + j0, ldb, kc, nc);
#endif
      if constexpr (!kBf16Dot && !kInt8Dot) PackB(s.b, b + k0 * ldb + j0, ldb, kc, nc);
      for (int i0 = 0; i0 < m; i0 += kMR) {
        const int mr = m - i0 < kMR ? m - i0 : kMR;
        const TIn* a_block = a + i0 * lda + k0;
#if PTO_GEMM_BF16_DOT
        if constexpr (kBf16Dot) PackPairsA(a_words, a_block, lda, mr, kc);
#endif
#if PTO_GEMM_INT8_DOT
        if constexpr (kInt8Dot) PackQuadsA(reinterpret_cast<uint8_t*>(s.a), a_block, lda, mr, kc);
#endif
        // fp32 A of whole kMR rows is read where it is; other dtypes and a last partial row block are
        // converted / zero-padded into PackA's panel.
        [[maybe_unused]] const bool a_direct = __is_same(TIn, float) && mr == kMR;
        if constexpr (!kBf16Dot && !kInt8Dot) {
          if (!a_direct) PackA(s.a, a_block, lda, mr, kc);
        }
        for (int jr = 0; jr < nc; jr += kNR) {
          const int width = nc - jr < kNR ? nc - jr : kNR;
          TC* out = c + i0 * ldc + j0 + jr;
#if PTO_GEMM_BF16_DOT
          if constexpr (kBf16Dot) {
            const Tile t = KernelBf16Dot(kc, a_words, b_words + (jr / kNR) * panel_stride);
            StoreTile(t, out, ldc, mr, width, k0 == 0, init, i0, j0 + jr);
          }
#endif
#if PTO_GEMM_INT8_DOT
          if constexpr (kInt8Dot) {
            const Tile t = KernelInt8DotOf(width, kc, reinterpret_cast<const uint8_t*>(s.a),
                                           b_words + (jr / kNR) * panel_stride, s.b_sums + jr);
            StoreTile<TC, true>(t, out, ldc, mr, width, k0 == 0, init, i0, j0 + jr);
          }
#endif
          if constexpr (!kBf16Dot && !kInt8Dot) {
            const float* ap = a_direct ? reinterpret_cast<const float*>(a_block) : s.a;
            const Tile t = KernelFmaOf(width, kc, ap, a_direct ? lda : kc, s.b + (jr / kNR) * panel_stride);
            StoreTile(t, out, ldc, mr, width, k0 == 0, init, i0, j0 + jr);
          }
        }
      }
    }
  }
}

// fuse_k_loops' steps as one GEMM (amx::KLoop), or false (nothing written) where the tile unit would
// not run them (no AMX, a host refusing it) or cannot give their bits.
template <typename TIn, typename TC>
inline bool KLoopBody(int m, int n, int kt, int steps, const TIn* a, int64_t lda, int64_t a_step, const TIn* b,
                      int64_t ldb, int64_t b_step, TC* c, int64_t ldc, uint64_t launch, TC* also,
                      int64_t ld_also) {
#if PTO_GEMM_AMX
  if constexpr (__is_same(TIn, bfloat16) || __is_same(TIn, half) || (PTO_GEMM_AMX_INT8 && __is_same(TIn, int8_t))) {
    if (amx::Enabled()) {
      return amx::KLoop(m, n, kt, steps, a, lda, a_step, b, ldb, b_step, c, ldc, launch, also, ld_also);
    }
  }
#endif
  (void)m, (void)n, (void)kt, (void)steps, (void)a, (void)lda, (void)a_step, (void)b, (void)ldb, (void)b_step;
  (void)c, (void)ldc, (void)launch, (void)also, (void)ld_also;
  return false;
}

// The routines precompiled once per compiler, flags and headers (routines/*.cpp; docs/jit.md#precompiled-
// device-headers-and-routines): a cube kernel compiled with PTO_EXTERN_ROUTINES calls them instead of
// compiling GemmBody itself, the same code from the same source and flags.
extern "C" {
void pto_gemm_f16(int m, int n, int k, const half* a, int64_t lda, const half* b, int64_t ldb, float* c, int64_t ldc,
                  const float* init, int64_t init_row_stride, uint64_t a_launch, uint64_t b_launch);
void pto_gemm_bf16(int m, int n, int k, const bfloat16* a, int64_t lda, const bfloat16* b, int64_t ldb, float* c,
                   int64_t ldc, const float* init, int64_t init_row_stride, uint64_t a_launch, uint64_t b_launch);
void pto_gemm_f32(int m, int n, int k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                  int64_t ldc, const float* init, int64_t init_row_stride, uint64_t a_launch, uint64_t b_launch);
void pto_gemm_i8(int m, int n, int k, const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, int32_t* c,
                 int64_t ldc, const int32_t* init, int64_t init_row_stride, uint64_t a_launch, uint64_t b_launch);
bool pto_k_loop_f16(int m, int n, int kt, int steps, const half* a, int64_t lda, int64_t a_step, const half* b,
                    int64_t ldb, int64_t b_step, float* c, int64_t ldc, uint64_t launch, float* also, int64_t ld_also);
bool pto_k_loop_bf16(int m, int n, int kt, int steps, const bfloat16* a, int64_t lda, int64_t a_step, const bfloat16* b,
                     int64_t ldb, int64_t b_step, float* c, int64_t ldc, uint64_t launch, float* also,
                     int64_t ld_also);
bool pto_k_loop_i8(int m, int n, int kt, int steps, const int8_t* a, int64_t lda, int64_t a_step, const int8_t* b,
                   int64_t ldb, int64_t b_step, int32_t* c, int64_t ldc, uint64_t launch, int32_t* also,
                   int64_t ld_also);
}

template <typename TIn, typename TC>
inline void Gemm(int m, int n, int k, const TIn* a, int64_t lda, const TIn* b, int64_t ldb, TC* c, int64_t ldc,
                 Init<TC> init = {}, Reuse reuse = {}) {
#if defined(PTO_EXTERN_ROUTINES)
  if constexpr (__is_same(TIn, half)) {
    pto_gemm_f16(m, n, k, a, lda, b, ldb, c, ldc, init.data, init.row_stride, reuse.a_launch, reuse.b_launch);
  } else if constexpr (__is_same(TIn, bfloat16)) {
    pto_gemm_bf16(m, n, k, a, lda, b, ldb, c, ldc, init.data, init.row_stride, reuse.a_launch, reuse.b_launch);
  } else if constexpr (__is_same(TIn, float)) {
    pto_gemm_f32(m, n, k, a, lda, b, ldb, c, ldc, init.data, init.row_stride, reuse.a_launch, reuse.b_launch);
  } else {
    pto_gemm_i8(m, n, k, a, lda, b, ldb, c, ldc, init.data, init.row_stride, reuse.a_launch, reuse.b_launch);
  }
#else
  GemmBody(m, n, k, a, lda, b, ldb, c, ldc, init, reuse);
#endif
}

// C[m, n] = the sum over `steps` steps of A_s[m, kt] x B_s[kt, n] as matmul and then matmul_acc calls
// would leave it (KLoopBody), and the same sums in `also` when given; or false with nothing written.
template <typename TIn, typename TC>
inline bool KLoop(int m, int n, int kt, int steps, const TIn* a, int64_t lda, int64_t a_step, const TIn* b,
                  int64_t ldb, int64_t b_step, TC* c, int64_t ldc, uint64_t launch, TC* also = nullptr,
                  int64_t ld_also = 0) {
#if defined(PTO_EXTERN_ROUTINES)
  if constexpr (__is_same(TIn, half)) {
    return pto_k_loop_f16(m, n, kt, steps, a, lda, a_step, b, ldb, b_step, c, ldc, launch, also, ld_also);
  } else if constexpr (__is_same(TIn, bfloat16)) {
    return pto_k_loop_bf16(m, n, kt, steps, a, lda, a_step, b, ldb, b_step, c, ldc, launch, also, ld_also);
  } else if constexpr (__is_same(TIn, int8_t)) {
    return pto_k_loop_i8(m, n, kt, steps, a, lda, a_step, b, ldb, b_step, c, ldc, launch, also, ld_also);
  } else {
    return false;  // fp32: no tile unit path
  }
#else
  return KLoopBody(m, n, kt, steps, a, lda, a_step, b, ldb, b_step, c, ldc, launch, also, ld_also);
#endif
}

}  // namespace pto::gemm

#pragma GCC pop_options
