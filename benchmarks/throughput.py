"""Benchmarks 1 and 2: training throughput against the textbook pipeline, and closeness to the machine.

1. ``train_throughput``: images per second of one training epoch, the toolkit's :class:`Trainer` (its
   defaults: data on the device, batched on-device augmentation, channels_last, per-layer gradient
   norms tracked) against :class:`~textbook.TextbookPipeline` (PIL transforms, DataLoader, eager fp32
   NCHW), same ResNet-9 width and seed, batch size, images and optimizer (SGD, momentum 0.9). Both sides
   are in steady state: one warm-up epoch each, then epochs interleaved A B / B A.
2. ``flop_efficiency``: the training step's model FLOPs (forward + backward, counted once by
   ``torch.utils.flop_counter``: convolutions and matrix products) times steps per second, divided by
   the same process's dense rate: the better of a large fp32 ``torch.matmul`` and the same GEMM as a
   1x1 convolution (oneDNN), each best of several. Both are reported: on AMD CPUs the MKL behind
   ``torch.matmul`` takes a slower code path than oneDNN, so matmul alone understates the machine.
   The profile of one epoch names where the rest of the time goes.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from common import BenchResult, interleaved, median, spread, timed
from textbook import TEXTBOOK_WORKERS, TextbookPipeline

from initmem.empirical.config import RunConfig
from initmem.empirical.data import DataSplits, load_splits, split_indices, synthetic_pools
from initmem.empirical.models import build_model
from initmem.empirical.trainer import Trainer

#: Targets of benchmark 1 (ours over textbook, images per second) on the CPU and on a GPU.
SPEEDUP_TARGET = {"cpu": 1.5, "cuda": 5.0}


@dataclass(frozen=True)
class Sizes:
    """How much work each measurement does (``--quick`` shrinks it for the smoke test)."""

    widths: tuple[float, ...] = (0.125, 0.25)
    flop_widths: tuple[float, ...] = (0.125, 0.25, 1.0)
    batch_size: int = 128
    train_size: int = 2048  # images per timed epoch (16 steps of 128)
    wide_train_size: int = 384  # width 1 is slow on a CPU: 3 steps per timed epoch
    repeats: int = 5
    wide_repeats: int = 3
    matmul_n: int = 2048
    gemm_channels: int = 512
    device: str = "cpu"
    textbook_workers: int = TEXTBOOK_WORKERS


QUICK = Sizes(
    widths=(0.0625,),
    flop_widths=(0.0625,),
    batch_size=16,
    train_size=64,
    wide_train_size=32,
    repeats=1,
    wide_repeats=1,
    matmul_n=256,
    gemm_channels=64,
)


def bench_config(width: float, sizes: Sizes, train_size: int, **changes) -> RunConfig:
    """A synthetic-data run config for timing (tiny validation and test sets; nothing is written)."""
    values = dict(
        dataset="synthetic",
        train_size=train_size,
        val_size=256,
        test_size=256,
        model="resnet9",
        width=width,
        optimizer="sgd",
        lr=1e-3,
        momentum=0.9,
        batch_size=sizes.batch_size,
        epochs=1000,
        device=sizes.device,
        quiet=True,
        out_dir=tempfile.gettempdir(),
    )
    values.update(changes)
    return RunConfig.from_dict(values)


def textbook_images(config: RunConfig) -> tuple[np.ndarray, np.ndarray]:
    """The uint8 training images ``(n, 3, 32, 32)`` and labels that ``load_splits(config)`` normalizes."""
    pool_x, pool_y, _, _ = synthetic_pools(config)
    train_idx, _ = split_indices(
        len(pool_y), config.resolved_val_size, config.train_size, config.split_seed
    )
    return pool_x[train_idx.numpy()], pool_y[train_idx.numpy()].astype(np.int64)


def epoch_rate(train_epoch, images_per_epoch: int, device: str = "cpu"):
    """A measurement function: one epoch, returns images per second (waits for the GPU)."""

    def run() -> None:
        train_epoch()
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def measure() -> float:
        return images_per_epoch / timed(run)

    return measure


def bench_train_throughput(sizes: Sizes, data: DataSplits | None = None) -> list[BenchResult]:
    """Benchmark 1 at each of ``sizes.widths``."""
    results = []
    base = bench_config(sizes.widths[0], sizes, sizes.train_size)
    splits = data if data is not None else load_splits(base, sizes.device)
    images, labels = textbook_images(base)  # the same images, as uint8
    device = sizes.device
    for width in sizes.widths:
        config = base.replace(width=width)
        ours = Trainer(config, splits)
        textbook = TextbookPipeline(
            build_model(config).to(device),
            images,
            labels,
            batch_size=sizes.batch_size,
            num_workers=sizes.textbook_workers,
            device=device,
        )
        n = config.steps_per_epoch * sizes.batch_size
        try:
            rates = interleaved(
                {
                    "ours": epoch_rate(ours.train_epoch, n, device),
                    "textbook": epoch_rate(textbook.train_epoch, n, device),
                },
                sizes.repeats,
            )
        finally:
            textbook.close()
        ours_rate, textbook_rate = median(rates["ours"]), median(rates["textbook"])
        results.append(
            BenchResult(
                name=f"train_throughput_w{width:g}",
                description=(
                    f"ResNet-9 width {width:g}, batch {sizes.batch_size}, {device.upper()}: our "
                    f"Trainer vs the textbook pipeline (PIL + DataLoader({sizes.textbook_workers} "
                    "workers) + eager fp32), images/s, ours over textbook"
                ),
                figures={
                    "ours_img_per_s": ours_rate,
                    "textbook_img_per_s": textbook_rate,
                    "ours_range_img_per_s": spread(rates["ours"]),
                    "textbook_range_img_per_s": spread(rates["textbook"]),
                    "images_per_epoch": n,
                    "repeats": sizes.repeats,
                },
                ratio=ours_rate / textbook_rate,
                target=SPEEDUP_TARGET["cuda" if device.startswith("cuda") else "cpu"],
            )
        )
    return results


# ---------------------------------------------------------------------------------- benchmark 2
def training_step_flops(config: RunConfig) -> int:
    """Model FLOPs of one training step (forward + backward) at ``config.batch_size``, counted by
    ``torch.utils.flop_counter.FlopCounterMode`` (convolutions and matrix products; elementwise ops,
    BatchNorm and pooling are not counted, as in the usual model-FLOPs convention)."""
    from torch.utils.flop_counter import FlopCounterMode

    model = build_model(config).train()
    images = torch.randn(config.batch_size, 3, 32, 32)
    labels = torch.randint(0, 10, (config.batch_size,))
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(images), labels).backward()
    return int(counter.get_total_flops())


def matmul_flop_rate(n: int, repeats: int = 10, dtype: torch.dtype = torch.float32) -> float:
    """Best FLOP/s of ``torch.matmul`` of two ``n x n`` matrices over ``repeats`` calls (2 n^3 FLOPs)."""
    a = torch.randn(n, n, dtype=dtype)
    b = torch.randn(n, n, dtype=dtype)
    torch.matmul(a, b)
    best = min(timed(lambda: torch.matmul(a, b)) for _ in range(repeats))
    return 2.0 * n**3 / best


def conv_gemm_flop_rate(channels: int, repeats: int = 10) -> float:
    """Best FLOP/s of a 1x1 convolution, channels_last, batch 64 at 16x16, ``channels`` in and out: a
    dense GEMM of (64 * 256) x channels x channels through oneDNN."""
    x = torch.randn(64, channels, 16, 16).contiguous(memory_format=torch.channels_last)
    w = torch.randn(channels, channels, 1, 1).contiguous(memory_format=torch.channels_last)
    F.conv2d(x, w)
    best = min(timed(lambda: F.conv2d(x, w)) for _ in range(repeats))
    return 2.0 * 64 * 16 * 16 * channels**2 / best


def profile_epoch_time(trainer: Trainer, top: int = 8) -> list[list]:
    """Where a training epoch's CPU time goes: the ``top`` operators by self CPU time, as
    ``[name, share of the total self CPU time]``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.train_epoch()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    ranked = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:top]
    return [[e.key, round(e.self_cpu_time_total / total, 3)] for e in ranked]


def bench_flop_efficiency(sizes: Sizes) -> list[BenchResult]:
    """Benchmark 2 at each of ``sizes.flop_widths``: achieved model FLOP/s over matmul FLOP/s."""
    results = []
    splits: dict[int, DataSplits] = {}
    for width in sizes.flop_widths:
        wide = width >= 0.5
        train_size = sizes.wide_train_size if wide else sizes.train_size
        repeats = sizes.wide_repeats if wide else sizes.repeats
        config = bench_config(width, sizes, train_size)
        if train_size not in splits:
            splits[train_size] = load_splits(config)
        trainer = Trainer(config, splits[train_size])
        flops = training_step_flops(config)
        n = config.steps_per_epoch * sizes.batch_size
        # interleave the peak measurement with the training epochs: both see the same load
        measured = interleaved(
            {
                "train": epoch_rate(trainer.train_epoch, n),
                "matmul": lambda: matmul_flop_rate(sizes.matmul_n),
                "conv_gemm": lambda: conv_gemm_flop_rate(sizes.gemm_channels),
            },
            repeats,
        )
        rate = median(measured["train"])
        matmul, conv_gemm = max(measured["matmul"]), max(measured["conv_gemm"])
        peak = max(matmul, conv_gemm)
        achieved = rate * flops / sizes.batch_size
        profile = [] if wide else profile_epoch_time(trainer)
        results.append(
            BenchResult(
                name=f"flop_efficiency_w{width:g}",
                description=(
                    f"ResNet-9 width {width:g}, batch {sizes.batch_size}, CPU, our Trainer: achieved "
                    "model FLOP/s over the dense fp32 rate (best of matmul and 1x1-conv GEMM; no "
                    "target: where we stand)"
                ),
                figures={
                    "train_img_per_s": rate,
                    "flop_per_image": flops / sizes.batch_size,
                    "achieved_flop_per_s": achieved,
                    "matmul_flop_per_s": matmul,
                    "conv_gemm_flop_per_s": conv_gemm,
                    "fraction_of_matmul": achieved / matmul,
                    "matmul_n": sizes.matmul_n,
                    "top_ops_by_self_cpu": profile,
                    "repeats": repeats,
                },
                ratio=achieved / peak,
                target=None,
            )
        )
    return results
