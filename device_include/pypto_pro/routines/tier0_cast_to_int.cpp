// The tier-0 executor's cast() to integer element types.
#include "pypto_pro/routines/tier0_cast.h"

template void pto::tier0::RunCast<false>(CoreCtx&, const PtoT0Program&, const PtoT0Insn&, const Frame&);
