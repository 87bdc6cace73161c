#include "pypto_pro/jit/signature.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace pypto_pro::jit {

namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[(c >> 4) & 0xf];
      out += kHex[c & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string PlName(ir::DataType dtype) { return std::string(ir::Info(dtype).pl_name); }

std::string ValueList(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

}  // namespace

TilingKeySchema TilingKeySchema::Declare(const std::string& kernel_name, const std::string& class_name,
                                         std::vector<Field> fields, const std::vector<std::string>& reserved_names) {
  const std::string where = "kernel '" + kernel_name + "': tiling_key";
  auto fail = [&](const std::string& message) { throw std::invalid_argument(where + message); };
  if (fields.empty()) fail(" class " + class_name + " declares no TilingKeyField");
  int offset = 0;
  for (Field& f : fields) {
    const std::string field = " field '" + f.name + "': ";
    if (f.bits <= 0) fail(field + "bits must be an int > 0, got " + std::to_string(f.bits));
    if (f.values.empty()) fail(field + "values must be a non-empty list of ints");
    if (std::set<int64_t>(f.values.begin(), f.values.end()).size() != f.values.size()) {
      fail(field + "values must be unique, got " + ValueList(f.values));
    }
    if (f.bits < 63 && f.values.size() > (uint64_t(1) << f.bits)) {
      fail(field + std::to_string(f.values.size()) + " values do not fit in " + std::to_string(f.bits) +
           " bit(s) (at most " + std::to_string(uint64_t(1) << f.bits) + ")");
    }
    if (std::find(reserved_names.begin(), reserved_names.end(), f.name) != reserved_names.end()) {
      fail(" field '" + f.name + "' clashes with the kernel parameter of that name");
    }
    f.offset = offset;
    offset += f.bits;
  }
  if (offset > 64) fail(" needs " + std::to_string(offset) + " bits; a TilingKey packs into at most 64");
  return TilingKeySchema{class_name, std::move(fields)};
}

uint64_t TilingKeySchema::Pack(const std::vector<int>& indices) const {
  uint64_t packed = 0;
  for (size_t i = 0; i < fields.size(); ++i) packed |= uint64_t(indices[i]) << fields[i].offset;
  return packed;
}

std::vector<int64_t> TilingKeySchema::Unpack(uint64_t packed) const {
  std::vector<int64_t> out;
  for (const Field& f : fields) {
    const uint64_t mask = f.bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << f.bits) - 1;
    out.push_back(f.values[size_t((packed >> f.offset) & mask)]);
  }
  return out;
}

std::string TilingKeySchema::Describe(const std::vector<int64_t>& values) const {
  std::string out = "{";
  for (size_t i = 0; i < fields.size(); ++i) out += (i ? ", " : "") + fields[i].name + ": " + std::to_string(values[i]);
  return out + "}";
}

std::vector<uint64_t> TilingKeySchema::Enumerate(
    const std::function<bool(const std::vector<int64_t>&)>& accept) const {
  std::vector<uint64_t> out;
  std::vector<int> index(fields.size(), 0);
  while (true) {
    uint64_t packed = Pack(index);
    if (accept(Unpack(packed))) out.push_back(packed);
    size_t f = 0;
    while (f < fields.size() && ++index[f] == int(fields[f].values.size())) index[f++] = 0;
    if (f == fields.size()) break;
  }
  std::sort(out.begin(), out.end());
  return out;
}

void KernelSignature::Check() const {
  if (params.size() > size_t(kMaxParams)) throw std::invalid_argument("a kernel takes at most 64 parameters");
  if (datatype && datatype->params.size() > size_t(kMaxDatatypeEntries)) {
    throw std::invalid_argument("a datatype schema names at most 16 parameters");
  }
}

std::vector<ir::LauncherSlot> KernelSignature::Slots() const {
  std::vector<ir::SlotParam> slots;
  for (const ParamSpec& p : params) {
    ir::SlotParam s;
    switch (p.kind) {
      case ParamKind::kTensor:
        s.kind = ir::SlotKind::kTensor;
        s.dynamic_dims = int(std::count(p.dims.begin(), p.dims.end(), kDynamicDim));
        break;
      case ParamKind::kScalar: s.kind = ir::SlotKind::kScalar; break;
      case ParamKind::kTiling: s.kind = ir::SlotKind::kTiling; break;
      case ParamKind::kPtr:
        s.kind = ir::SlotKind::kTensor;
        s.ptr = true;
        break;
    }
    slots.push_back(s);
  }
  return ir::LauncherSlots(slots);
}

Binding DecodeKey(const KernelSignature& sig, const SignatureKey& key) {
  Binding b;
  int next = 0;
  if (sig.tiling_key) {
    b.tiling_key = uint64_t(key.At(next++));
    std::vector<int64_t> values = sig.tiling_key->Unpack(*b.tiling_key);
    for (size_t i = 0; i < values.size(); ++i) b.tiling_values.emplace_back(sig.tiling_key->fields[i].name, values[i]);
  }
  if (sig.datatype) {
    const DatatypeSchema& dt = *sig.datatype;
    std::vector<bool> seen(dt.var_names.size(), false);
    for (size_t i = 0; i < dt.params.size(); ++i) {
      const ir::DataType dtype = ir::DataType(key.At(next++));
      b.datatype.emplace_back(dt.params[i], dtype);
      const size_t var = size_t(dt.var_of[i]);
      if (!seen[var]) b.variables.emplace_back(dt.var_names[var], dtype);
      seen[var] = true;
    }
  }
  for (const ParamSpec& p : sig.params) {
    if (p.kind != ParamKind::kTensor) continue;
    std::vector<int64_t> dims;
    const int64_t rest = p.HasRest() ? key.At(next++) : 0;
    for (int d = 0; d < p.DeclaredRank(); ++d) {
      if (p.dims[size_t(d)] == kStaticDim) dims.push_back(key.At(next++));
    }
    for (int64_t d = 0; d < rest; ++d) dims.push_back(key.At(next++));
    b.static_dims.emplace_back(p.name, std::move(dims));
  }
  return b;
}

std::string Binding::StaticSignature() const {
  std::string out;
  for (const auto& [name, dims] : static_dims) {
    if (dims.empty()) continue;
    out += (out.empty() ? "" : ";") + name + ":";
    for (size_t i = 0; i < dims.size(); ++i) out += (i ? "," : "") + std::to_string(dims[i]);
  }
  return out;
}

std::string Binding::DatatypeJson() const {
  if (datatype.empty()) return "";
  std::map<std::string, ir::DataType> sorted(datatype.begin(), datatype.end());
  std::string out = "{";
  for (const auto& [param, dtype] : sorted) {
    out += (out.size() > 1 ? "," : "") + JsonString(param) + ":" + JsonString(PlName(dtype));
  }
  return out + "}";
}

std::string Binding::DatatypeFile() const {
  auto object = [](const std::vector<std::pair<std::string, ir::DataType>>& entries) {
    std::map<std::string, ir::DataType> sorted(entries.begin(), entries.end());
    std::string out = "{\n";
    size_t i = 0;
    for (const auto& [name, dtype] : sorted) {
      out += "    " + JsonString(name) + ": " + JsonString(PlName(dtype)) + (++i < sorted.size() ? ",\n" : "\n");
    }
    return out + "  }";
  };
  return "{\n  \"datatype\": " + object(datatype) + ",\n  \"variables\": " + object(variables) + "\n}\n";
}

}  // namespace pypto_pro::jit
