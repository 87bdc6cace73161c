/* The binary interface between the runtime (libpypto_pro / _C) and a compiled kernel library.
 * Plain C so either side can change its C++ freely; bump PTO_ABI_VERSION on any change. */
#ifndef PYPTO_PRO_ABI_H_
#define PYPTO_PRO_ABI_H_

#include <stdint.h>

#define PTO_ABI_VERSION 2
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

/* One argument of pl.printf / pl.pto_assert: the runtime formats, so the device passes the value
 * with its type. `bits` is the scalar's width: %u and %x of a negative int32 print 32 bits, like C. */
enum { PTO_ARG_INT = 0, PTO_ARG_UINT = 1, PTO_ARG_FLOAT = 2, PTO_ARG_BOOL = 3 };
typedef struct PtoArg {
  uint32_t kind; /* PTO_ARG_* */
  uint32_t bits;
  union {
    int64_t i;
    uint64_t u;
    double f;
  } value;
} PtoArg;

/* Flags of a print call. */
enum { PTO_PRINT_LOC = 1 /* prefix the text with the kernel's file:line (loc=True) */ };

/* Cross-core synchronisation modes, numbered like pl.CrossCoreSyncMode and the hardware. */
enum { PTO_SYNC_INTER_BLOCK = 0, PTO_SYNC_INTER_SUBBLOCK = 1, PTO_SYNC_INTRA_BLOCK = 2, PTO_SYNC_UNICAST_BLOCK = 3 };

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
  /* pl.printf: format `fmt` with `args` and print it on the host's stdout, prefixed with the core. */
  void (*print)(struct PtoCoreCtx* ctx, int32_t line, const char* fmt, const PtoArg* args, int32_t nargs,
                int32_t flags);
  /* A failed pl.pto_assert: abort the block with a fault carrying the formatted message. Never returns. */
  void (*assert_fail)(struct PtoCoreCtx* ctx, int32_t line, const char* fmt, const PtoArg* args, int32_t nargs,
                      int32_t flags);
  /* pl.system.set_cross_core / wait_cross_core between the cores of a mixed kernel's logical block.
   * A wait without a pending set suspends the core until another core of its block sets the flag. */
  void (*set_cross_core)(struct PtoCoreCtx* ctx, int32_t line, int32_t pipe, int32_t event_id, int32_t mode);
  void (*wait_cross_core)(struct PtoCoreCtx* ctx, int32_t line, int32_t pipe, int32_t event_id, int32_t mode);
} PtoRuntimeApi;

/* Every stream object the runtime hands to call_kernel starts with this header. */
typedef struct PtoStreamHandle {
  const PtoRuntimeApi* api;
} PtoStreamHandle;

/* One simulated core running one block of a launch. */
typedef struct PtoCoreCtx {
  const PtoRuntimeApi* api;
  int32_t core_type; /* PTO_CORE_AIV / PTO_CORE_AIC */
  int32_t block_idx;    /* mixed kernels: the logical block on the AIC, 2 * block + subblock on an AIV */
  int32_t block_num;    /* the launch's blocks (mixed kernels: logical blocks, on every core) */
  int32_t subblock_idx; /* which AIV of a mixed block (0/1); 0 elsewhere */
  int32_t subblock_num; /* 2 on the AIVs of a mixed kernel; 1 elsewhere */
  uint8_t* mem[PTO_MEM_COUNT];      /* arena base of each local memory */
  uint32_t mem_size[PTO_MEM_COUNT]; /* its size on the kernel's arch */
  void* runtime;                    /* runtime-private */
} PtoCoreCtx;

#ifdef __cplusplus
}
#endif

#endif /* PYPTO_PRO_ABI_H_ */
