// Compute on Vec tiles, pipe V (LANGUAGE.md section 5).
#include "op_tables.h"

namespace pypto_pro::ir {

namespace {

OpDef Elementwise(std::string_view name, std::string_view scalar_form, std::string_view device_fn,
                  std::string_view doc) {
  return OpDef{name, Pipe::kV, PipeRule::kFixed, WindowRule::kDestination,
               {{"out", OperandKind::kTile, Access::kWrite, kVecOnly},
                {"lhs", OperandKind::kTile, Access::kRead, kVecOnly},
                {"rhs", OperandKind::kTile, Access::kRead, kVecOnly}},
               true, kNumericDTypes, scalar_form, device_fn, {}, doc};
}

OpDef ElementwiseScalar(std::string_view name, std::string_view device_fn, std::string_view doc) {
  return OpDef{name, Pipe::kV, PipeRule::kFixed, WindowRule::kDestination,
               {{"out", OperandKind::kTile, Access::kWrite, kVecOnly},
                {"lhs", OperandKind::kTile, Access::kRead, kVecOnly},
                {"scalar", OperandKind::kScalar, Access::kRead}},
               true, kNumericDTypes, "", device_fn, {}, doc};
}

}  // namespace

void AddVectorOps(std::vector<OpDef>& ops) {
  ops.push_back(Elementwise("add", "adds", "pto::add", "out = lhs + rhs"));
  ops.push_back(Elementwise("sub", "subs", "pto::sub", "out = lhs - rhs"));
  ops.push_back(Elementwise("mul", "muls", "pto::mul", "out = lhs * rhs"));
  ops.push_back(Elementwise("div", "divs", "pto::div", "out = lhs / rhs"));
  ops.push_back(Elementwise("maximum", "maxs", "pto::maximum", "out = max(lhs, rhs)"));
  ops.push_back(Elementwise("minimum", "mins", "pto::minimum", "out = min(lhs, rhs)"));
  ops.push_back(ElementwiseScalar("adds", "pto::adds", "out = lhs + scalar"));
  ops.push_back(ElementwiseScalar("subs", "pto::subs", "out = lhs - scalar"));
  ops.push_back(ElementwiseScalar("muls", "pto::muls", "out = lhs * scalar"));
  ops.push_back(ElementwiseScalar("divs", "pto::divs", "out = lhs / scalar"));
  ops.push_back(ElementwiseScalar("maxs", "pto::maxs", "out = max(lhs, scalar)"));
  ops.push_back(ElementwiseScalar("mins", "pto::mins", "out = min(lhs, scalar)"));
}

}  // namespace pypto_pro::ir
