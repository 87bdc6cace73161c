// The tier-0 executor's cast() to fp16, bf16 and fp32.
#include "pypto_pro/routines/tier0_cast.h"

template void pto::tier0::RunCast<true>(CoreCtx&, const PtoT0Program&, const PtoT0Insn&, const Frame&);
