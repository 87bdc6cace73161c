// The device routines compiled once per compiler, CPU, flags and device headers into
// libpto_routines.so (docs/jit.md#precompiled-device-headers-and-routines), next to the precompiled
// headers: kernels built with PTO_EXTERN_ROUTINES call these instead of compiling them themselves.
// Every .cpp file of this directory is one part of the library: the compiler driver compiles the
// parts concurrently with the kernels' own flags (the same source and flags, so the same code) and
// links them into the one library. A part's compile time is what balances them: ~2-6 s each here.
#pragma once

#include "pypto_pro/device.h"

#define PTO_ROUTINE extern "C" __attribute__((visibility("default")))
