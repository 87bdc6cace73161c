// The vector mask and the special registers (docs/language.md#vector-mask-and-special-registers): the
// registry entries and their checks, the register reads of kernel expressions, and the device
// functions of device_include/pypto_pro/registers.h on a core context.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir_test_util.h"
#include "pypto_pro/device.h"
#include "pypto_pro/ir/stmt.h"

namespace pypto_pro {
namespace {

using ir::Builtin;
using ir::DataType;
using test_util::At;

ir::Stmt Build(const std::string& name, std::vector<ir::Expr> args,
               const std::map<std::string, ir::KwargValue>& kwargs = {}) {
  ir::Stmt s = ir::BuildOpCall(name, std::move(args), kwargs, At(5));
  if (s->op->check) s->op->check(*s);  // what the verifier runs
  return s;
}

ir::Expr Int(int64_t v) { return ir::IntConst(v, At(5, 20)); }

ErrorKind KindOf(const std::function<void()>& fn, std::string* message = nullptr) {
  try {
    fn();
  } catch (const CompileDiagnostic& d) {
    if (message) *message = d.what();
    return d.kind();
  }
  ADD_FAILURE() << "no diagnostic";
  return ErrorKind::kInternal;
}

TEST(RegisterRegistry, SettersAreScalarPipeOpsWithoutTileData) {
  for (const char* name : {"set_vec_mask", "set_mask_count", "set_mask_norm", "reset_mask", "set_ctrl_spr",
                           "reset_ctrl_spr", "set_saturation_flag"}) {
    const ir::OpDef* op = ir::FindOp(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_EQ(op->pipe, ir::Pipe::kS) << name;
    EXPECT_EQ(op->window, ir::WindowRule::kNone) << name;
    for (const ir::PlannedOp& planned : ir::PlannedOps()) EXPECT_NE(planned.name, name);
  }
  for (const char* name : {"get_spr", "get_ctrl_spr", "get_saturation_flag"}) {
    for (const ir::PlannedOp& planned : ir::PlannedOps()) EXPECT_NE(planned.name, name);
  }
  const ir::KwargSpec* mode = ir::FindOp("set_saturation_flag")->FindKwarg("mode");
  ASSERT_NE(mode, nullptr);
  ASSERT_EQ(mode->choices.size(), hw::CountOf(hw::kSaturationFlags));
  EXPECT_EQ(mode->choices[3], "CAST");
}

TEST(RegisterRegistry, CtrlChecks) {
  Build("set_ctrl_spr", {Int(6), Int(10), Int(0b10010)});  // atomic op type 2, operand dtype 2
  Build("set_ctrl_spr", {Int(7), Int(9), Int(3)});         // inside 6..10, partial: checked at run time
  Build("set_ctrl_spr", {Int(60), Int(60), Int(0)});
  Build("reset_ctrl_spr", {Int(45), Int(45)});
  std::string message;
  EXPECT_EQ(KindOf([] { Build("set_ctrl_spr", {Int(6), Int(8), Int(7)}); }, &message), ErrorKind::kValue);
  EXPECT_NE(message.find("sets CTRL bits 6..8 to 7"), std::string::npos) << message;
  EXPECT_EQ(KindOf([] { Build("set_ctrl_spr", {Int(49), Int(49), Int(0)}); }, &message), ErrorKind::kValue);
  EXPECT_NE(message.find("CTRL bit 49 is not writable"), std::string::npos) << message;
  EXPECT_EQ(KindOf([] { Build("set_ctrl_spr", {Int(53), Int(53), Int(2)}); }), ErrorKind::kValue);
  EXPECT_EQ(KindOf([] { Build("reset_ctrl_spr", {Int(11), Int(10)}); }), ErrorKind::kValue);
  EXPECT_EQ(KindOf([] { Build("set_ctrl_spr", {Int(48), Int(48), ir::FloatConst(1.0, At(5))}); }), ErrorKind::kType);
  EXPECT_EQ(KindOf([] { Build("set_vec_mask", {ir::BoolConst(true, At(5)), Int(0)}); }), ErrorKind::kType);
}

TEST(RegisterReads, TypesAndChecks) {
  EXPECT_EQ(ir::RegisterRead(Builtin::kSpr, {}, At(3))->type.dtype, DataType::kInt64);
  EXPECT_EQ(ir::BuiltinCall(Builtin::kSpr, At(3))->type.dtype, DataType::kInt64);
  ir::Expr field = ir::RegisterRead(Builtin::kCtrlSpr, {Int(0), Int(63)}, At(3));
  EXPECT_EQ(field->type.dtype, DataType::kInt64);
  EXPECT_EQ(ir::RegisterRead(Builtin::kSaturationFlag, {Int(2)}, At(3))->type.dtype, DataType::kBool);
  EXPECT_EQ(KindOf([] { ir::RegisterRead(Builtin::kCtrlSpr, {Int(0), Int(64)}, At(3)); }), ErrorKind::kValue);
  EXPECT_EQ(KindOf([] { ir::RegisterRead(Builtin::kCtrlSpr, {Int(9), Int(8)}, At(3)); }), ErrorKind::kValue);
  EXPECT_EQ(KindOf([] { ir::RegisterRead(Builtin::kSaturationFlag, {Int(4)}, At(3)); }), ErrorKind::kValue);
  EXPECT_EQ(KindOf([] { ir::RegisterRead(Builtin::kSpr, {Int(0)}, At(3)); }), ErrorKind::kType);
  ir::Function f;
  ir::Var n = test_util::MakeScalarVar(f, "n");
  EXPECT_EQ(KindOf([&] { ir::RegisterRead(Builtin::kCtrlSpr, {ir::VarRef(n), Int(3)}, At(3)); }), ErrorKind::kType);
}

struct RegisterFault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

PtoCoreCtx FreshCore() {
  static const PtoRuntimeApi api = {PTO_ABI_VERSION, nullptr, [](PtoCoreCtx*, int32_t, const PtoFaultDetail* d) {
                                      throw RegisterFault(std::string(d->op) + ": " + d->message);
                                    }};
  PtoCoreCtx ctx{};
  ctx.api = &api;
  PtoResetRegisters(&ctx);
  return ctx;
}

TEST(RegisterDevice, ResetValues) {
  PtoCoreCtx ctx = FreshCore();
  EXPECT_EQ(ctx.ctrl, 0x1000000000000008ull);
  EXPECT_EQ(ctx.vec_mask[0], ~uint64_t(0));
  EXPECT_EQ(ctx.vec_mask[1], ~uint64_t(0));
  EXPECT_EQ(ctx.mask_count, 0);
  EXPECT_EQ(pto::get_spr(ctx), 0);
  EXPECT_EQ(pto::get_ctrl_spr(ctx, 0, 63), int64_t(0x1000000000000008ll));
  // FLOAT, FLOAT8 and CAST saturate at reset (their bits are 0, inverted), INT does not
  EXPECT_TRUE(pto::get_saturation_flag(ctx, 0));
  EXPECT_TRUE(pto::get_saturation_flag(ctx, 1));
  EXPECT_FALSE(pto::get_saturation_flag(ctx, 2));
  EXPECT_TRUE(pto::get_saturation_flag(ctx, 3));
}

TEST(RegisterDevice, MaskCtrlAndSaturation) {
  PtoCoreCtx ctx = FreshCore();
  pto::set_vec_mask(ctx, 1, int32_t(-1), uint32_t(0xFFFFFFFFu));
  EXPECT_EQ(ctx.vec_mask[1], ~uint64_t(0));
  EXPECT_EQ(ctx.vec_mask[0], 0xFFFFFFFFull);
  pto::set_mask_count(ctx, 2);
  EXPECT_EQ(ctx.mask_count, 1);
  pto::reset_mask(ctx, 3);
  EXPECT_EQ(ctx.vec_mask[0], ~uint64_t(0));
  EXPECT_EQ(ctx.mask_count, 1);  // reset_mask keeps the mode
  pto::set_mask_norm(ctx, 4);
  EXPECT_EQ(ctx.mask_count, 0);

  pto::set_saturation_flag(ctx, 5, 3, 0);  // CAST off: its bit becomes 1
  EXPECT_EQ(pto::get_ctrl_spr(ctx, 59, 59), 1);
  EXPECT_FALSE(pto::get_saturation_flag(ctx, 3));
  pto::set_saturation_flag(ctx, 6, 2, 1);  // INT on: its bit becomes 1
  EXPECT_EQ(pto::get_ctrl_spr(ctx, 53, 53), 1);
  pto::set_ctrl_spr(ctx, 7, 6, 10, int64_t(0b10010));
  EXPECT_EQ(pto::get_ctrl_spr(ctx, 6, 10), 0b10010);
  pto::reset_ctrl_spr(ctx, 8, 6, 10);
  pto::reset_ctrl_spr(ctx, 8, 53, 53);
  pto::reset_ctrl_spr(ctx, 8, 59, 59);
  EXPECT_EQ(ctx.ctrl, 0x1000000000000008ull);

  EXPECT_THROW(pto::set_ctrl_spr(ctx, 9, 48, 48, 2), RegisterFault);
  EXPECT_THROW(pto::set_ctrl_spr(ctx, 9, 48, 48, -1), RegisterFault);
  pto::set_ctrl_spr(ctx, 10, 8, 8, 1);
  try {
    pto::set_ctrl_spr(ctx, 11, 6, 7, 3);  // leaves bits 6..8 = 7
    ADD_FAILURE() << "no fault";
  } catch (const RegisterFault& e) {
    EXPECT_NE(std::string(e.what()).find("CTRL bits 6..8 = 7"), std::string::npos) << e.what();
  }
  EXPECT_EQ(pto::get_ctrl_spr(ctx, 6, 10), 0b00100);  // the faulting write was not made
}

}  // namespace
}  // namespace pypto_pro
