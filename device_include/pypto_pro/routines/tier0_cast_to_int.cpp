// The tier-0 executor's cast() and the fused *_cast forms to integer element types.
#include "pypto_pro/routines/tier0_cast.h"

template void pto::tier0::RunCast<false>(CoreCtx&, const PtoT0Program&, const PtoT0Insn&, const Frame&);
template void pto::tier0::RunStepCast<false>(CoreCtx&, const PtoT0Program&, const PtoT0Insn&, const Frame&);
