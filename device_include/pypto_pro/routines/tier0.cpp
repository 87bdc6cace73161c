// The tier-0 executor's kernel entry (PtoKernelDesc::entry of a tier-0 launch; its arguments are a
// PtoT0Args): the program's control flow and the tile ops it does not run out of line.
#define PTO_EXTERN_ROUTINES  // its tile ops call this library's routines, as a kernel compiled against it does
#include "pypto_pro/routines/routines.h"
#include "pypto_pro/tier0_exec.h"

PTO_ROUTINE void pto_tier0_entry(PtoCoreCtx* ctx, const void* raw_args) {
  const PtoT0Args* args = static_cast<const PtoT0Args*>(raw_args);
  pto::tier0::Run(*ctx, *args->program, args->slots);
}
