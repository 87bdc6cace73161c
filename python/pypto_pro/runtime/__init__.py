"""The simulated Ascend device: streams, events and synchronisation (docs/device.md#streams-and-events)."""

from __future__ import annotations

import atexit
import contextlib

from pypto_pro import _C

Stream = _C.Stream
Event = _C.Event


def default_stream() -> Stream:
    """The process-wide default stream."""
    return _C.default_stream()


def current_stream() -> Stream:
    """The stream `kernel[None, block_dim]` launches go to on this thread."""
    return _C.current_stream()


@contextlib.contextmanager
def stream(s: Stream | None):
    """`with pypto_pro.runtime.stream(s):` makes `s` the current stream of this thread."""
    if s is not None and not isinstance(s, Stream):
        raise TypeError(f"stream() expects a pypto_pro.runtime.Stream or None, got {type(s).__name__}")
    previous = _C.current_stream()
    _C._set_current_stream(s)
    try:
        yield s
    finally:
        _C._set_current_stream(None if previous is _C.default_stream() else previous)


def synchronize(timeout: float | None = None) -> None:
    """Waits for every stream; raises KernelFault for the first fault found. With `timeout` (seconds),
    a wait that runs out stops the running launches and drops the queued ones, and raises
    pypto_pro.KernelTimeout naming the kernel and the line it was at. Ctrl-C does the same and raises
    KeyboardInterrupt; the streams stay usable either way."""
    _C.synchronize(timeout)


def device_threads() -> int:
    """Host threads that run kernel blocks (PYPTO_PRO_NUM_THREADS, default all cores)."""
    return _C.device_threads()


# Launches still queued at exit are waited for; a fault nobody synchronised is printed, not dropped.
atexit.register(_C._report_at_exit)

__all__ = ["Stream", "Event", "default_stream", "current_stream", "stream", "synchronize", "device_threads"]
