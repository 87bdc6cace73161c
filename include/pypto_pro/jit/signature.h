// The kernel signature as the JIT sees it, described once: the parameters (as the front end read
// their annotations), the TilingKey and datatype schemas, the integer key of a compile signature and
// what a key binds (STATIC dim values, TilingKey values, dtypes). The launch path builds keys from
// arguments, the compile path decodes them into the binding the parser specialises on, and the
// artefact names come from the same binding.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pypto_pro/ir/dtype.h"
#include "pypto_pro/ir/launcher_slots.h"

namespace pypto_pro::jit {

constexpr int kMaxParams = 64;
constexpr int kMaxDatatypeEntries = 16;
// Dim codes of a tensor parameter (positive: a fixed size).
constexpr int64_t kStaticDim = -1, kDynamicDim = -2, kRestDims = -3;

// kPtr: a pl.Ptr[dtype] parameter, launched with a tensor whose buffer its views read and write.
enum class ParamKind : uint8_t { kTensor, kScalar, kTiling, kPtr };

struct TilingFieldSpec {
  std::string name;
  ir::DataType dtype;  // kInt64, kFP32 or kBool
  int count;           // 0: a scalar field, N: an array T[N]
  size_t offset;       // in the C struct
};

struct ParamSpec {
  std::string name;
  ParamKind kind = ParamKind::kTensor;
  ir::DataType dtype = ir::DataType::kFP32;  // tensors (unless dt_entry >= 0), pointers' elements, scalars
  std::vector<int64_t> dims;  // tensors: fixed sizes or kStaticDim / kDynamicDim / a trailing kRestDims
  int dt_entry = -1;          // tensors and pointers named in the datatype schema: its entry gives the
                              // argument's dtype
  std::vector<TilingFieldSpec> fields;  // TilingData
  size_t tiling_size = 0;

  bool HasRest() const { return !dims.empty() && dims.back() == kRestDims; }
  int DeclaredRank() const { return int(dims.size()) - (HasRest() ? 1 : 0); }
};

// A TilingKey class: fields packed from bit 0 in definition order, each holding the index of its
// value. Declare() checks a class's declaration with the messages the user sees.
struct TilingKeySchema {
  struct Field {
    std::string name;
    int bits = 0;
    std::vector<int64_t> values;
    int offset = 0;
  };
  std::string class_name;
  std::vector<Field> fields;

  // Throws std::invalid_argument naming the kernel and the field at fault.
  static TilingKeySchema Declare(const std::string& kernel_name, const std::string& class_name,
                                 std::vector<Field> fields, const std::vector<std::string>& reserved_names);
  // The packed key of one value index per field.
  uint64_t Pack(const std::vector<int>& indices) const;
  // The field values a packed key selects, in field order.
  std::vector<int64_t> Unpack(uint64_t packed) const;
  // "{Op: 10, Scale: 4}"
  std::string Describe(const std::vector<int64_t>& values) const;
  // Every packed key whose values `accept` takes, ascending.
  std::vector<uint64_t> Enumerate(const std::function<bool(const std::vector<int64_t>&)>& accept) const;
};

// datatype={param: variable}: the parameters (signature order) and the variable each names.
struct DatatypeSchema {
  std::vector<std::string> params;
  std::vector<int> var_of;  // entry -> index into var_names
  std::vector<std::string> var_names;
};

struct KernelSignature {
  std::string name;
  std::vector<ParamSpec> params;
  std::optional<TilingKeySchema> tiling_key;
  std::optional<DatatypeSchema> datatype;

  // Throws std::invalid_argument when the description breaks a limit (64 parameters, 16 datatype entries).
  void Check() const;
  // Where each parameter's launcher slots are (ir/launcher_slots.h), for the launch path.
  std::vector<ir::LauncherSlot> Slots() const;
};

// The integer key of a compile signature: the packed TilingKey, one dtype code per datatype
// entry, then per tensor in parameter order the number of dims its '...' covers (when it has one)
// and the values of its STATIC dims (the '...' ones included).
struct SignatureKey {
  int64_t values[16];
  int count = 0;
  std::vector<int64_t> overflow;
  void Push(int64_t v) {
    if (count < 16) values[count] = v;
    else overflow.push_back(v);
    ++count;
  }
  int64_t At(int i) const { return i < 16 ? values[i] : overflow[size_t(i - 16)]; }
  bool operator==(const SignatureKey& o) const {
    if (count != o.count) return false;
    for (int i = 0; i < count && i < 16; ++i) {
      if (values[i] != o.values[i]) return false;
    }
    return overflow == o.overflow;
  }
};
struct SignatureKeyHash {
  size_t operator()(const SignatureKey& k) const {
    uint64_t h = 1469598103934665603ull ^ uint64_t(k.count);
    for (int i = 0; i < k.count; ++i) h = (h ^ uint64_t(k.At(i))) * 1099511628211ull;
    return size_t(h);
  }
};

// What one compile signature binds: the parser specialises the kernel on it.
struct Binding {
  std::vector<std::pair<std::string, std::vector<int64_t>>> static_dims;  // every tensor, in order
  std::optional<uint64_t> tiling_key;                                     // packed
  std::vector<std::pair<std::string, int64_t>> tiling_values;             // field -> value
  std::vector<std::pair<std::string, ir::DataType>> datatype;             // parameter -> dtype
  std::vector<std::pair<std::string, ir::DataType>> variables;            // datatype variable -> dtype

  // "x:128,64;y:128" over the tensors with STATIC dims: part of the artefact name.
  std::string StaticSignature() const;
  // {"x":"DT_FP16",...} sorted by parameter, compact; "" without a datatype schema.
  std::string DatatypeJson() const;
  // datatype.json of the artefact tree: the binding and its variables, indented.
  std::string DatatypeFile() const;
};

Binding DecodeKey(const KernelSignature& sig, const SignatureKey& key);

}  // namespace pypto_pro::jit
