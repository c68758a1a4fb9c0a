"""Where a neural step runs: `--device auto|cpu|cuda` (mathscout.options.DEVICE) resolved once for every trainer, the
dense and colbert encoding and the torch rerankers. `auto` is CUDA when torch sees a GPU, else the CPU; `cuda` without
a CUDA build of torch (or a visible GPU) is one line saying so. On CUDA the forward passes run under bf16 autocast
(the weights stay fp32, and are stored fp32: a model trained on a GPU loads and ranks the same on a CPU)."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator

from mathscout.errors import MathScoutError
from mathscout.options import DEVICE

DEVICES = ("auto", "cpu", "cuda")
# a GPU driver's files: without any of them torch sees no GPU, and `auto` need not import torch (~1 s) to know
GPU_DRIVER_FILES = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd")


def cuda_available() -> bool:
    """True when torch is installed with CUDA and sees a GPU (False without torch or without a GPU driver)."""
    if not any(os.path.exists(path) for path in GPU_DRIVER_FILES):
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def resolve_device(choice: str | None = None) -> str:
    """ "cpu" or "cuda" for `choice` (None: the option's default, `auto`); `cuda` where torch has none is refused."""
    choice = choice or DEVICE.default
    if choice not in DEVICES:
        raise MathScoutError(f"unknown device '{choice}' (choose from {', '.join(DEVICES)})")
    if choice == "cpu":
        return "cpu"
    if cuda_available():
        return "cuda"
    if choice == "cuda":
        raise MathScoutError(
            "--device cuda: this torch has no CUDA device (a CPU build, or no GPU visible); use --device cpu or auto"
        )
    return "cpu"


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    """The `--device` option as every neural command spells it (mathscout.options.DEVICE)."""
    parser.add_argument(DEVICE.flag, choices=DEVICES, default=DEVICE.default, help=DEVICE.help)


@contextlib.contextmanager
def autocast(device: str) -> Iterator[None]:
    """bf16 autocast on CUDA; nothing on the CPU (fp32, as the models were measured)."""
    if device != "cuda":
        yield
        return
    import torch

    with torch.autocast("cuda", dtype=torch.bfloat16):
        yield
