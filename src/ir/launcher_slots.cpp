#include "pypto_pro/ir/launcher_slots.h"

#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

std::vector<LauncherSlot> LauncherSlots(const std::vector<SlotParam>& params) {
  std::vector<LauncherSlot> slots;
  for (SlotKind kind : {SlotKind::kTensor, SlotKind::kScalar}) {
    int index = 0;
    for (size_t p = 0; p < params.size(); ++p) {
      if (params[p].kind == kind) slots.push_back({kind, int(p), index++});
    }
  }
  int dyn = 0;
  for (size_t p = 0; p < params.size(); ++p) {
    if (params[p].kind != SlotKind::kTensor) continue;
    for (int d = 0; d < params[p].dynamic_dims; ++d) slots.push_back({SlotKind::kDynamicDim, int(p), dyn++});
  }
  int ptrs = 0;
  for (size_t p = 0; p < params.size(); ++p) {
    if (params[p].kind == SlotKind::kTensor && params[p].ptr) slots.push_back({SlotKind::kBufferBytes, int(p), ptrs++});
  }
  for (size_t p = 0; p < params.size(); ++p) {
    if (params[p].kind == SlotKind::kTiling) slots.push_back({SlotKind::kTiling, int(p), 0});
  }
  return slots;
}

std::vector<LauncherSlot> LauncherSlots(const Function& func) {
  std::vector<SlotParam> params;
  for (const Var& p : func.params) {
    SlotParam s;
    if (p->type.IsTensor()) {
      for (const Dim& d : p->type.tensor->dims) s.dynamic_dims += d.kind == DimKind::kDynamic ? 1 : 0;
    } else if (p->type.IsPtr()) {
      s.ptr = true;
    } else {
      s.kind = p->type.IsScalar() ? SlotKind::kScalar : SlotKind::kTiling;
    }
    params.push_back(s);
  }
  return LauncherSlots(params);
}

}  // namespace pypto_pro::ir
