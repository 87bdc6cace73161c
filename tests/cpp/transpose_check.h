// Transpose2D (data_movement.h) against an element-by-element transpose, shared by a test compiled
// for the host's vector unit (test_cube_ops.cpp) and one compiled portably (test_vector_ops.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "pypto_pro/device.h"

namespace pypto_pro::test_util {

template <typename T>
void ExpectTransposeMatchesElementwise(int rows, int cols, int in_stride, int out_stride) {
  std::vector<T> in(size_t(rows) * in_stride), out(size_t(cols) * out_stride), ref;
  std::mt19937 rng(uint32_t(rows * 131 + cols * 7 + int(sizeof(T))));
  for (T& x : in) {
    const uint64_t bits = (uint64_t(rng()) << 32) | rng();
    std::memcpy(&x, &bits, sizeof(T));
  }
  std::memset(out.data(), 0x5a, out.size() * sizeof(T));  // what the window leaves alone stays
  ref = out;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) ref[size_t(c) * out_stride + r] = in[size_t(r) * in_stride + c];
  }
  pto::detail::Transpose2D(out.data(), out_stride, in.data(), in_stride, rows, cols);
  EXPECT_EQ(std::memcmp(out.data(), ref.data(), out.size() * sizeof(T)), 0)
      << sizeof(T) << "-byte elements, " << rows << " x " << cols << ", strides " << in_stride << " / " << out_stride;
}

// Whole 16 x 16 blocks, edges of every width, and strides wider than the window.
inline void ExpectTransposesMatchElementwise() {
  for (int rows : {1, 15, 16, 17, 40, 128}) {
    for (int cols : {1, 16, 31, 48, 128}) {
      ExpectTransposeMatchesElementwise<pto::half>(rows, cols, cols + 3, rows + 5);
      ExpectTransposeMatchesElementwise<float>(rows, cols, cols, rows);
      ExpectTransposeMatchesElementwise<int32_t>(rows, cols, cols + 16, rows + 16);
      ExpectTransposeMatchesElementwise<int8_t>(rows, cols, cols, rows);
      ExpectTransposeMatchesElementwise<int64_t>(rows, cols, cols + 1, rows);
    }
  }
}

}  // namespace pypto_pro::test_util
