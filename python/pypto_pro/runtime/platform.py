"""The simulated NPU's platform information (docs/device.md#arch-models): the arch model kernels compile
for by default (PYPTOPRO_JIT_ARCH), its SoC version, core counts and local memory sizes.

    from pypto_pro.runtime.platform import get_platform_info
    info = get_platform_info()
    kernel[None, info.core_num](q, k, v, o)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from pypto_pro import _C


@dataclass(frozen=True)
class PlatformInfo:
    """What the simulated device models: `core_num` AI cores (one AIC and `aiv_num // core_num` AIVs
    each), `memory` the byte capacity of each local memory of a core."""

    arch: str
    soc_version: str
    model: str
    core_num: int
    aic_num: int
    aiv_num: int
    memory: dict = field(default_factory=dict)


def _arch_name() -> str:
    name = os.environ.get("PYPTOPRO_JIT_ARCH") or "a5"
    if name not in _C.arch_names():
        raise ValueError(f"PYPTOPRO_JIT_ARCH must be one of {', '.join(_C.arch_names())}, got {name!r}")
    return name


def get_platform_info(force_refresh: bool = False, arch: str | None = None) -> PlatformInfo:
    """The arch model `arch` (default: PYPTOPRO_JIT_ARCH, itself a5 by default). `force_refresh` is
    accepted for the public signature; the model never changes while a process runs."""
    del force_refresh
    name = arch if arch is not None else _arch_name()
    if name not in _C.arch_names():
        raise ValueError(f"arch must be one of {', '.join(_C.arch_names())}, got {name!r}")
    info = _C.arch_info(name)
    soc = re.search(r"\((DAV_\w+)\)", info["model"])
    return PlatformInfo(arch=info["name"], soc_version=soc.group(1) if soc else "", model=info["model"],
                        core_num=info["aic_cores"], aic_num=info["aic_cores"], aiv_num=info["aiv_cores"],
                        memory=dict(info["capacity"]))


__all__ = ["PlatformInfo", "get_platform_info"]
