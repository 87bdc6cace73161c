// Types of IR values: scalars, GM tensors, tiles and tile groups.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pypto_pro/ir/dtype.h"

namespace pypto_pro::ir {

// Declared once in hw_tables.h, shared with the device headers and the runtime.
using hw::Layout;
using hw::MemorySpace;
using hw::Pipe;

std::string_view Name(MemorySpace memory);  // "Vec"
std::string_view Name(Layout layout);       // "ND"
std::string_view Name(Pipe pipe);           // "MTE2"
std::optional<MemorySpace> MemorySpaceFromName(std::string_view name);
std::optional<Layout> LayoutFromName(std::string_view name);
std::optional<Pipe> PipeFromName(std::string_view name);

// One tensor dimension as declared in pl.Tensor[[...], dtype].
enum class DimKind : uint8_t { kFixed, kStatic, kDynamic };
struct Dim {
  DimKind kind = DimKind::kDynamic;
  int64_t value = -1;     // the size for kFixed, the bound value for kStatic (-1 while unbound)
  int32_t dyn_slot = -1;  // for kDynamic: index of its int32 launcher argument
  bool IsConstant() const { return value >= 0; }
};

struct TensorType {
  DataType dtype = DataType::kFP32;
  std::vector<Dim> dims;
  // A view made in the kernel (pl.make_tensor) rather than a parameter: its dims are kFixed (a
  // constant shape entry) or kDynamic without a launcher slot (dyn_slot -1, read from the view).
  bool view = false;
};

// pl.TileType: a static 1-D or 2-D shape placed in one local memory.
struct TileType {
  DataType dtype = DataType::kFP32;
  std::vector<int64_t> shape;        // 1 or 2 entries, all > 0
  MemorySpace memory = MemorySpace::kVec;
  Layout layout = Layout::kND;
  std::vector<int64_t> valid_shape;  // same rank as shape; -1 = set at run time (initially full)
  int pad = 0;                       // pl.TilePad: 0 null, 1 zero, 2 max, 3 min (what fills the invalid region)
  int compact = 0;                   // pl.TileType(compact=): 0 null, 1 normal (a fractal tile's partial window)

  int64_t Rows() const { return shape.size() == 2 ? shape[0] : 1; }
  int64_t Cols() const { return shape.back(); }
  int64_t Elements() const { return Rows() * Cols(); }
  int64_t Bytes() const { return Elements() * ir::Bytes(dtype); }
  bool operator==(const TileType& o) const {
    return dtype == o.dtype && shape == o.shape && memory == o.memory && layout == o.layout &&
           valid_shape == o.valid_shape && pad == o.pad && compact == o.compact;
  }
  std::string ToString() const;  // Tile[[128, 128], fp16, Vec]
  // Why a linear element offset (getval, setval, tile[i, j]) cannot address this tile's elements in
  // the NPU's byte order, or "" when it can: an NZ (ZN) tile's columns (rows) must fill 32-byte blocks.
  std::string ElementOffsetProblem() const;
};

// A TilingData dataclass as a C struct: fields in declaration order, natural alignment.
struct StructField {
  std::string name;
  DataType dtype = DataType::kInt64;  // int -> kInt64, float -> kFP32, bool -> kBool
  int count = 0;                      // 0: a scalar field; N: an array T[N]
  int64_t offset = 0;
};

struct StructType {
  std::string name;
  std::vector<StructField> fields;
  int64_t size = 0;
  int64_t align = 1;

  // Lays the fields out like a C compiler (and ctypes) would; offsets are filled in.
  static StructType Layout(std::string name, std::vector<StructField> fields);
  const StructField* Find(const std::string& field) const;
};

// kPtr: a raw GM pointer (pl.Ptr[dtype]): an address in one launch buffer; `dtype` is its element type.
enum class TypeKind : uint8_t { kScalar, kTensor, kTile, kTileGroup, kTuple, kStruct, kPtr };

// The type of an IR value. Tensor/tile payloads are shared, immutable.
struct Type {
  TypeKind kind = TypeKind::kScalar;
  DataType dtype = DataType::kInt32;  // scalar dtype, or element dtype of tensor/tile
  std::shared_ptr<const TensorType> tensor;
  std::shared_ptr<const TileType> tile;  // for kTile and kTileGroup
  std::shared_ptr<const StructType> strct;  // for kStruct

  static Type Scalar(DataType dtype) { return Type{TypeKind::kScalar, dtype, nullptr, nullptr, nullptr}; }
  static Type Tensor(TensorType t);
  static Type Tile(TileType t);
  static Type TileGroup(TileType t);
  static Type Tuple() { return Type{TypeKind::kTuple, DataType::kInt32, nullptr, nullptr, nullptr}; }
  static Type Struct(StructType t);
  static Type Ptr(DataType dtype) { return Type{TypeKind::kPtr, dtype, nullptr, nullptr, nullptr}; }

  bool IsScalar() const { return kind == TypeKind::kScalar; }
  bool IsTile() const { return kind == TypeKind::kTile; }
  bool IsTensor() const { return kind == TypeKind::kTensor; }
  bool IsPtr() const { return kind == TypeKind::kPtr; }
  std::string ToString() const;
};

}  // namespace pypto_pro::ir
