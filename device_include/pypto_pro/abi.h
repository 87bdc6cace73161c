/* The binary interface between the runtime (libpypto_pro / _C) and a compiled kernel library.
 * Plain C so either side can change its C++ freely; bump PTO_ABI_VERSION on any change. */
#ifndef PYPTO_PRO_ABI_H_
#define PYPTO_PRO_ABI_H_

#include <stdint.h>

#define PTO_ABI_VERSION 1
#define PTO_MEM_COUNT 8  /* indexed like ir::MemorySpace: DDR Vec Mat Left Right Acc Bias Scaling */
#define PTO_FAULT_MAX_RANK 8

#ifdef __cplusplus
extern "C" {
#endif

enum { PTO_CORE_AIV = 0, PTO_CORE_AIC = 1 };
enum { PTO_KERNEL_VECTOR = 0, PTO_KERNEL_CUBE = 1, PTO_KERNEL_MIXED = 2 };

/* What a failing check in device code reports; the runtime formats the message. */
typedef struct PtoFaultDetail {
  const char* op;       /* "load_tile" */
  const char* message;  /* "GM access out of bounds" */
  const char* tensor;   /* tensor parameter name, or NULL */
  int32_t rank;         /* entries used in the arrays below; 0 = none */
  int64_t offsets[PTO_FAULT_MAX_RANK];
  int64_t extent[PTO_FAULT_MAX_RANK];
  int64_t shape[PTO_FAULT_MAX_RANK];
} PtoFaultDetail;

struct PtoCoreCtx;
typedef void (*PtoKernelEntry)(struct PtoCoreCtx* ctx, const void* args);

typedef struct PtoKernelDesc {
  uint32_t abi_version;
  uint32_t kind; /* PTO_KERNEL_* */
  const char* name;
  const char* source_file;
  const char* arch;
  PtoKernelEntry entry;
} PtoKernelDesc;

typedef struct PtoRuntimeApi {
  uint32_t abi_version;
  /* Queue one launch on `stream` (a PtoStreamHandle*). Copies `args`. Returns 0 or a negative error. */
  int64_t (*submit)(void* stream, const PtoKernelDesc* desc, const void* args, uint32_t args_size,
                    uint32_t block_dim);
  /* Abort the running block with a kernel fault. Never returns. */
  void (*fault)(struct PtoCoreCtx* ctx, int32_t line, const PtoFaultDetail* detail);
} PtoRuntimeApi;

/* Every stream object the runtime hands to call_kernel starts with this header. */
typedef struct PtoStreamHandle {
  const PtoRuntimeApi* api;
} PtoStreamHandle;

/* One simulated core running one block of a launch. */
typedef struct PtoCoreCtx {
  const PtoRuntimeApi* api;
  int32_t core_type; /* PTO_CORE_AIV / PTO_CORE_AIC */
  int32_t block_idx;
  int32_t block_num;
  int32_t subblock_idx;
  int32_t subblock_num;
  uint8_t* mem[PTO_MEM_COUNT];      /* arena base of each local memory */
  uint32_t mem_size[PTO_MEM_COUNT]; /* its size on the kernel's arch */
  void* runtime;                    /* runtime-private */
} PtoCoreCtx;

#ifdef __cplusplus
}
#endif

#endif /* PYPTO_PRO_ABI_H_ */
