"""Host code written for torch_npu, unchanged, on the simulated device (docs/npu_compat.md).

    import pypto_pro.npu_compat                            # first, then the script's own imports
    /usr/bin/python3 -m pypto_pro.npu_compat script.py [args]   # or run a script with it installed

It installs a `torch_npu` module and `torch.npu` (devices, streams, events, synchronisation) backed by
pypto_pro.runtime, and lets torch functions and tensor methods take the device strings "npu" and
"npu:0": such tensors are CPU tensors, which the simulated device reads and writes in place, so
`torch.rand(..., device="npu:0")`, `x.npu()`, `x.to("npu")` and `kernel[torch.npu.current_stream(),
n](...)` work as on the NPU. Limits: one device (npu:0); `torch.device("npu")` objects cannot be made
(torch itself refuses the type name); device strings are translated on the threads that installed
the layer (install() on another thread does it there); waits between streams happen on the host.
"""

from __future__ import annotations

import re
import sys
import threading
import types

import torch
from torch.overrides import TorchFunctionMode

import pypto_pro.runtime as runtime
from pypto_pro import _C

DEVICE_COUNT = 1
_DEVICE = re.compile(r"npu(?::(\d+))?")


def _device_index(device) -> int:
    """The index of an NPU device given as "npu", "npu:N", N or None (the current one)."""
    if device is None:
        return 0
    if isinstance(device, int) and not isinstance(device, bool):
        index = device
    elif isinstance(device, str) and _DEVICE.fullmatch(device):
        index = int(_DEVICE.fullmatch(device).group(1) or 0)
    else:
        raise ValueError(f"device must be 'npu', 'npu:N' or an int, got {device!r}")
    if not 0 <= index < DEVICE_COUNT:
        raise ValueError(f"device npu:{index} does not exist: the simulated NPU has {DEVICE_COUNT} device (npu:0)")
    return index


def _on_host(value):
    """A torch argument with NPU device strings replaced by "cpu" (lists and tuples too)."""
    if isinstance(value, str):
        if _DEVICE.fullmatch(value):
            _device_index(value)
            return "cpu"
        return value
    if isinstance(value, (list, tuple)) and any(isinstance(v, (str, list, tuple)) for v in value):
        return type(value)(_on_host(v) for v in value)
    return value


class _NpuDevices(TorchFunctionMode):
    """Every torch function and tensor method sees "npu" device strings as "cpu"."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        args = tuple(_on_host(a) for a in args)
        kwargs = {k: _on_host(v) for k, v in (kwargs or {}).items()}
        return func(*args, **kwargs)


class Stream(_C.Stream):
    """torch.npu.Stream: a stream of the simulated device (device and priority are accepted and have no
    effect: there is one device, and streams run their launches in order)."""

    def __init__(self, device=None, priority=0, **kwargs):
        _device_index(device)
        super().__init__()

    def wait_stream(self, stream) -> None:
        """Later work of this stream runs after what `stream` has queued: waited for on the host."""
        stream.synchronize()

    def wait_event(self, event) -> None:
        event.synchronize()

    def record_event(self, event=None):
        event = event if event is not None else Event()
        event.record(self)
        return event


class Event(_C.Event):
    """torch.npu.Event: records a point of a stream; elapsed_time() between two is in milliseconds."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        super().__init__()

    def record(self, stream=None) -> None:
        super().record(stream)

    def wait(self, stream=None) -> None:
        """Later work of `stream` runs after this event: waited for on the host."""
        self.synchronize()


def set_device(device) -> None:
    _device_index(device)


def current_device() -> int:
    return 0


def device_count() -> int:
    return DEVICE_COUNT


def is_available() -> bool:
    return True


def synchronize(device=None) -> None:
    """Waits for every launch queued on the device; raises pypto_pro.KernelFault for a fault."""
    _device_index(device)
    runtime.synchronize()


def current_stream(device=None):
    _device_index(device)
    return runtime.current_stream()


def default_stream(device=None):
    _device_index(device)
    return runtime.default_stream()


def set_stream(stream) -> None:
    _C._set_current_stream(None if stream is None or stream is runtime.default_stream() else stream)


def stream(s):
    """`with torch.npu.stream(s):` makes `s` the current stream of this thread."""
    return runtime.stream(s)


def _no_device_memory(*args, **kwargs) -> None:
    """The simulated device keeps tensors in host memory: nothing to release or reset."""


def _npu_namespace() -> types.ModuleType:
    npu = types.ModuleType("torch.npu", "torch.npu on the simulated device (pypto_pro.npu_compat)")
    for name in ("set_device", "current_device", "device_count", "is_available", "synchronize", "current_stream",
                 "default_stream", "set_stream", "stream", "Stream", "Event"):
        setattr(npu, name, globals()[name])
    npu.manual_seed = lambda seed: torch.manual_seed(seed)
    npu.manual_seed_all = lambda seed: torch.manual_seed(seed)
    npu.empty_cache = _no_device_memory
    npu.reset_peak_memory_stats = _no_device_memory
    npu.get_device_name = lambda device=None: f"simulated {runtime.platform.get_platform_info().model}"
    return npu


def _tensor_npu(self, device=None, non_blocking=False, **kwargs):
    """Tensor.npu(): the tensor itself (it already lives where the simulated device reads it)."""
    _device_index(device)
    return self


_installed = threading.local()
_lock = threading.Lock()


def install() -> None:
    """Installs the layer (idempotent); on another thread, enables device strings there too."""
    with _lock:
        if "torch_npu" not in sys.modules or not hasattr(torch, "npu"):
            npu = _npu_namespace()
            torch.npu = npu
            sys.modules["torch.npu"] = npu
            torch_npu = types.ModuleType("torch_npu", "torch_npu on the simulated device (pypto_pro.npu_compat)")
            torch_npu.npu = npu
            torch_npu.__version__ = "simulated"
            sys.modules["torch_npu"] = torch_npu
            torch.Tensor.npu = _tensor_npu
            torch.Tensor.is_npu = property(lambda self: self.device.type == "cpu")
    if not getattr(_installed, "mode", None):
        _installed.mode = _NpuDevices()
        _installed.mode.__enter__()  # stays active for the rest of the thread


def main(argv=None) -> int:
    """python -m pypto_pro.npu_compat script.py [args]: runs the script as __main__ with the layer
    installed."""
    import runpy

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m pypto_pro.npu_compat script.py [args...]\n\n" + __doc__.split("\n\n")[1])
        return 0 if argv else 2
    from pypto_pro import npu_compat  # the installed module (this file also runs as __main__)

    npu_compat.install()
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")
    return 0


import pypto_pro.runtime.platform  # noqa: E402  (get_device_name reads it)

if __name__ == "__main__":
    sys.exit(main())
install()

__all__ = ["install", "main", "Stream", "Event", "DEVICE_COUNT"]
