"""Which library handles a signal in this process: the shard tests check that joining Ray keeps the JVM's SIGSEGV
handler (run in a subprocess as `from tests.support.signals import fault_handler_library`)."""

from __future__ import annotations

from pathlib import Path


def fault_handler_library(signal_number: int) -> str:
    """The shared library whose function handles `signal_number` in this process (dladdr of its sigaction)."""
    import ctypes

    libc = ctypes.CDLL(None)
    buffer = ctypes.create_string_buffer(512)
    assert libc.sigaction(signal_number, None, buffer) == 0
    handler = ctypes.c_void_p.from_buffer(buffer).value

    class DlInfo(ctypes.Structure):
        _fields_ = [
            ("fname", ctypes.c_char_p),
            ("fbase", ctypes.c_void_p),
            ("sname", ctypes.c_char_p),
            ("saddr", ctypes.c_void_p),
        ]

    info = DlInfo()
    libc.dladdr(ctypes.c_void_p(handler), ctypes.byref(info))
    return Path((info.fname or b"").decode()).name
