// pl.printf on the host: the runtime formats what the device passes (a format and typed scalars)
// and prints whole lines, each prefixed with its core, so lines of different cores never mix.
#pragma once

#include <string>
#include <string_view>

#include "pypto_pro/abi.h"

namespace pypto_pro::runtime {

// The text of `fmt` with its conversions (see support/printf_format.h) filled from `args`, as C's
// printf would print the scalars' own types.
std::string FormatKernelText(const char* fmt, const PtoArg* args, int nargs);

// One core's output not printed yet: text after its last newline.
class KernelOutput {
 public:
  // Prints every line `text` completes, each after `prefix`, in one write to stdout.
  void Write(std::string_view prefix, std::string_view text);
  // Prints an unterminated last line (the core has finished).
  void Flush(std::string_view prefix);
  bool empty() const { return pending_.empty(); }

 private:
  std::string pending_;
};

}  // namespace pypto_pro::runtime
