#include "kernel_printf.h"

#include <cstdio>
#include <mutex>

#include "pypto_pro/support/printf_format.h"

namespace pypto_pro::runtime {

namespace {

// Lines of all cores and launches go out one write at a time.
std::mutex& StdoutMutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}

void WriteStdout(const std::string& text) {
  std::lock_guard<std::mutex> lock(StdoutMutex());
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// The value as C sees an integer of the argument's own width: %d of a uint32 0xffffffff is -1,
// %u and %x of an int32 -1 are 4294967295 and ffffffff; a bool promotes to the int 0 or 1.
int64_t AsSigned(const PtoArg& a) {
  if (a.kind == PTO_ARG_FLOAT) return int64_t(a.value.f);
  if (a.kind == PTO_ARG_BOOL) return a.value.i != 0;
  if (a.bits == 0 || a.bits >= 64) return a.value.i;
  const unsigned shift = 64 - a.bits;
  return int64_t(a.value.u << shift) >> shift;
}

uint64_t AsUnsigned(const PtoArg& a) {
  if (a.kind == PTO_ARG_FLOAT) return uint64_t(a.value.f);
  if (a.kind == PTO_ARG_BOOL) return a.value.i != 0;
  if (a.bits == 0 || a.bits >= 64) return a.value.u;
  return a.value.u & ((uint64_t(1) << a.bits) - 1);
}

double AsDouble(const PtoArg& a) {
  switch (a.kind) {
    case PTO_ARG_FLOAT: return a.value.f;
    case PTO_ARG_UINT: return double(a.value.u);
    default: return double(a.value.i);
  }
}

template <typename T>
void Append(std::string& out, const std::string& spec, T value) {
  char buf[128];
  int n = std::snprintf(buf, sizeof buf, spec.c_str(), value);
  if (n < 0) return;
  if (size_t(n) < sizeof buf) {
    out.append(buf, size_t(n));
    return;
  }
  std::string big(size_t(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), spec.c_str(), value);
  out.append(big.data(), size_t(n));
}

// Literal text between conversions, with %% as one percent sign.
void AppendLiteral(std::string& out, std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '%' && i + 1 < text.size() && text[i + 1] == '%') ++i;
  }
}

}  // namespace

std::string FormatKernelText(const char* fmt, const PtoArg* args, int nargs) {
  std::string_view format = fmt ? fmt : "";
  ParsedFormat parsed = ParseFormat(format);
  if (!parsed.error.empty()) return std::string(format);  // the compiler refuses these; print them raw
  std::string out;
  size_t at = 0;
  for (size_t n = 0; n < parsed.conversions.size(); ++n) {
    const FormatConversion& c = parsed.conversions[n];
    AppendLiteral(out, format.substr(at, c.begin - at));
    at = c.end;
    std::string_view spec = format.substr(c.begin, c.end - c.begin);
    if (int(n) >= nargs) {
      out += spec;
      continue;
    }
    // flags, width and precision as written; the length modifier for the 64-bit value.
    std::string head(spec.substr(0, spec.size() - 1));
    switch (c.conversion) {
      case 'd':
      case 'i': Append(out, head + "lld", static_cast<long long>(AsSigned(args[n]))); break;
      case 'u': Append(out, head + "llu", static_cast<unsigned long long>(AsUnsigned(args[n]))); break;
      case 'x': Append(out, head + "llx", static_cast<unsigned long long>(AsUnsigned(args[n]))); break;
      default: Append(out, head + "f", AsDouble(args[n])); break;
    }
  }
  AppendLiteral(out, format.substr(at));
  return out;
}

void KernelOutput::Write(std::string_view prefix, std::string_view text) {
  pending_.append(text);
  size_t end = pending_.rfind('\n');
  if (end == std::string::npos) return;
  std::string lines;
  size_t start = 0;
  while (start <= end) {
    size_t eol = pending_.find('\n', start);
    lines.append(prefix);
    lines.append(pending_, start, eol + 1 - start);
    start = eol + 1;
  }
  pending_.erase(0, end + 1);
  WriteStdout(lines);
}

void KernelOutput::Flush(std::string_view prefix) {
  if (pending_.empty()) return;
  std::string line(prefix);
  line += pending_;
  line += '\n';
  pending_.clear();
  WriteStdout(line);
}

}  // namespace pypto_pro::runtime
