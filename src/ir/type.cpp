#include "pypto_pro/ir/type.h"

#include <algorithm>
#include <array>
#include <sstream>

namespace pypto_pro::ir {

namespace {
template <typename Enum, size_t N>
std::optional<Enum> FromName(const char* const (&names)[N], std::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return Enum(i);
  }
  return std::nullopt;
}
}  // namespace

std::string_view Name(MemorySpace memory) { return hw::kMemoryNames[size_t(memory)]; }
std::string_view Name(Layout layout) { return hw::kLayoutNames[size_t(layout)]; }
std::string_view Name(Pipe pipe) { return hw::kPipeNames[size_t(pipe)]; }
std::optional<MemorySpace> MemorySpaceFromName(std::string_view name) {
  return FromName<MemorySpace>(hw::kMemoryNames, name);
}
std::optional<Layout> LayoutFromName(std::string_view name) { return FromName<Layout>(hw::kLayoutNames, name); }
std::optional<Pipe> PipeFromName(std::string_view name) { return FromName<Pipe>(hw::kPipeNames, name); }

std::string TileType::ElementOffsetProblem() const {
  if (layout != Layout::kNZ && layout != Layout::kZN) return "";
  const bool nz = layout == Layout::kNZ;
  const int64_t blocked = nz ? Cols() : Rows();
  if (blocked * ir::Bytes(dtype) % 32 == 0) return "";
  return std::string("the ") + (nz ? "columns" : "rows") + " of an " + std::string(Name(layout)) +
         " tile fill 32-byte blocks on the NPU, and " + std::to_string(blocked) + " " + std::string(Name(dtype)) +
         " elements do not";
}

std::string TileType::ToString() const {
  std::ostringstream os;
  os << "Tile[[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "], " << Name(dtype) << ", " << Name(memory);
  if (layout != Layout::kND) os << ", " << Name(layout);
  if (pad != 0) os << ", pad=" << (pad == 1 ? "zero" : pad == 2 ? "max" : "min");
  if (compact != 0) os << ", compact=" << compact;
  bool full = true;  // -1 (set at run time, initially the full shape) prints like the default
  for (size_t i = 0; i < valid_shape.size(); ++i) full = full && (valid_shape[i] == shape[i] || valid_shape[i] < 0);
  if (!full) {
    os << ", valid=[";
    for (size_t i = 0; i < valid_shape.size(); ++i) os << (i ? ", " : "") << valid_shape[i];
    os << "]";
  }
  os << "]";
  return os.str();
}

Type Type::Tensor(TensorType t) {
  DataType dtype = t.dtype;
  return Type{TypeKind::kTensor, dtype, std::make_shared<const TensorType>(std::move(t)), nullptr, nullptr};
}
Type Type::Tile(TileType t) {
  DataType dtype = t.dtype;
  return Type{TypeKind::kTile, dtype, nullptr, std::make_shared<const TileType>(std::move(t)), nullptr};
}
Type Type::TileGroup(TileType t) {
  DataType dtype = t.dtype;
  return Type{TypeKind::kTileGroup, dtype, nullptr, std::make_shared<const TileType>(std::move(t)), nullptr};
}
Type Type::Struct(StructType t) {
  return Type{TypeKind::kStruct, DataType::kInt64, nullptr, nullptr, std::make_shared<const StructType>(std::move(t))};
}

StructType StructType::Layout(std::string name, std::vector<StructField> fields) {
  StructType t;
  t.name = std::move(name);
  int64_t offset = 0;
  for (StructField& f : fields) {
    int64_t size = Bytes(f.dtype);
    offset = (offset + size - 1) / size * size;  // scalars of 1, 4 or 8 bytes align to their size
    f.offset = offset;
    offset += size * (f.count > 0 ? f.count : 1);
    t.align = std::max(t.align, size);
  }
  t.size = (offset + t.align - 1) / t.align * t.align;
  t.fields = std::move(fields);
  return t;
}

const StructField* StructType::Find(const std::string& field) const {
  for (const StructField& f : fields) {
    if (f.name == field) return &f;
  }
  return nullptr;
}

std::string Type::ToString() const {
  switch (kind) {
    case TypeKind::kScalar: return std::string(Name(dtype));
    case TypeKind::kTensor: {
      std::ostringstream os;
      os << (tensor->view ? "View[[" : "Tensor[[");
      int dyn = 0;
      for (size_t i = 0; i < tensor->dims.size(); ++i) {
        const Dim& d = tensor->dims[i];
        if (i) os << ", ";
        if (d.kind == DimKind::kFixed) os << d.value;
        else if (tensor->view) os << "?";
        else if (d.kind == DimKind::kStatic) os << "STATIC" << (d.IsConstant() ? "=" + std::to_string(d.value) : "");
        else os << "DYNAMIC#" << (d.dyn_slot >= 0 ? d.dyn_slot : dyn++);
      }
      os << "], " << Name(dtype) << "]";
      return os.str();
    }
    case TypeKind::kTile: return tile->ToString();
    case TypeKind::kTileGroup: return "Group[" + tile->ToString() + "]";
    case TypeKind::kTuple: return "tuple";
    case TypeKind::kStruct: return strct->name;
    case TypeKind::kPtr: return "Ptr[" + std::string(Name(dtype)) + "]";
  }
  return "?";
}

}  // namespace pypto_pro::ir
