"""The kernel-language front end: Python AST -> C++ IR."""

from pypto_pro.language.parser.parser import KernelParser, parse_kernel

__all__ = ["KernelParser", "parse_kernel"]
