/* The binary interface between the runtime (libpypto_pro / _C) and a compiled kernel library.
 * Plain C so either side can change its C++ freely; bump PTO_ABI_VERSION on any change. */
#ifndef PYPTO_PRO_ABI_H_
#define PYPTO_PRO_ABI_H_

#include <stdint.h>

#include "pypto_pro/hw_tables.h"

#define PTO_ABI_VERSION 16
#define PTO_MEM_ONE_(name) +1
#define PTO_MEM_COUNT (0 PTO_HW_MEMORIES(PTO_MEM_ONE_)) /* memories indexed as in hw_tables.h, DDR first */
#define PTO_MEM_SSBUF PTO_MEM_COUNT /* sanitizer accesses of the block's SSBUF (shared like GM) */
#define PTO_FAULT_MAX_RANK 8
#define PTO_LOAD_HISTORY 8

#ifdef __cplusplus
extern "C" {
#endif

enum { PTO_CORE_AIV = 0, PTO_CORE_AIC = 1 };
/* The cores of a mixed kernel's logical block. */
enum { PTO_PEER_AIC = 0, PTO_PEER_AIV0 = 1, PTO_PEER_AIV1 = 2 };
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

/* Element dtypes PTO_DTYPE_Bool, PTO_DTYPE_FP16, ... in the order of hw_tables.h (hw::DataType). */
#define PTO_DTYPE_(e, ...) PTO_DTYPE_##e,
enum { PTO_HW_DTYPES(PTO_DTYPE_) };
#undef PTO_DTYPE_

/* Cross-core synchronisation modes PTO_SYNC_INTER_BLOCK, ... (pl.CrossCoreSyncMode), from hw_tables.h. */
#define PTO_SYNC_MODE_(name) PTO_SYNC_##name,
enum { PTO_HW_CROSS_CORE_SYNC_MODES(PTO_SYNC_MODE_) };
#undef PTO_SYNC_MODE_

struct PtoCoreCtx;
typedef void (*PtoKernelEntry)(struct PtoCoreCtx* ctx, const void* args);

/* A GM buffer: its first byte and its size. */
typedef struct PtoRange {
  const void* lo;
  int64_t bytes;
} PtoRange;

/* Stores into tensors of this many bytes or more stream around the caches (data_movement.h), and the
 * runtime looks at whether such outputs were ever touched (PtoRuntimeApi::fresh_memory). */
#define PTO_STREAMING_STORE_BYTES (4 << 20)

typedef struct PtoKernelDesc {
  uint32_t abi_version;
  uint32_t kind; /* PTO_KERNEL_* */
  const char* name;
  const char* source_file;
  const char* arch;
  PtoKernelEntry entry;
  /* Sanitizer mode: the report file each launch appends its findings to; NULL in a plain kernel. */
  const char* sanitizer_report;
  uint32_t flags; /* PTO_KERNEL_FLAG_* */
  /* Where pl.dump_data writes its .npy files (the instance directory's dumps/); NULL: nowhere. */
  const char* dump_dir;
  /* The source files line numbers refer to: [0] is source_file, then the modules of helpers the
   * kernel inlined from other files. */
  const char* const* source_files;
  int32_t source_file_count;
  /* The GM buffers of the tensor parameters the kernel writes, from its arguments: up to `max` into
   * `out`, returns how many. NULL: none told. */
  int32_t (*outputs)(const void* args, PtoRange* out, int32_t max);
} PtoKernelDesc;

/* A line number the kernel hands the runtime is `file << PTO_LINE_FILE_SHIFT | line`, `file`
 * indexing PtoKernelDesc::source_files (0, the kernel's own file, for most lines). */
#define PTO_LINE_FILE_SHIFT 20

/* The kernel calls pl.system.sync_all or uses INTER_BLOCK cross-core flags: every block of a launch
 * must be resident at once. */
#define PTO_KERNEL_FLAG_RESIDENT 1u
/* An instrumented kernel whose launches record their ops and synchronisation for the performance
 * model (pypto_pro.profiler) instead of checking them: the sanitizer's hooks plus `work`. */
#define PTO_KERNEL_FLAG_PROFILE 2u
/* A debug build (pl.jit(debug=True)): the launch runs its blocks one after another on the launching
 * thread, so a debugger follows one core at a time. */
#define PTO_KERNEL_FLAG_DEBUG 4u

/* pl.dump_data: a window of a GM tensor or tile, `rank` dims of `shape` elements `stride` apart. */
typedef struct PtoDump {
  const char* name;   /* the tensor's or tile's name in the kernel */
  const char* what;   /* "tensor", "Vec tile", ... */
  const char* flag;   /* a label printed on a line of its own before the dump, or NULL */
  const void* data;   /* the window's first element */
  int32_t dtype;      /* PTO_DTYPE_* */
  int32_t rank;       /* 1..PTO_FAULT_MAX_RANK */
  int64_t offsets[PTO_FAULT_MAX_RANK];
  int64_t shape[PTO_FAULT_MAX_RANK];
  int64_t stride[PTO_FAULT_MAX_RANK];
  int32_t flags;      /* PTO_PRINT_LOC */
} PtoDump;

/* ---- sanitizer mode (pl.jit(sanitizer=True)): what an instrumented kernel tells the runtime ---- */

enum { PTO_SAN_READ = 1, PTO_SAN_WRITE = 2 }; /* access modes; an in-place operand has both */

/* The bytes one operand of an op touches: `rows` rows `row_stride` bytes apart, each made of `runs`
 * runs of `width` bytes `run_stride` apart (a transposed GM window has one-element runs). */
typedef struct PtoSanAccess {
  const uint8_t* base;
  int64_t rows, row_stride;
  int64_t runs, run_stride;
  int64_t width;
  const uint8_t* origin; /* GM: the tensor's data, offsets in reports count from it (tiles: the arena) */
  const char* name;      /* the tensor parameter or tile variable */
  int32_t mode;          /* PTO_SAN_READ | PTO_SAN_WRITE */
  int32_t memory;        /* indexed like PtoCoreCtx::mem: 0 (DDR) for GM; PTO_MEM_SSBUF for the block's SSBUF */
  int32_t in_bounds;     /* 0: the access leaves its tensor or tile, `fault` says how; nothing else is set */
  int32_t peer;          /* tiles: 0 for the issuing core's memory, else 1 + the PTO_PEER_* core whose memory
                          * `base` and `origin` point into (a move that crosses the cores of a mixed block) */
  PtoFaultDetail fault;
} PtoSanAccess;

/* Synchronisation events, in the order of the pl ops they come from. */
enum {
  PTO_SAN_FLAG_SET = 0,    /* sync_src: pipe sets flag `id` towards pipe `other` */
  PTO_SAN_FLAG_WAIT = 1,   /* sync_dst: pipe waits for flag `id` set by pipe `other` */
  PTO_SAN_LOCK = 2,        /* mutex_lock / auto_mutex_lock: pipe takes every mutex of the bit set `id` */
  PTO_SAN_UNLOCK = 3,      /* mutex_unlock / auto_mutex_unlock: pipe releases them */
  PTO_SAN_BARRIER = 4,     /* bar_*: pipe (or every pipe for ALL) drains */
  PTO_SAN_CROSS_SET = 5,   /* set_cross_core: pipe signals event `id` to the other side of the block */
  PTO_SAN_CROSS_WAIT = 6,  /* wait_cross_core: pipe has received event `id` */
  PTO_SAN_AUTO_MUTEX = 8,  /* or'ed into LOCK / UNLOCK when auto_mutex inserted them */
  PTO_SAN_UNIT_SET = 16,   /* a Final matmul (pipe M) or store (pipe FIX) changed the unit flag for `other` */
  PTO_SAN_UNIT_WAIT = 17   /* a phase= matmul or store on `pipe` waited for the unit flag `other` changes */
};

typedef struct PtoSanitizerApi {
  /* The core starts the kernel: `args` names the launch. `pipes` holds, a bit per pipe, the pipes the
   * kernel's code can touch tiles (byte 0) and GM (byte 1) with on an AIV, and the same for an AIC
   * (bytes 2 and 3). */
  void (*begin)(struct PtoCoreCtx* ctx, const void* args, uint32_t pipes);
  /* The core's program has ended; `completed` is 0 when it was cut short by a fault. */
  void (*end)(struct PtoCoreCtx* ctx, int32_t completed);
  /* An op on `pipe` touches `accesses`. Returns 0 when one of them is out of bounds: the op is skipped. */
  int32_t (*access)(struct PtoCoreCtx* ctx, int32_t line, int32_t pipe, const PtoSanAccess* accesses, int32_t count);
  /* A synchronisation event PTO_SAN_* of `pipe` (with `other` pipe and `id` as the event says). */
  void (*sync)(struct PtoCoreCtx* ctx, int32_t line, int32_t event, int32_t pipe, int32_t other, uint32_t id);
  /* A tile group (or tile) is placed: slot i covers [addrs[i], addrs[i] + bytes) of memory `memory`. */
  void (*declare)(struct PtoCoreCtx* ctx, int32_t line, const char* name, int32_t decl, int32_t memory,
                  const uint32_t* addrs, int32_t slots, uint32_t bytes);
  /* pl.set_validshape to a shape outside the tile: reported, and the window is left as it was. */
  void (*bad_shape)(struct PtoCoreCtx* ctx, int32_t line, const PtoFaultDetail* detail);
  /* Profile mode (PTO_KERNEL_FLAG_PROFILE): op `op` on `pipe` does `units` of work of class
   * `op_class` (runtime::OpClass: bytes moved or computed, or multiply-accumulates of `dtype`). */
  void (*work)(struct PtoCoreCtx* ctx, int32_t line, int32_t pipe, int32_t op_class, int64_t units, int32_t dtype,
               const char* op);
} PtoSanitizerApi;

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
  /* A failed pl.pto_assert of `condition` (its source text): prints "Assertion failed: <condition>"
   * and the formatted message, and returns (the kernel goes on); with PYPTO_PRO_ASSERT=raise it
   * aborts the block with a fault carrying them instead. */
  void (*assert_fail)(struct PtoCoreCtx* ctx, int32_t line, const char* condition, const char* fmt,
                      const PtoArg* args, int32_t nargs, int32_t flags);
  /* pl.system.set_cross_core / wait_cross_core between the cores of a mixed kernel's logical block,
   * or (INTER_BLOCK) between every core of one kind of the launch. A wait without a pending set
   * suspends the core until the cores it waits for have set the flag. */
  void (*set_cross_core)(struct PtoCoreCtx* ctx, int32_t line, int32_t pipe, int32_t event_id, int32_t mode);
  void (*wait_cross_core)(struct PtoCoreCtx* ctx, int32_t line, int32_t pipe, int32_t event_id, int32_t mode);
  /* The callbacks of sanitizer-mode kernels. */
  const PtoSanitizerApi* sanitizer;
  /* A loop back-edge saw *poll_word change: the runtime checks for a cancelled launch (Ctrl-C, a
   * timeout) and ends the core's program with a fault at `line` if it was. */
  void (*poll)(struct PtoCoreCtx* ctx, int32_t line);
  /* The arena base of local memory `memory` of core `peer` of the calling core's mixed block
   * (PTO_PEER_*): where a data path that crosses cores (Acc -> Vec, Vec -> Mat) writes. NULL outside
   * mixed kernels. */
  uint8_t* (*peer_memory)(struct PtoCoreCtx* ctx, int32_t peer, int32_t memory);
  /* pl.system.sync_all: suspends the core until `participants` cores of `core_type` (0 AIV_ONLY,
   * 1 AIC_ONLY, 2 MIX) of the launch have reached it (0: every such core). `soft`: mode=SOFT, a
   * barrier of its own (its workspaces are checked by the caller). */
  void (*sync_all)(struct PtoCoreCtx* ctx, int32_t line, int32_t core_type, int32_t soft, int64_t participants);
  /* pl.dump_data: prints the window on the core's output and writes it as an .npy file into the
   * kernel's dump directory. */
  void (*dump)(struct PtoCoreCtx* ctx, int32_t line, const PtoDump* dump);
  /* Whether the GM buffer [lo, lo + bytes), an output, is still untouched (its pages not in memory).
   * Before the launch's blocks start, the runtime looks at the outputs PtoKernelDesc::outputs names;
   * an untouched one is faulted in by the cores that ask (every one helping), which then get 0; 1
   * only where that failed (its stores then go through the caches, since each page faults in zeroed
   * through the cache and streaming stores would write it twice). No system call otherwise. */
  int32_t (*fresh_memory)(struct PtoCoreCtx* ctx, const void* lo, int64_t bytes);
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
  /* Every loop back-edge compares *poll_word with poll_seen (one load) and calls api->poll when the
   * runtime changed it: how a running launch learns it was cancelled. */
  const volatile uint32_t* poll_word;
  uint32_t poll_seen;
  /* The AIC's unit flag (matmul / store phase=): 1 once a Final matmul wrote L0C, 0 once a Final
   * store read it. 0 when a block starts. */
  int32_t unit_flag;
  /* The core's special registers (pl.set_vec_mask, pl.set_ctrl_spr, pl.get_spr, ...), at their reset
   * values when a block starts (PtoResetRegisters): the vector mask (vec_mask[0] its low 64 bits,
   * vec_mask[1] the high ones; in counting mode vec_mask[0] is an element count), CTRL and AR. */
  int32_t mask_count; /* 1: counting mode (pl.set_mask_count); 0: bit mode (pl.set_mask_norm) */
  uint64_t vec_mask[2];
  uint64_t ctrl;
  int64_t ar;
  /* The block's SuperScalar buffer (PTO_SSBUF_BYTES, shared by the cores of a mixed block, zero when
   * the block starts): pl.ssbuf_store / ssbuf_load. */
  uint8_t* ssbuf;
  /* Where the last window of each GM load statement started (slot: source line % PTO_LOAD_HISTORY):
   * a load prefetches the window one step further along its own walk, as a hardware stride
   * prefetcher would. Hints only (a stale or shared slot costs speed, never a result); zero when a
   * block starts. */
  int32_t load_line[PTO_LOAD_HISTORY];
  const void* load_from[PTO_LOAD_HISTORY];
  /* The GM rows a fused row strip's load will read next (fuse_rows: load_rows sets them once it has
   * its strip: the next strip's rows, or after the last strip the first strip of the window its
   * statement probably reads next), which the strip's fused passes prefetch a line per 16 lanes as
   * they compute (FusedRows): a bulk prefetch stalls the core, one spread over the computation does
   * not. Hints only (stale values cost speed, never a result). ahead_at: the next line, or null. */
  const char* ahead_at;
  int64_t ahead_col;       /* bytes of the current row already prefetched */
  int64_t ahead_row_bytes; /* bytes of a row */
  int64_t ahead_stride;    /* bytes between rows */
  int64_t ahead_rows;      /* rows left, the current one included */
  const void* ahead_window; /* the predicted next window of the load (its first strip follows the last) */
  /* The launch's number, unique in the process and never 0: what device code derives from GM that
   * cannot change during a launch is kept for the rest of the launch under it (gemm.h, Reuse). */
  uint64_t launch_id;
} PtoCoreCtx;

/* The special registers as a block starts: a bit-mode mask of all ones, CTRL at its hardware
 * default, AR 0. */
static inline void PtoResetRegisters(PtoCoreCtx* ctx) {
  ctx->mask_count = 0;
  ctx->vec_mask[0] = ctx->vec_mask[1] = ~(uint64_t)0;
  ctx->ctrl = PTO_HW_CTRL_DEFAULT;
  ctx->ar = 0;
}

#ifdef __cplusplus
}
#endif

#endif /* PYPTO_PRO_ABI_H_ */
