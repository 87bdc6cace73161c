#include "pypto_pro/support/printf_format.h"

#include <cctype>

namespace pypto_pro {

namespace {
constexpr std::string_view kFlags = "-+ #0";
constexpr std::string_view kConversions = "diuxf";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
}  // namespace

ParsedFormat ParseFormat(std::string_view format) {
  ParsedFormat out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') continue;
    if (i + 1 < format.size() && format[i + 1] == '%') {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < format.size() && kFlags.find(format[j]) != std::string_view::npos) ++j;
    while (j < format.size() && IsDigit(format[j])) ++j;
    if (j < format.size() && format[j] == '.') {
      ++j;
      if (j >= format.size() || !IsDigit(format[j])) {
        out.error = "the precision of '" + std::string(format.substr(i, j - i)) + "' needs digits after the '.'";
        return out;
      }
      while (j < format.size() && IsDigit(format[j])) ++j;
    }
    if (j >= format.size()) {
      out.error = "the format ends inside the conversion '" + std::string(format.substr(i)) + "'";
      return out;
    }
    if (kConversions.find(format[j]) == std::string_view::npos) {
      bool printable = std::isprint(static_cast<unsigned char>(format[j]));
      std::string shown = printable ? "'" + std::string(format.substr(i, j + 1 - i)) + "'"
                                    : "with character code " + std::to_string(static_cast<unsigned char>(format[j]));
      out.error = "unsupported conversion " + shown + "; supported: " + std::string(kSupportedConversions);
      return out;
    }
    out.conversions.push_back({i, j + 1, format[j]});
    i = j;
  }
  return out;
}

}  // namespace pypto_pro
