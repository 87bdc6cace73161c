// Line numbers that carry their file: a kernel's IR spans and the lines kernel.cpp hands the runtime
// are `file << kLineFileShift | line`. File 0 is the kernel's own file (so most lines are plain
// numbers); helpers inlined from other modules get 1, 2, ... (ir::Function::other_files,
// PtoKernelDesc::source_files).
#pragma once

#include <string>
#include <vector>

#include "pypto_pro/abi.h"

namespace pypto_pro {

inline constexpr int kLineFileShift = PTO_LINE_FILE_SHIFT;

inline int LineNumber(int encoded) { return encoded > 0 ? encoded & ((1 << kLineFileShift) - 1) : encoded; }
inline int LineFile(int encoded) { return encoded > 0 ? encoded >> kLineFileShift : 0; }

// The file of an encoded line, given the kernel's file and the others.
inline std::string LineFileName(int encoded, const std::string& kernel_file, const std::vector<std::string>& others) {
  const int file = LineFile(encoded);
  return file == 0 || size_t(file) > others.size() ? kernel_file : others[size_t(file - 1)];
}

}  // namespace pypto_pro
