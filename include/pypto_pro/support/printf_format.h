// The printf subset of pl.printf and pl.pto_assert (the public language's): conversions %d %i
// (signed), %u (unsigned), %x (hex) and %f (fp32), each with optional flags "-+ #0", a width and a
// precision; %% prints a percent sign. The compiler checks formats against it; the runtime formats
// with it, so both read a format the same way.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pypto_pro {

struct FormatConversion {
  size_t begin = 0;  // the '%' in the format
  size_t end = 0;    // one past the conversion character
  char conversion = 0;  // 'd', 'i', 'u', 'x' or 'f'
};

struct ParsedFormat {
  std::vector<FormatConversion> conversions;  // in order; %% is not one
  std::string error;                          // empty when the format is valid
};

ParsedFormat ParseFormat(std::string_view format);

inline constexpr std::string_view kSupportedConversions = "%d %i %u %x %f (and %% for a percent sign)";

}  // namespace pypto_pro
