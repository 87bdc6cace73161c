/* The tier-0 program: a kernel's verified IR as a flat list of instructions that the routines
 * library's executor (tier0_exec.h) runs while the kernel's own library compiles in the background
 * (docs/jit.md#tier-0-first-launches). Written by the compiler (src/jit/tier0.cpp) and read by that
 * executor, so plain C structs. */
#ifndef PYPTO_PRO_TIER0_H_
#define PYPTO_PRO_TIER0_H_

#include <stdint.h>

#include "pypto_pro/op_lists.h"

#define PTO_T0_VERSION 15
#define PTO_T0_MAX_RANK 4

/* Element types of tiles and tensors (the routines' PTO_ROUTINE_ELEMS). */
enum {
  PTO_T0_I8, PTO_T0_I16, PTO_T0_I32, PTO_T0_I64, PTO_T0_U8, PTO_T0_U16, PTO_T0_U32, PTO_T0_U64,
  PTO_T0_F16, PTO_T0_BF16, PTO_T0_F32
};

/* The kinds of scalar register values: a register is an int64_t holding a bool (0/1), an int32
 * (sign-extended) or an int64, or an fp32 (its bits in the low 32). */
enum { PTO_T0_BOOL, PTO_T0_INT32, PTO_T0_INT64, PTO_T0_FP32 };

/* Instructions. Registers r[], tile variables t[] (each names a slot), slots s[] (a tile's data and
 * valid window), tile groups g[] (their cursor), tensors gm[]. */
enum {
  PTO_T0_END,      /* the kernel returns */
  PTO_T0_CONST,    /* r[a] = imm */
  PTO_T0_MOV,      /* r[a] = r[b] */
  PTO_T0_SLOT,     /* r[a] = launcher slot b read as kind c */
  PTO_T0_SHAPE,    /* r[a] = int32_t(gm[b].shape[c]) */
  PTO_T0_BUILTIN,  /* r[a] = block_idx (b=0), block_num (1), subblock_idx (2), subblock_num (3), core is AIV (4), AIC (5) */
  PTO_T0_CONV,     /* r[a] = static_cast<kind d>(r[b] of kind c) */
  PTO_T0_BIN,      /* r[a] = r[b] op(e) r[c], both of kind d (the math kind); comparisons give a bool */
  PTO_T0_NOT,      /* r[a] = !r[b] */
  PTO_T0_NEG,      /* r[a] = -r[b] of kind d */
  PTO_T0_BITNOT,   /* r[a] = ~r[b] of kind d */
  PTO_T0_JMP,      /* goto imm */
  PTO_T0_JZ,       /* if (!r[a]) goto imm */
  PTO_T0_POLL,     /* cancellation check at a loop's back-edge */
  PTO_T0_STEP0,    /* pl.range's step r[a] is zero: fault */
  PTO_T0_LOOPCMP,  /* r[a] = r[d] > 0 ? r[b] < r[c] : r[b] > r[c] */
  PTO_T0_DECL,     /* group a: its slots placed, its cursor at depth - 1 */
  PTO_T0_SELECT,   /* t[a] = a slot of group b: next (c=0), current (1), previous (2), index r[d] checked (3), index imm (4) */
  PTO_T0_TMOV,     /* t[a] = t[b] */
  PTO_T0_LOAD,     /* tile t[a] <- gm[b] at offsets r[c..c+rank), order d, tile units e */
  PTO_T0_STORE,    /* gm[b] <- tile t[a] at offsets r[c..], order d, tile units e, relu f, scale imm, atomic g, phase h */
  PTO_T0_VBIN,     /* t[a] = op e of PTO_BINARY_OPS (t[b], t[c]) */
  PTO_T0_VSCALAR,  /* t[a] = op e of PTO_SCALAR_OPS (t[b], r[c] of kind d) */
  PTO_T0_VUNARY,   /* t[a] = op e of PTO_UNARY_OPS (t[b]) */
  PTO_T0_COMPACT,  /* a fractal tile t[a] without compact=1 must hold its whole shape (op s0, message s1) */
  PTO_T0_MOVE,     /* t[a] <- t[b] (L1 -> L0A/L0B), transposed if c, relu f, scale imm */
  PTO_T0_MATMUL,   /* t[a] = t[b] x t[c] + t[f] by e (0: nothing, 1: matmul_acc's acc, 2: the bias row), phase d,
                      op name s0 */
  PTO_T0_VALIDSHAPE, /* t[a]'s valid window = r[b] rows x r[c] cols (a 1-D shape: b < 0, one row) */
  PTO_T0_ROWREDUCE,  /* t[a] = row_sum (e=0), row_max (1), row_min (2) of t[b] */
  PTO_T0_ROWEXPAND,  /* t[a] = op e of PTO_BINARY_OPS (t[b], column tile t[c] broadcast along the rows) */
  PTO_T0_COLEXPAND,  /* t[a] = op e of PTO_BINARY_OPS (t[b], row tile t[c] broadcast down the columns) */
  PTO_T0_PRINT,      /* pl.printf(s0, r[b..b+d)): argument k of kind (imm >> 2k) & 3, f: loc */
  PTO_T0_ASSERT,     /* pl.pto_assert(r[c], s0, r[b..b+d)) as PRINT, condition text s1 */
  PTO_T0_TRAP,       /* pl.trap() */
  PTO_T0_EXPANDS,    /* t[a]'s window = r[c] of kind d as the element type */
  PTO_T0_COLREDUCE,  /* t[a] = col_sum (e=0), col_max (1), col_min (2) of t[b] */
  PTO_T0_CAST,       /* t[a] = t[b] converted, round mode e (pto::RoundMode) */
  PTO_T0_COMPARE,    /* mask t[a] = eq (e=0), ne, lt, le, gt, ge (5) of t[b] and t[c] */
  PTO_T0_COMPARES,   /* mask t[a] = the compare e of t[b] and r[c] of kind d */
  PTO_T0_VSELECT,    /* t[a] = mask t[b] ? t[c] : t[f] */
  PTO_T0_VSELECTS,   /* t[a] = mask t[b] ? t[c] : r[d] of kind e */
  PTO_T0_TRANSPOSE,  /* t[a] = t[b] transposed (src's valid window) */
  PTO_T0_BITWISE,    /* t[a] = t[b] & t[c] (e=0), t[b] | t[c] (1), ~t[b] (2), t[b] ^ t[c] with scratch t[f] (3),
                        t[b] << t[c] (4), t[b] >> t[c] (5) */
  PTO_T0_BITWISES,   /* t[a] = t[b] & (e=0) or | (1) r[c] of kind d as the element type */
  PTO_T0_SUBVIEW,    /* t[a] = slot g: t[b][r[c]:r[d], r[e]:r[f]] (pto::Subview: the tile's type, row stride and
                        bytes from the slice's corner, its window clipped) */
  /* The data paths between the cores of a mixed block (they land in the other core's memory): */
  PTO_T0_ACCTOVEC,   /* Vec t[a] <- Acc t[b] through the fixpipe: acc_to_vec_mode c (-1: not given), relu f, scale imm */
  PTO_T0_INSERT,     /* Mat t[a] <- Vec t[b]'s window at [r[c], r[d]], transposed (NZ into ZN) if e; op name s0 */
  PTO_T0_CROSS,      /* set_cross_core (a=0) / wait_cross_core (a=1): pipe b, event c, sync mode d */
  PTO_T0_GETVAL,     /* r[a] = element r[c] (a linear offset) of t[b] (e = 1: of gm[b]), as kind d (pl.getval,
                        tile[i, j]; fp16 / bf16 read as fp32) */
  PTO_T0_SETVAL,     /* element r[b] of t[a] (e = 1: of gm[a]) = r[c] of kind d (pl.setval) */
  PTO_T0_TERNARY,    /* t[a] = x + y + z (e=0), x * y + z (1), relu(x * y + z) (2) of x = t[b], y = t[c], z = t[f] over
                        t[a]'s window, each intermediate rounded (addc, mul_add_dst, fused_mul_add(_relu)) */
  PTO_T0_FILLINDEX,  /* t[a]'s first row: r[c] of kind d + k along its valid columns (fill_index) */
  PTO_T0_ARGREDUCE,  /* t[a] = the index (int32 / uint32) of the first max (e=0) or min (1) of each row (c=0) or
                        column (1) of t[b] (argmax, argmin, col_argmax, col_argmin) */
  PTO_T0_FIELD,      /* r[a] = the TilingData field at byte imm, of kind d: a scalar (c = 0) or element r[e] of an
                        array of c (checked: pto::ArrayAt's fault) */
  PTO_T0_AXPY,       /* t[a] = r[c] of kind d * t[b] + t[a] over t[a]'s window (axpy; t[b] fp16 into fp32 too) */
  PTO_T0_PART,       /* t[a] = partadd (e=0), partmax (1), partmin (2), partmul (3) of t[b] and t[c] */
  PTO_T0_FILLPAD,    /* t[a] = t[b]'s valid window, the rest t[a]'s pad value; mode e (fillpad) */
  /* GM views and pointers: gm[a] is a variable of the kernel (its PtoT0Tensor's slot is -1) */
  PTO_T0_VIEW,       /* gm[a] = pl.make_tensor(gm[b], shape r[c..c+rank), strides r[d..d+rank) if e, else
                        row-major), named s0; gm[a]'s PtoT0Tensor gives the view's dtype and rank */
  PTO_T0_PTR,        /* gm[a] = pl.addptr(gm[b], r[c]) (e=0), or pl.make_ptr(gm[b], gm[a]'s dtype) (e=1) */
  PTO_T0_GMMOV,      /* gm[a] = gm[b] */
  PTO_T0_STRIDE,     /* pl.set_stride(gm[a], strides r[c..c+rank)) */
  PTO_T0_SYNCALL,    /* pl.system.sync_all() without workspaces: core type b, mode c (a resident launch's barrier) */
  PTO_T0_STEPCAST,   /* lhs t[b] = relu(t[b] + t[c]) (d=0), relu(t[b] - t[c]) (1), t[b] * t[c] (2), then t[a] = t[b]
                        converted with round mode e, run by run of t[a]'s window (add_relu_cast, sub_relu_cast,
                        mul_cast) */
};

/* Binary operators of PTO_T0_BIN (the IR's). */
enum {
  PTO_T0_ADD, PTO_T0_SUB, PTO_T0_MUL, PTO_T0_DIV, PTO_T0_FLOORDIV, PTO_T0_MOD, PTO_T0_MIN, PTO_T0_MAX,
  PTO_T0_EQ, PTO_T0_NE, PTO_T0_LT, PTO_T0_LE, PTO_T0_GT, PTO_T0_GE,
  PTO_T0_BITAND, PTO_T0_BITOR, PTO_T0_BITXOR, PTO_T0_SHL, PTO_T0_SHR
};

typedef struct PtoT0Insn {
  int32_t code;
  int32_t line;
  int32_t a, b, c, d, e, f, g, h;
  int64_t imm;
  const char *s0, *s1;
} PtoT0Insn;

/* A tensor or pointer (rank 0) parameter: launcher slot `slot` holds its data; a tensor's dims[i] >= 0
 * is fixed, -1 - k reads the int32 of launcher slot k; a pointer's buffer has the bytes launcher slot
 * bytes_slot holds. slot -1: a view or pointer variable of the kernel, set by PTO_T0_VIEW / PTR / GMMOV. */
typedef struct PtoT0Tensor {
  int32_t slot, elem, rank;
  int32_t elem_bytes, written; /* its element's size; whether the kernel writes it (an output) */
  int32_t bytes_slot;
  int64_t dims[PTO_T0_MAX_RANK];
  const char* name;
} PtoT0Tensor;

/* One tile slot of a group: its memory (PtoCoreCtx::mem's index), where it lies there, its declared
 * window, its mutex ids. */
typedef struct PtoT0Slot {
  int32_t elem, mem, rows, cols, pad;
  int32_t layout, compact; /* pto::Layout; TileType(compact=): where element offsets land (ElementIndexOf) */
  uint32_t addr;
  int32_t valid_rows, valid_cols;
  uint32_t mutex_mask;
} PtoT0Slot;

/* A tile group: slots [first, first + depth) of the slot table. */
typedef struct PtoT0Group {
  int32_t first, depth;
} PtoT0Group;

typedef struct PtoT0Program {
  uint32_t version;
  int32_t num_regs, num_tile_vars, num_slots, num_groups, num_tensors, num_insns;
  /* The TilingData parameter's launcher slot (-1: none) and size: a tier-0 launch copies its bytes after
   * the slots (PtoT0Args) and the slot then holds their offset from slots[0]. */
  int32_t tiling_slot, tiling_bytes;
  const PtoT0Insn* insns;
  const PtoT0Tensor* tensors;
  const PtoT0Slot* slots;
  const PtoT0Group* groups;
} PtoT0Program;

/* What a tier-0 launch submits as its arguments: the program, then the launcher's 64-bit slots, then
 * the TilingData's bytes (8-byte aligned) when the kernel has one. */
typedef struct PtoT0Args {
  const PtoT0Program* program;
  uint64_t slots[1]; /* as many as the launcher has */
} PtoT0Args;

#endif /* PYPTO_PRO_TIER0_H_ */
