#include <gtest/gtest.h>

#include <cstdlib>

#include "pypto_pro/jit/compiler.h"
#include "pypto_pro/support/arch.h"
#include "pypto_pro/support/config.h"
#include "pypto_pro/support/sha256.h"

namespace pypto_pro {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // 55, 56 and 64 bytes exercise the padding boundaries.
  EXPECT_EQ(Sha256Hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(Sha256Hex(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(Sha256Hex(std::string(64, 'a')), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Config, DefaultsAndOverrides) {
  ::unsetenv("PYPTOPRO_JIT_ARCH");
  EXPECT_EQ(GetEnv("PYPTOPRO_JIT_ARCH"), "a5");
  ::setenv("PYPTOPRO_JIT_ARCH", "a3", 1);
  EXPECT_EQ(GetEnv("PYPTOPRO_JIT_ARCH"), "a3");
  ::unsetenv("PYPTOPRO_JIT_ARCH");
  ::setenv("PYPTO_PRO_NUM_THREADS", "x7", 1);
  EXPECT_THROW(GetEnvInt("PYPTO_PRO_NUM_THREADS"), std::invalid_argument);
  ::unsetenv("PYPTO_PRO_NUM_THREADS");
  EXPECT_EQ(GetEnvInt("PYPTO_PRO_NUM_THREADS"), 0);
  EXPECT_THROW(GetEnv("NOT_DECLARED_ANYWHERE"), std::logic_error);
}

TEST(Arch, ModelsMatchTheSpec) {
  const ArchModel* a5 = FindArch("a5");
  const ArchModel* a3 = FindArch("a3");
  ASSERT_NE(a5, nullptr);
  ASSERT_NE(a3, nullptr);
  EXPECT_EQ(&DefaultArch(), a5);
  EXPECT_EQ(a5->Capacity(hw::MemorySpace::kVec), 253952u);
  EXPECT_EQ(a3->Capacity(hw::MemorySpace::kVec), 192u * 1024);
  EXPECT_EQ(a5->Capacity(hw::MemorySpace::kAcc), 256u * 1024);
  EXPECT_EQ(a3->Capacity(hw::MemorySpace::kAcc), 128u * 1024);
  EXPECT_EQ(a5->aiv_cores, 64);
  EXPECT_EQ(a3->aic_cores, 24);
  EXPECT_EQ(FindArch("a9"), nullptr);
  EXPECT_EQ(TileAlignment(hw::MemorySpace::kVec), 32u);
  EXPECT_EQ(TileAlignment(hw::MemorySpace::kLeft), 512u);
  EXPECT_EQ(TileAlignment(hw::MemorySpace::kAcc), 64u);
}

// A compile in the background runs the compiler with the environment captured when the compile was
// asked for, and finds it on that environment's PATH: a later setenv (another thread's) does not reach it.
TEST(RunProcess, UsesTheCapturedEnvironmentAndItsPath) {
  ASSERT_EQ(setenv("PYPTO_PRO_TEST_CAPTURED", "before", 1), 0);
  const jit::Environment captured = jit::CaptureEnvironment();
  ASSERT_EQ(setenv("PYPTO_PRO_TEST_CAPTURED", "after", 1), 0);
  jit::ProcessResult run = jit::RunProcess({"sh", "-c", "echo $PYPTO_PRO_TEST_CAPTURED"}, "/", 30, nullptr, captured);
  EXPECT_TRUE(run.started);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.output, "before\n");
  run = jit::RunProcess({"sh", "-c", "echo $PYPTO_PRO_TEST_CAPTURED"}, "/", 30);  // the process's own
  EXPECT_EQ(run.output, "after\n");
  unsetenv("PYPTO_PRO_TEST_CAPTURED");

  const auto no_path = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"PATH=/nonexistent"});
  run = jit::RunProcess({"sh", "-c", "true"}, "/", 30, nullptr, no_path);
  EXPECT_FALSE(run.started);
  EXPECT_EQ(run.output, "cannot run 'sh': No such file or directory");
}

}  // namespace
}  // namespace pypto_pro
