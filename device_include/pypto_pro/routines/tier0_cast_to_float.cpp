// The tier-0 executor's cast() and the fused *_cast forms to fp16, bf16 and fp32.
#include "pypto_pro/routines/tier0_cast.h"

template void pto::tier0::RunCast<true>(CoreCtx&, const PtoT0Program&, const PtoT0Insn&, const Frame&);
template void pto::tier0::RunStepCast<true>(CoreCtx&, const PtoT0Program&, const PtoT0Insn&, const Frame&);
