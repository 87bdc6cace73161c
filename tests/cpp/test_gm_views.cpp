// GM pointers and views in the IR: the pl.make_tensor / pl.addptr / pl.make_ptr expressions, the
// pl.Ptr parameter's launcher slots, which parameters writes through views reach, and what the code
// generator declares for them. Their run-time behaviour is tested from Python (test_gm_views.py).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ir_test_util.h"
#include "pypto_pro/codegen/codegen.h"
#include "pypto_pro/ir/analysis.h"
#include "pypto_pro/ir/launcher_slots.h"
#include "pypto_pro/ir/printer.h"
#include "pypto_pro/ir/verifier.h"
#include "pypto_pro/jit/signature.h"
#include "pypto_pro/passes/pass.h"
#include "pypto_pro/support/arch.h"

namespace pypto_pro {
namespace {

using ir::DataType;
using test_util::At;
using test_util::Ref;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

ir::Var AddPtrParam(ir::Function& f, const std::string& name, DataType dtype) {
  ir::Var v = f.NewVar(name, ir::Type::Ptr(dtype), At(1, 16));
  f.params.push_back(v);
  return v;
}

ErrorKind KindOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const CompileDiagnostic& d) {
    return d.kind();
  }
  ADD_FAILURE() << "no diagnostic";
  return ErrorKind::kInternal;
}

TEST(GmViews, MakeViewTypesConstantDimsAsFixed) {
  ir::Function f;
  ir::Var w = AddPtrParam(f, "w", DataType::kUInt8);
  ir::Var n = test_util::AddScalarParam(f, "n", DataType::kInt64);
  ir::Expr view = ir::MakeView(Ref(w), {ir::IntConst(64), Ref(n)}, {}, DataType::kFP16, At(3));
  ASSERT_TRUE(view->type.IsTensor());
  const ir::TensorType& t = *view->type.tensor;
  EXPECT_TRUE(t.view);
  EXPECT_EQ(t.dtype, DataType::kFP16);
  ASSERT_EQ(t.dims.size(), 2u);
  EXPECT_EQ(t.dims[0].kind, ir::DimKind::kFixed);
  EXPECT_EQ(t.dims[0].value, 64);
  EXPECT_EQ(t.dims[1].kind, ir::DimKind::kDynamic);
  EXPECT_EQ(t.dims[1].dyn_slot, -1);  // read from the view, no launcher argument
  EXPECT_EQ(view->type.ToString(), "View[[64, ?], fp16]");
  EXPECT_EQ(ir::Print(view), "make_tensor(w, [64, n], fp16)");
  ir::Expr ptr = ir::PtrOffset(Ref(w), ir::IntConst(16), DataType::kUInt8);
  EXPECT_EQ(ptr->type.ToString(), "Ptr[uint8]");
  EXPECT_EQ(ir::Print(ptr), "addptr(w, 16)");
  EXPECT_EQ(ir::Print(ir::PtrOffset(Ref(w), ir::IntConst(0), DataType::kFP32)), "make_ptr(w, fp32)");
}

TEST(GmViews, FactoriesRefuseWhatTheLanguageRefuses) {
  ir::Function f;
  ir::Var w = AddPtrParam(f, "w", DataType::kFP32);
  ir::Var x = test_util::AddScalarParam(f, "x", DataType::kFP32);
  auto four = [] { return ir::IntConst(4); };
  EXPECT_EQ(KindOf([&] { ir::MakeView(Ref(x), {four()}, {}, DataType::kFP32); }), ErrorKind::kType);
  EXPECT_EQ(KindOf([&] { ir::MakeView(Ref(w), {}, {}, DataType::kFP32); }), ErrorKind::kType);
  EXPECT_EQ(KindOf([&] { ir::MakeView(Ref(w), {four(), four()}, {four()}, DataType::kFP32); }),
            ErrorKind::kType);
  EXPECT_EQ(KindOf([&] { ir::MakeView(Ref(w), {ir::IntConst(-1)}, {}, DataType::kFP32); }), ErrorKind::kValue);
  EXPECT_EQ(KindOf([&] { ir::MakeView(Ref(w), {Ref(x)}, {}, DataType::kFP32); }), ErrorKind::kType);
  EXPECT_EQ(KindOf([&] { ir::MakeView(Ref(w), {four()}, {}, DataType::kHF8); }), ErrorKind::kType);
  ir::Expr view = ir::MakeView(Ref(w), {four()}, {}, DataType::kFP32);
  EXPECT_EQ(KindOf([&] { ir::PtrOffset(view, four(), DataType::kFP32); }), ErrorKind::kType);
  EXPECT_EQ(KindOf([&] { ir::PtrOffset(Ref(w), Ref(x), DataType::kFP32); }), ErrorKind::kType);
}

TEST(GmViews, PointerParametersTakeATensorSlotAndTheirBufferSizeAfterTheDims) {
  jit::KernelSignature sig;
  jit::ParamSpec x, w, n, tiling;
  x.name = "x";
  x.dims = {jit::kDynamicDim};
  w.name = "w";
  w.kind = jit::ParamKind::kPtr;
  n.name = "n";
  n.kind = jit::ParamKind::kScalar;
  tiling.name = "tiling";
  tiling.kind = jit::ParamKind::kTiling;
  sig.params = {w, n, x, tiling};
  const std::vector<ir::LauncherSlot> slots = sig.Slots();
  ASSERT_EQ(slots.size(), 6u);
  EXPECT_EQ(slots[0].kind, ir::SlotKind::kTensor);
  EXPECT_EQ(slots[0].param, 0);
  EXPECT_EQ(slots[1].kind, ir::SlotKind::kTensor);
  EXPECT_EQ(slots[1].param, 2);
  EXPECT_EQ(slots[2].kind, ir::SlotKind::kScalar);
  EXPECT_EQ(slots[3].kind, ir::SlotKind::kDynamicDim);
  EXPECT_EQ(slots[4].kind, ir::SlotKind::kBufferBytes);
  EXPECT_EQ(slots[4].param, 0);
  EXPECT_EQ(slots[5].kind, ir::SlotKind::kTiling);
}

// w: pl.Ptr[fp32], x: pl.Tensor[[4, 8], fp32]; v = make_tensor(addptr(w, 8), [4, 8]); load x; store v.
struct ViewKernel {
  ir::Function func;
  ir::Var w, x, p, v;
};

ViewKernel MakeViewKernel() {
  ViewKernel k;
  k.func.name = "view_kernel";
  k.w = AddPtrParam(k.func, "w", DataType::kFP32);
  k.x = test_util::AddTensorParam(k.func, "x", DataType::kFP32, {test_util::FixedDim(4), test_util::FixedDim(8)});
  ir::Expr moved = ir::PtrOffset(Ref(k.w), ir::IntConst(8), DataType::kFP32, At(2));
  k.p = k.func.NewVar("p", moved->type);
  ir::Expr view = ir::MakeView(Ref(k.p), {ir::IntConst(4), ir::IntConst(8)}, {}, DataType::kFP32, At(3));
  k.v = k.func.NewVar("v", view->type);
  ir::TileType tt = test_util::MakeTileType(4, 8);
  ir::Var group = test_util::MakeTileGroup(k.func, "g", tt, 0, {}, 1);
  ir::Var t = test_util::MakeTileVar(k.func, "t", tt);
  ir::Expr zero = ir::Tuple({ir::IntConst(0), ir::IntConst(0)});
  k.func.body = ir::Seq({
      ir::Assign(k.p, moved, At(2)),
      ir::Assign(k.v, view, At(3)),
      ir::DeclTiles(group, At(4)),
      ir::SelectTile(t, group, ir::SelectMode::kCurrent, nullptr, At(4)),
      test_util::Op("load", {Ref(t), Ref(k.x), zero}, 5),
      test_util::Op("store", {Ref(k.v), Ref(t), zero}, 6),
  });
  return k;
}

TEST(GmViews, WritesThroughAViewReachTheParameterItLiesIn) {
  ViewKernel k = MakeViewKernel();
  EXPECT_NO_THROW(ir::Verify(k.func));
  EXPECT_EQ(ir::WrittenParams(k.func), (std::vector<bool>{true, false}));
}

TEST(GmViews, AViewVariableTakesViewsOfItsDtypeAndRankOnly) {
  ViewKernel k = MakeViewKernel();
  ir::Expr other = ir::MakeView(Ref(k.w), {ir::IntConst(4)}, {}, DataType::kFP32, At(7));
  k.func.body = ir::Seq({k.func.body, ir::Assign(k.v, other, At(7))});
  EXPECT_EQ(KindOf([&] { ir::Verify(k.func); }), ErrorKind::kType);
}

TEST(GmViews, CodegenDeclaresPointersAndViewsAndPassesTheBufferSize) {
  ViewKernel k = MakeViewKernel();
  passes::PassContext ctx;
  passes::RunPipeline(k.func, ctx);
  const codegen::GeneratedSources src = codegen::Generate(k.func, DefaultArch());
  EXPECT_TRUE(Contains(src.kernel_cpp, "const auto p_w = pto::MakeGmPtr<float>(args.a_w, args.n_w, \"w\");"))
      << src.kernel_cpp;
  EXPECT_TRUE(Contains(src.kernel_cpp, "pto::GmPtr<float> p_p{};"));
  EXPECT_TRUE(Contains(src.kernel_cpp, "pto::GmTensor<float, 2> t_v{};"));
  EXPECT_TRUE(Contains(src.kernel_cpp, "p_p = pto::AddPtr(ctx, 2, p_w, "));
  EXPECT_TRUE(Contains(src.kernel_cpp, "t_v = pto::MakeView<float, 2>(ctx, 3, p_p, "));
  EXPECT_TRUE(Contains(src.kernel_cpp, ", false, pto::Idx<2>{{0, 0}}, \"v\");"));
  EXPECT_TRUE(Contains(src.kernel_cpp, "int64_t n_w;"));
  EXPECT_TRUE(Contains(src.call_kernel_cpp, "int64_t n_w"));
}

TEST(GmViews, SetStrideMakesItsTensorParameterMutable) {
  ViewKernel k = MakeViewKernel();
  k.func.body = ir::Seq({k.func.body, test_util::Op("set_stride", {Ref(k.x), ir::Tuple({ir::IntConst(16),
                                                                                        ir::IntConst(1)})}, 8)});
  EXPECT_NO_THROW(ir::Verify(k.func));
  EXPECT_EQ(ir::WrittenParams(k.func), (std::vector<bool>{true, false}));  // strides are no data
  const codegen::GeneratedSources src = codegen::Generate(k.func, DefaultArch());
  EXPECT_TRUE(Contains(src.kernel_cpp, "  auto t_x = pto::MakeGm<float, 2>")) << src.kernel_cpp;
  EXPECT_TRUE(Contains(src.kernel_cpp, "pto::set_stride(ctx, 8, t_x, "));
}

}  // namespace
}  // namespace pypto_pro
