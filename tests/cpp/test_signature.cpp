// The kernel signature description: compile-signature keys, what they decode to, the artefact
// names of a binding, TilingKey declarations and packing, and the one launcher-slot order.
#include <gtest/gtest.h>

#include <stdexcept>

#include "pypto_pro/jit/instance_cache.h"
#include "pypto_pro/jit/signature.h"

namespace pypto_pro {
namespace {

using jit::ParamKind;

jit::ParamSpec Tensor(const std::string& name, std::vector<int64_t> dims, int dt_entry = -1) {
  jit::ParamSpec p;
  p.name = name;
  p.dims = std::move(dims);
  p.dt_entry = dt_entry;
  return p;
}

jit::ParamSpec Other(const std::string& name, ParamKind kind) {
  jit::ParamSpec p;
  p.name = name;
  p.kind = kind;
  return p;
}

jit::TilingKeySchema Modes() {
  return jit::TilingKeySchema::Declare("k", "Modes", {{"Op", 2, {10, 20, 30}, 0}, {"Scale", 1, {1, 4}, 0}}, {"x"});
}

TEST(Signature, KeyDecodesToTheBindingTheParserSpecialisesOn) {
  jit::KernelSignature sig;
  sig.params = {Tensor("x", {jit::kStaticDim, 64}, 0), Other("n", ParamKind::kScalar),
                Tensor("y", {jit::kDynamicDim, jit::kStaticDim, jit::kRestDims}, 1)};
  sig.tiling_key = Modes();
  sig.datatype = jit::DatatypeSchema{{"x", "y"}, {0, 0}, {"T"}};
  jit::SignatureKey key;
  for (int64_t v : {int64_t(2 | 1 << 2), int64_t(ir::DataType::kFP16), int64_t(ir::DataType::kFP16),
                    int64_t(128),                 // x: its STATIC dim
                    int64_t(2), int64_t(7),       // y: '...' covers 2 dims; its STATIC dim
                    int64_t(3), int64_t(5)}) {    // the '...' dims
    key.Push(v);
  }
  const jit::Binding b = jit::DecodeKey(sig, key);
  ASSERT_TRUE(b.tiling_key.has_value());
  EXPECT_EQ(*b.tiling_key, 6u);
  ASSERT_EQ(b.tiling_values.size(), 2u);
  EXPECT_EQ(b.tiling_values[0].second, 30);
  EXPECT_EQ(b.tiling_values[1].second, 4);
  ASSERT_EQ(b.static_dims.size(), 2u);
  EXPECT_EQ(b.static_dims[0].second, (std::vector<int64_t>{128}));
  EXPECT_EQ(b.static_dims[1].second, (std::vector<int64_t>{7, 3, 5}));
  EXPECT_EQ(b.StaticSignature(), "x:128;y:7,3,5");
  ASSERT_EQ(b.variables.size(), 1u);
  EXPECT_EQ(b.variables[0].first, "T");
  EXPECT_EQ(b.DatatypeJson(), R"({"x":"DT_FP16","y":"DT_FP16"})");
  EXPECT_EQ(b.DatatypeFile(), "{\n  \"datatype\": {\n    \"x\": \"DT_FP16\",\n    \"y\": \"DT_FP16\"\n  },\n"
                              "  \"variables\": {\n    \"T\": \"DT_FP16\"\n  }\n}\n");
}

TEST(Signature, NoSpecialisationIsAnEmptyKeyAndBinding) {
  jit::KernelSignature sig;
  sig.params = {Tensor("x", {jit::kDynamicDim, 64})};
  const jit::Binding b = jit::DecodeKey(sig, jit::SignatureKey{});
  EXPECT_EQ(b.StaticSignature(), "");
  EXPECT_EQ(b.DatatypeJson(), "");
  EXPECT_FALSE(b.tiling_key.has_value());
}

TEST(Signature, LauncherSlotsAreTensorsScalarsDynamicDimsThenTilingData) {
  jit::KernelSignature sig;
  sig.params = {Other("n", ParamKind::kScalar), Tensor("x", {jit::kDynamicDim, jit::kDynamicDim}),
                Tensor("y", {64, jit::kDynamicDim}), Other("tiling", ParamKind::kTiling)};
  const std::vector<ir::LauncherSlot> slots = sig.Slots();
  ASSERT_EQ(slots.size(), 7u);
  EXPECT_EQ(slots[0].kind, ir::SlotKind::kTensor);
  EXPECT_EQ(slots[0].param, 1);
  EXPECT_EQ(slots[1].param, 2);
  EXPECT_EQ(slots[2].kind, ir::SlotKind::kScalar);
  EXPECT_EQ(slots[2].param, 0);
  for (int i = 3; i < 6; ++i) {
    EXPECT_EQ(slots[size_t(i)].kind, ir::SlotKind::kDynamicDim);
    EXPECT_EQ(slots[size_t(i)].index, i - 3);  // numbered in parameter order, then axis order
  }
  EXPECT_EQ(slots[4].param, 1);
  EXPECT_EQ(slots[5].param, 2);
  EXPECT_EQ(slots[6].kind, ir::SlotKind::kTiling);
  EXPECT_EQ(slots[6].param, 3);
}

TEST(TilingKey, PacksIndicesFromBitZeroAndEnumeratesInPackedOrder) {
  const jit::TilingKeySchema tk = Modes();
  EXPECT_EQ(tk.Pack({2, 0}), 2u);
  EXPECT_EQ(tk.Pack({0, 1}), 1u << 2);
  EXPECT_EQ(tk.Unpack(1u << 2), (std::vector<int64_t>{10, 4}));
  EXPECT_EQ(tk.Describe({30, 4}), "{Op: 30, Scale: 4}");
  const std::vector<uint64_t> valid = tk.Enumerate([](const std::vector<int64_t>& v) { return v[0] != 30 || v[1] == 1; });
  EXPECT_EQ(valid, (std::vector<uint64_t>{0, 1, 2, 4, 5}));
}

TEST(TilingKey, DeclarationErrorsNameTheField) {
  auto message = [](std::vector<jit::TilingKeySchema::Field> fields) {
    try {
      jit::TilingKeySchema::Declare("k", "K", std::move(fields), {"x"});
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({}), "kernel 'k': tiling_key class K declares no TilingKeyField");
  EXPECT_NE(message({{"A", 0, {0}, 0}}).find("field 'A': bits must be an int > 0"), std::string::npos);
  EXPECT_NE(message({{"A", 1, {0, 0}, 0}}).find("values must be unique, got [0, 0]"), std::string::npos);
  EXPECT_NE(message({{"A", 1, {0, 1, 2}, 0}}).find("3 values do not fit in 1 bit(s) (at most 2)"), std::string::npos);
  EXPECT_NE(message({{"A", 40, {0}, 0}, {"B", 30, {0}, 0}}).find("needs 70 bits"), std::string::npos);
  EXPECT_NE(message({{"x", 1, {0}, 0}}).find("field 'x' clashes with the kernel parameter"), std::string::npos);
}

TEST(InstanceCache, CountsHitsMissesAndDropsEverythingWhenStale) {
  jit::InstanceCache cache;
  jit::SignatureKey a, b;
  a.Push(1);
  b.Push(2);
  EXPECT_EQ(cache.Lookup(a), nullptr);
  cache.CountMiss();
  auto inst = std::make_shared<jit::Instance>();
  cache.Insert(a, inst);
  EXPECT_EQ(cache.Lookup(a), inst.get());
  EXPECT_EQ(cache.Lookup(b), nullptr);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_EQ(cache.compiles(), 1);
  EXPECT_EQ(cache.CompileLock(b), cache.CompileLock(b));  // one lock per signature being compiled
  cache.Clear();
  EXPECT_EQ(cache.Lookup(a), nullptr);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_TRUE(cache.in_order().empty());
}

}  // namespace
}  // namespace pypto_pro
