// The vector mask and the special registers (docs/language.md#vector-mask-and-special-registers):
// ops of the scalar pipe S without tile data, on the registers every core keeps (device_include/
// pypto_pro/registers.h). Their reads (pl.get_spr, pl.get_ctrl_spr, pl.get_saturation_flag) are
// kernel expressions (ir::RegisterRead), not ops.
#include <cstdio>

#include "op_checks.h"
#include "op_tables.h"
#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

namespace {

std::string Describe(const Expr& e) {
  if (!e->type.IsScalar()) return e->type.ToString();
  if (!e->IsConst()) return "a run-time " + e->type.ToString() + " scalar";
  if (e->type.dtype == DataType::kBool) return e->int_value ? "True" : "False";
  if (IsFloat(e->type.dtype)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", e->float_value);
    return std::string("the float ") + text;
  }
  return std::to_string(e->int_value);
}

// "bit 48", "bits 6..8"
std::string BitsText(int start, int end) {
  return start == end ? "bit " + std::to_string(start) : "bits " + std::to_string(start) + ".." + std::to_string(end);
}

bool IsInteger(const Expr& e) { return !IsFloat(e->type.dtype) && e->type.dtype != DataType::kBool; }

// set_vec_mask: each half is a 64-bit pattern, an int or a run-time integer scalar.
void CheckVecMask(const StmtNode& call) {
  for (size_t i = 0; i < 2; ++i) {
    if (IsInteger(call.args[i])) continue;
    Fail(ErrorKind::kType, OperandSpan(call, i),
         CallName(call) + ": " + OperandName(call, i) +
             " must be a 64-bit integer (an int or a run-time integer scalar), got " + Describe(call.args[i]));
  }
}

std::string WritableFields() {
  std::string s;
  for (const hw::CtrlField& f : hw::kCtrlWritable) {
    s += (s.empty() ? "" : ", ") + std::to_string(f.first) + (f.last > f.first ? ".." + std::to_string(f.last) : "");
  }
  return s;
}

// start_bit and end_bit (operands 0 and 1): compile-time CTRL bits, start_bit <= end_bit, the range
// inside one writable field. Returns {start, end}.
std::pair<int, int> WritableRange(const StmtNode& call) {
  int bits[2];
  for (size_t i = 0; i < 2; ++i) {
    const Expr& e = call.args[i];
    if (!e->IsConst() || !IsInteger(e)) {
      Fail(ErrorKind::kType, OperandSpan(call, i),
           CallName(call) + ": " + OperandName(call, i) + " must be a compile-time int (a CTRL bit, 0..63), got " +
               Describe(e));
    }
    if (e->int_value < 0 || e->int_value > 63) {
      Fail(ErrorKind::kValue, OperandSpan(call, i),
           CallName(call) + ": " + std::string(call.op->operands[i].name) + "=" + std::to_string(e->int_value) +
               " is not a bit of the 64-bit CTRL register (0..63)");
    }
    bits[i] = int(e->int_value);
  }
  if (bits[0] > bits[1]) {
    Fail(ErrorKind::kValue, call.span,
         CallName(call) + ": start_bit=" + std::to_string(bits[0]) + " is above end_bit=" + std::to_string(bits[1]));
  }
  for (const hw::CtrlField& f : hw::kCtrlWritable) {
    if (f.first <= bits[0] && bits[1] <= f.last) return {bits[0], bits[1]};
  }
  Fail(ErrorKind::kValue, call.span,
       CallName(call) + ": CTRL " + BitsText(bits[0], bits[1]) + (bits[0] == bits[1] ? " is" : " are") +
           " not writable; the writable fields are bits " + WritableFields() +
           " (a range inside 6..10, the others one bit each)");
}

void CheckResetCtrl(const StmtNode& call) { WritableRange(call); }

// set_ctrl_spr: the value (operand 2) is an integer that fits the field; a constant is checked here
// (with the encodings the hardware leaves undefined, where the write covers their whole field), a
// run-time one when it runs.
void CheckSetCtrl(const StmtNode& call) {
  const auto [start, end] = WritableRange(call);
  const Expr& value = call.args[2];
  if (!IsInteger(value)) {
    Fail(ErrorKind::kType, OperandSpan(call, 2),
         CallName(call) + ": 'value' must be an integer (an int or a run-time integer scalar), got " + Describe(value));
  }
  if (!value->IsConst()) return;
  const int width = end - start + 1;
  const int64_t max = (int64_t(1) << width) - 1;  // writable fields are at most 5 bits wide
  if (value->int_value < 0 || value->int_value > max) {
    Fail(ErrorKind::kValue, OperandSpan(call, 2),
         CallName(call) + ": value=" + std::to_string(value->int_value) + " does not fit CTRL " +
             BitsText(start, end) + ", a " + std::to_string(width) + "-bit field (0.." + std::to_string(max) + ")");
  }
  for (const hw::CtrlField& f : hw::kCtrlUndefined) {
    if (start > f.first || end < f.last) continue;
    if (((value->int_value >> (f.first - start)) & ((int64_t(1) << (f.last - f.first + 1)) - 1)) != f.value) continue;
    Fail(ErrorKind::kValue, OperandSpan(call, 2),
         CallName(call) + ": value=" + std::to_string(value->int_value) + " sets CTRL " + BitsText(f.first, f.last) +
             " to " + std::to_string(f.value) +
             ", an atomic encoding the hardware does not define (the NPU faults on it)");
  }
}

std::vector<std::string_view> SaturationModes() {
  std::vector<std::string_view> names;
  for (const hw::SaturationFlagRow& row : hw::kSaturationFlags) names.emplace_back(row.name);
  return names;
}

OpDef RegisterOp(std::string_view name, std::vector<OperandSpec> operands, std::string_view device_fn,
                 std::string_view doc, OpCheck check = nullptr) {
  OpDef op{name, Pipe::kS, PipeRule::kFixed, WindowRule::kNone, std::move(operands), false, kAllSupportedDTypes, "",
           device_fn, {}, doc};
  op.check = check;
  return op;
}

OperandSpec ScalarIn(std::string_view name) { return {name, OperandKind::kScalar, Access::kRead}; }

}  // namespace

void AddRegisterOps(std::vector<OpDef>& ops) {
  ops.push_back(RegisterOp("set_vec_mask", {ScalarIn("mask_high"), ScalarIn("mask_low")}, "pto::set_vec_mask",
                           "the 128-bit vector mask = mask_high:mask_low (in counting mode mask_low is an element "
                           "count)",
                           &CheckVecMask));
  ops.push_back(RegisterOp("set_mask_count", {}, "pto::set_mask_count",
                           "the vector mask counts: set_vec_mask's mask_low is the number of active elements"));
  ops.push_back(RegisterOp("set_mask_norm", {}, "pto::set_mask_norm",
                           "the vector mask is a bit mask again (the default)"));
  ops.push_back(RegisterOp("reset_mask", {}, "pto::reset_mask", "the vector mask = all ones (set_vec_mask(-1, -1))"));
  ops.push_back(RegisterOp("set_ctrl_spr", {ScalarIn("start_bit"), ScalarIn("end_bit"), ScalarIn("value")},
                           "pto::set_ctrl_spr", "CTRL bits start_bit..end_bit = value (a writable field)",
                           &CheckSetCtrl));
  ops.push_back(RegisterOp("reset_ctrl_spr", {ScalarIn("start_bit"), ScalarIn("end_bit")}, "pto::reset_ctrl_spr",
                           "CTRL bits start_bit..end_bit = their hardware default", &CheckResetCtrl));

  OpDef saturation = RegisterOp("set_saturation_flag", {}, "pto::set_saturation_flag",
                                "saturate (enable=True) or wrap the arithmetic class mode= of the vector functions "
                                "(its CTRL bit)");
  KwargSpec mode{"mode", AttrKind::kEnum, 0, SaturationModes()};
  mode.required = true;
  KwargSpec enable;
  enable.name = "enable";
  enable.kind = AttrKind::kBool;
  enable.required = true;
  saturation.kwargs = {mode, enable};
  ops.push_back(saturation);
}

}  // namespace pypto_pro::ir
