// The GEMMs of matmul / matmul_acc / matmul_bias and of fused K loops, one per input element type.
#include "pypto_pro/routines/routines.h"

namespace g = pto::gemm;

PTO_ROUTINE void pto_gemm_f16(int m, int n, int k, const pto::half* a, int64_t lda, const pto::half* b, int64_t ldb,
                              float* c, int64_t ldc, const float* init, int64_t init_row_stride, uint64_t a_launch,
                              uint64_t b_launch) {
  g::GemmBody(m, n, k, a, lda, b, ldb, c, ldc, g::Init<float>{init, init_row_stride}, g::Reuse{a_launch, b_launch});
}

PTO_ROUTINE void pto_gemm_bf16(int m, int n, int k, const pto::bfloat16* a, int64_t lda, const pto::bfloat16* b,
                               int64_t ldb, float* c, int64_t ldc, const float* init, int64_t init_row_stride,
                               uint64_t a_launch, uint64_t b_launch) {
  g::GemmBody(m, n, k, a, lda, b, ldb, c, ldc, g::Init<float>{init, init_row_stride}, g::Reuse{a_launch, b_launch});
}

PTO_ROUTINE void pto_gemm_f32(int m, int n, int k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                              int64_t ldc, const float* init, int64_t init_row_stride, uint64_t a_launch,
                              uint64_t b_launch) {
  g::GemmBody(m, n, k, a, lda, b, ldb, c, ldc, g::Init<float>{init, init_row_stride}, g::Reuse{a_launch, b_launch});
}

PTO_ROUTINE void pto_gemm_i8(int m, int n, int k, const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb,
                             int32_t* c, int64_t ldc, const int32_t* init, int64_t init_row_stride, uint64_t a_launch,
                             uint64_t b_launch) {
  g::GemmBody(m, n, k, a, lda, b, ldb, c, ldc, g::Init<int32_t>{init, init_row_stride}, g::Reuse{a_launch, b_launch});
}

PTO_ROUTINE bool pto_k_loop_f16(int m, int n, int kt, int steps, const pto::half* a, int64_t lda, int64_t a_step,
                                const pto::half* b, int64_t ldb, int64_t b_step, float* c, int64_t ldc,
                                uint64_t launch, float* also, int64_t ld_also) {
  return g::KLoopBody(m, n, kt, steps, a, lda, a_step, b, ldb, b_step, c, ldc, launch, also, ld_also);
}

PTO_ROUTINE bool pto_k_loop_bf16(int m, int n, int kt, int steps, const pto::bfloat16* a, int64_t lda, int64_t a_step,
                                 const pto::bfloat16* b, int64_t ldb, int64_t b_step, float* c, int64_t ldc,
                                 uint64_t launch, float* also, int64_t ld_also) {
  return g::KLoopBody(m, n, kt, steps, a, lda, a_step, b, ldb, b_step, c, ldc, launch, also, ld_also);
}

PTO_ROUTINE bool pto_k_loop_i8(int m, int n, int kt, int steps, const int8_t* a, int64_t lda, int64_t a_step,
                               const int8_t* b, int64_t ldb, int64_t b_step, int32_t* c, int64_t ldc,
                               uint64_t launch, int32_t* also, int64_t ld_also) {
  return g::KLoopBody(m, n, kt, steps, a, lda, a_step, b, ldb, b_step, c, ldc, launch, also, ld_also);
}
