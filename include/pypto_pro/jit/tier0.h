// Tier-0 programs (docs/jit.md#tier-0-first-launches): a vector or cube kernel's verified IR as the flat
// instruction list the routines library's executor runs, so a first launch need not wait for the
// host compiler.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "pypto_pro/ir/stmt.h"
#include "pypto_pro/tier0.h"

namespace pypto_pro::jit {

// A program and the arrays it points into (never moved once made: launches hold its address).
struct Tier0Program {
  PtoT0Program program{};
  std::vector<PtoT0Insn> insns;
  std::vector<PtoT0Tensor> tensors;
  std::vector<PtoT0Slot> slots;
  std::vector<PtoT0Group> groups;
  std::deque<std::string> names;  // the tensors' names, the kernel's name, files and arch
  std::vector<const char*> source_files;  // PtoKernelDesc::source_files of its launches
};

// The tier-0 program of `func` (verified, before the fuse_rows and auto_mutex passes: the executor
// runs ops one at a time, and mutexes order nothing in a plain kernel), or null, with the construct
// it does not run in `why`, when the kernel uses anything beyond what the executor runs: scalar
// code of bool/int32/int64/fp32 values, loops and branches, tile groups (Vec ND; Mat, Left, Right,
// Acc in ND/NZ/ZN), load/store of a tile of the tensor's dtype, the element-wise binary, scalar and
// unary ops, L1 -> L0 moves, matmul, and the pipe synchronisation a plain kernel does not wait on.
std::unique_ptr<Tier0Program> CompileTier0(const ir::Function& func, std::string* why = nullptr);

}  // namespace pypto_pro::jit
