"""Helpers kernels in other test files import (test_scalar_features.py): inlined from this module."""

import pypto_pro.language as pl


def scaled_copy(dst, src, factor):
    pl.muls(dst, src, factor)
    return factor * 2


def read_at(t, i):
    return pl.getval(t, i)


def exp_with_extra_argument(t):
    pl.exp(t, t, 3)


def ssbuf_round_trip(m):
    pl.ssbuf_store(m, 0)
