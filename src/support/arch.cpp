#include "pypto_pro/support/arch.h"


namespace pypto_pro {

namespace {
using hw::MemorySpace;
constexpr uint32_t KiB = 1024;

// The cost models (docs/profiler.md#cost-model has every figure's source or assumption):
// clock, GM bytes/cycle (chip), MTE2, MTE3, MTE1, FIX, V bytes/cycle, V slow factor, cube MACs/cycle
// fp16, fp32, int8, GM latency, local latency, scalar cycles.
constexpr CostModel kDavinci3510 = {1.9, 842, 128, 128, 256, 256, 256, 4, 4096, 1024, 8192, 300, 16, 1};
constexpr CostModel kDavinci2201 = {1.6, 1000, 128, 128, 256, 256, 256, 4, 4096, 1024, 8192, 300, 16, 1};

// Capacity order: DDR, Vec (UB), Mat (L1), Left (L0A), Right (L0B), Acc (L0C), Bias, Scaling.
const std::array<ArchModel, 3> kArchs = {{
    {"a5", "Ascend 950 (DAV_3510)", 32, 64, true, {0, 248 * KiB, 512 * KiB, 64 * KiB, 64 * KiB, 256 * KiB, 4 * KiB, 4 * KiB}, PTO_SSBUF_BYTES, kDavinci3510},
    {"a3", "Ascend 910C (DAV_2201)", 24, 48, false, {0, 192 * KiB, 512 * KiB, 64 * KiB, 64 * KiB, 128 * KiB, 1 * KiB, 4 * KiB}, 0, kDavinci2201},
    {"a2", "Ascend 910B (DAV_2201)", 24, 48, false, {0, 192 * KiB, 512 * KiB, 64 * KiB, 64 * KiB, 128 * KiB, 1 * KiB, 4 * KiB}, 0, kDavinci2201},
}};
}  // namespace

uint32_t TileAlignment(MemorySpace m) {
  switch (m) {
    case MemorySpace::kLeft:
    case MemorySpace::kRight: return 512;
    case MemorySpace::kAcc:
    case MemorySpace::kBias: return 64;
    default: return 32;
  }
}

const ArchModel* FindArch(std::string_view name) {
  for (const ArchModel& arch : kArchs) {
    if (arch.name == name) return &arch;
  }
  return nullptr;
}

const ArchModel& DefaultArch() { return kArchs[0]; }

std::vector<std::string_view> ArchNames() {
  std::vector<std::string_view> names;
  for (const ArchModel& arch : kArchs) names.push_back(arch.name);
  return names;
}

std::string ArchNamesJoined() {
  std::string out;
  for (std::string_view name : ArchNames()) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

}  // namespace pypto_pro
