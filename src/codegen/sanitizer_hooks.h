// Sanitizer-mode instrumentation (docs/device.md#sanitizer-mode), generated from the op registry:
// the hook each op statement runs under (device_include/pypto_pro/sanitizer.h) and the pipes each
// kind of core can reach memory with. Internal to src/codegen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::codegen {

struct SanitizerHook {
  std::string guard;  // the op runs only if this holds; empty: unconditionally
  std::string after;  // a statement right after the op; empty: none
};

// The hook of op statement `s`, whose operand i the op call receives as `operands[i]` (tiles
// dereferenced, scalars and offsets already evaluated into locals).
// `kind` decides whether a move's data path crosses cores (mixed kernels) and so whose memory it
// writes.
SanitizerHook HookFor(const ir::StmtNode& s, const std::vector<std::string>& operands, ir::KernelKind kind);

// Profile mode: `pto::san::Work(ctx, line, pipe, class, units, dtype, name);` for a data op (its
// work from the same windows the sanitizer books: bytes moved or computed, or the matmul's
// multiply-accumulates), or "" for an op without data (the sync hooks record those).
std::string WorkOf(const ir::StmtNode& s, const std::vector<std::string>& operands);

// PtoSanitizerApi::begin's `pipes`: the pipes the kernel's code can touch tiles and GM with, on an
// AIV (bytes 0 and 1) and on an AIC (bytes 2 and 3); bit ALL of a tile byte says that core's moves
// write the other kind of core's tiles (the fixpipe into the AIVs' UB, MTE3 into the AIC's L1).
uint32_t SanitizerPipes(const ir::Function& func);

}  // namespace pypto_pro::codegen
