// The order of call_kernel's arguments, defined once for the code generator (which writes the
// launcher) and the launch path (which fills the 64-bit slots call_kernel_packed reads): every
// tensor and pointer in parameter order, every scalar, one int32 per DYNAMIC dim (parameter order,
// then axis order), the byte size of every pointer's buffer (parameter order), and the packed
// TilingData last.
#pragma once

#include <vector>

namespace pypto_pro::ir {

struct Function;

// kTensor: the data pointer of a tensor or pl.Ptr parameter; kBufferBytes: the byte size of a pl.Ptr
// parameter's buffer (what its views are checked against).
enum class SlotKind : unsigned char { kTensor, kScalar, kDynamicDim, kTiling, kBufferBytes };

// What the order needs to know of one parameter.
struct SlotParam {
  SlotKind kind = SlotKind::kTensor;  // kTensor, kScalar or kTiling
  int dynamic_dims = 0;               // tensors: how many of its dims are DYNAMIC
  bool ptr = false;                   // kTensor: a pl.Ptr parameter (its buffer's size follows the dims)
};

struct LauncherSlot {
  SlotKind kind;
  int param;  // the parameter's index in the signature
  int index;  // kDynamicDim: which of the launch's DYNAMIC dims (0, 1, ...); else its index within its kind
};

std::vector<LauncherSlot> LauncherSlots(const std::vector<SlotParam>& params);
std::vector<LauncherSlot> LauncherSlots(const Function& func);

}  // namespace pypto_pro::ir
