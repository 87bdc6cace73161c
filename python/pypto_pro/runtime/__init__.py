"""The simulated Ascend device: streams, events and synchronisation (SIMULATOR.md "Streams")."""

from __future__ import annotations

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


def synchronize() -> None:
    """Waits for every stream; raises KernelFault for the first fault found."""
    _C.synchronize()


def device_threads() -> int:
    """Host threads that run kernel blocks (PYPTO_PRO_NUM_THREADS, default all cores)."""
    return _C.device_threads()


__all__ = ["Stream", "Event", "default_stream", "current_stream", "stream", "synchronize", "device_threads"]
