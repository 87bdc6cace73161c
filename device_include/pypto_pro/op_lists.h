/* The element-wise ops of the language and the device functors that compute them: vector_ops.h
 * defines pto::add, pto::adds, ... from these lists, and the tier-0 executor (tier0_exec.h) picks an
 * op's functor by its position in them, so the two always compute an op the same way. Plain C
 * preprocessor lists: the compiler's tier-0 pass (src/jit/tier0.cpp) reads the names. */
#ifndef PYPTO_PRO_OP_LISTS_H_
#define PYPTO_PRO_OP_LISTS_H_

#define PTO_BINARY_OPS(X) X(add, AddF) X(sub, SubF) X(mul, MulF) X(div, DivF) X(maximum, MaxF) X(minimum, MinF)
#define PTO_SCALAR_OPS(X) X(adds, AddF) X(subs, SubF) X(muls, MulF) X(divs, DivF) X(maxs, MaxF) X(mins, MinF)
#define PTO_UNARY_OPS(X)                                                                                        \
  X(neg, NegF) X(abs, AbsF) X(relu, ReluF) X(exp, ExpF) X(log, LogF) X(sqrt, SqrtF) X(rsqrt, RsqrtF)           \
  X(recip, RecipF)

#endif /* PYPTO_PRO_OP_LISTS_H_ */
