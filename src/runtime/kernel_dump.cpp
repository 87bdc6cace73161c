#include "kernel_dump.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include <unistd.h>

#include "pypto_pro/hw_tables.h"

namespace pypto_pro::runtime {

namespace {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: renormalise
    int e = -1;
    uint32_t m = man;
    do {
      m <<= 1;
      ++e;
    } while (!(m & 0x400));
    bits = sign | uint32_t(112 - e) << 23 | ((m & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

int64_t ElementBytes(int dtype) { return hw::kDataTypes[dtype].bits / 8; }

// The element at `p` of dtype as a double (integers exactly up to 2^53), and whether it is a float.
double ValueAt(const uint8_t* p, int dtype) {
  switch (dtype) {
    case PTO_DTYPE_Bool: return *p ? 1 : 0;
    case PTO_DTYPE_Int8: return double(int8_t(*p));
    case PTO_DTYPE_UInt8: return double(*p);
    case PTO_DTYPE_Int16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case PTO_DTYPE_UInt16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case PTO_DTYPE_Int32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case PTO_DTYPE_UInt32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case PTO_DTYPE_Int64: { int64_t v; std::memcpy(&v, p, 8); return double(v); }
    case PTO_DTYPE_UInt64: { uint64_t v; std::memcpy(&v, p, 8); return double(v); }
    case PTO_DTYPE_FP16: { uint16_t v; std::memcpy(&v, p, 2); return HalfToFloat(v); }
    case PTO_DTYPE_BF16: { uint16_t v; std::memcpy(&v, p, 2); return Bf16ToFloat(v); }
    default: { float v; std::memcpy(&v, p, 4); return v; }
  }
}

std::string FormatValue(const uint8_t* p, int dtype) {
  char buf[64];
  if (dtype == PTO_DTYPE_Bool) return *p ? "True" : "False";
  if (dtype == PTO_DTYPE_Int64) {
    int64_t v;
    std::memcpy(&v, p, 8);
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  } else if (dtype == PTO_DTYPE_UInt64) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v));
  } else if (hw::kDataTypes[dtype].is_float) {
    std::snprintf(buf, sizeof buf, "%.6g", ValueAt(p, dtype));
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", ValueAt(p, dtype));
  }
  return buf;
}

// Calls `visit(element pointer)` over the window in row-major order, `row_end()` after each last-dim
// run.
template <typename Visit, typename RowEnd>
void ForEachElement(const PtoDump& d, Visit visit, RowEnd row_end) {
  const int64_t bytes = ElementBytes(d.dtype);
  int64_t index[PTO_FAULT_MAX_RANK] = {};
  for (int i = 0; i < d.rank; ++i) {
    if (d.shape[i] <= 0) return;
  }
  for (;;) {
    int64_t element = 0;
    for (int i = 0; i < d.rank - 1; ++i) element += index[i] * d.stride[i];
    const uint8_t* row = static_cast<const uint8_t*>(d.data) + element * bytes;
    for (int64_t c = 0; c < d.shape[d.rank - 1]; ++c) visit(row + c * d.stride[d.rank - 1] * bytes);
    row_end();
    int axis = d.rank - 2;
    while (axis >= 0 && ++index[axis] == d.shape[axis]) index[axis--] = 0;
    if (axis < 0) return;
  }
}

std::string ListText(const int64_t* values, int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]";
}

// numpy's descr of the stored dtype; bf16 is stored as float32 (numpy has no bf16).
const char* NpyDescr(int dtype) {
  switch (dtype) {
    case PTO_DTYPE_Bool: return "|b1";
    case PTO_DTYPE_Int8: return "|i1";
    case PTO_DTYPE_UInt8: return "|u1";
    case PTO_DTYPE_Int16: return "<i2";
    case PTO_DTYPE_UInt16: return "<u2";
    case PTO_DTYPE_Int32: return "<i4";
    case PTO_DTYPE_UInt32: return "<u4";
    case PTO_DTYPE_Int64: return "<i8";
    case PTO_DTYPE_UInt64: return "<u8";
    case PTO_DTYPE_FP16: return "<f2";
    default: return "<f4";
  }
}

// A JSON string literal.
std::string Json(const std::string& text) {
  std::string out = "\"";
  for (unsigned char ch : text) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += char(ch);
    } else if (ch < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += char(ch);
    }
  }
  return out + "\"";
}

std::atomic<uint64_t> g_sequence{0};

std::mutex& IndexMutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}

}  // namespace

std::string FormatDump(const PtoDump& d, const std::string& location) {
  std::string text;
  if (d.flag) text += std::string(d.flag) + "\n";
  text += location + "dump_data " + d.what + " '" + (d.name ? d.name : "?") + "' " +
          hw::kDataTypes[d.dtype].name + " " + ListText(d.shape, d.rank) + " at " + ListText(d.offsets, d.rank) + ":\n";
  std::string row;
  ForEachElement(
      d, [&](const uint8_t* p) { row += (row.empty() ? "" : " ") + FormatValue(p, d.dtype); },
      [&] {
        text += "  " + row + "\n";
        row.clear();
      });
  return text;
}

std::string WriteDump(const std::string& dir, const PtoDump& d, const std::string& kernel, int block,
                      const std::string& core, int line) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return "cannot create " + dir + ": " + error.message();
  const uint64_t seq = g_sequence.fetch_add(1);
  char file[64];
  std::snprintf(file, sizeof file, "%d-%06llu.npy", int(::getpid()), static_cast<unsigned long long>(seq));
  // The .npy: header, then the window's elements in C order (bf16 widened to float32).
  std::string shape = "(";
  for (int i = 0; i < d.rank; ++i) shape += std::to_string(d.shape[i]) + (d.rank == 1 || i + 1 < d.rank ? "," : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + NpyDescr(d.dtype) + "', 'fortran_order': False, 'shape': " +
                       shape + ", }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out.push_back(char(header.size() & 0xff));
  out.push_back(char(header.size() >> 8));
  out += header;
  const int64_t bytes = ElementBytes(d.dtype);
  ForEachElement(
      d,
      [&](const uint8_t* p) {
        if (d.dtype == PTO_DTYPE_BF16) {
          const float f = float(ValueAt(p, d.dtype));
          out.append(reinterpret_cast<const char*>(&f), sizeof f);
        } else {
          out.append(reinterpret_cast<const char*>(p), size_t(bytes));
        }
      },
      [] {});
  const fs::path path = fs::path(dir) / file;
  {
    std::ofstream f(path, std::ios::binary);
    f.write(out.data(), std::streamsize(out.size()));
    if (!f) return "cannot write " + path.string();
  }
  std::string json = "{\"file\": " + Json(file) + ", \"kernel\": " + Json(kernel) +
                     ", \"name\": " + Json(d.name ? d.name : "?") + ", \"what\": " + Json(d.what) +
                     ", \"flag\": " + (d.flag ? Json(d.flag) : std::string("null")) +
                     ", \"dtype\": " + Json(hw::kDataTypes[d.dtype].name) +
                     ", \"block\": " + std::to_string(block) + ", \"core\": " + Json(core) +
                     ", \"line\": " + std::to_string(line) + ", \"offsets\": " + ListText(d.offsets, d.rank) +
                     ", \"shape\": " + ListText(d.shape, d.rank) + ", \"pid\": " + std::to_string(::getpid()) +
                     ", \"seq\": " + std::to_string(seq) + "}\n";
  std::lock_guard<std::mutex> lock(IndexMutex());
  std::ofstream index(fs::path(dir) / "index.jsonl", std::ios::app);
  index << json;
  index.flush();
  return index ? "" : "cannot write " + (fs::path(dir) / "index.jsonl").string();
}

}  // namespace pypto_pro::runtime
