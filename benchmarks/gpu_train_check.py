"""Training speed of the real trainer: ResNet-9 on CIFAR-shaped random data, images per second.

For each batch size and each compile setting, one warm-up epoch (which pays for torch.compile and
cudnn autotuning), then one timed epoch of ``--images`` images through :class:`Trainer.train_epoch`:
the training loop of every run (augmentation, per-layer gradient norms, divergence checks included).

    # on the GPU (the issue's check): width 1, 40,000 images, batch 128 and 512, bf16 + channels_last,
    # with and without torch.compile
    python benchmarks/gpu_train_check.py
    # a smoke run on the CPU
    python benchmarks/gpu_train_check.py --device cpu --images 256 --batch-sizes 32 --width 0.125 \
        --precision fp32 --compile off
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from initmem.empirical.config import RunConfig
from initmem.empirical.data import load_splits
from initmem.empirical.trainer import Trainer, resolve_device


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=40_000, help="training images per epoch")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--width", type=float, default=1.0, help="ResNet-9 width multiplier")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--precision", default="bf16", choices=("bf16", "fp32"))
    parser.add_argument("--no-channels-last", action="store_true")
    parser.add_argument("--compile", default="both", choices=("off", "on", "both"))
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    return parser.parse_args(argv)


def synthetic_config(
    images: int,
    width: float,
    batch_size: int,
    device: str,
    precision: str,
    channels_last: bool = True,
    out_dir: str = "runs/gpu_train_check",
) -> RunConfig:
    """ResNet-9 on ``images`` CIFAR-shaped random images (1,000 held out each for validation and test),
    SGD lr 0.01 momentum 0.9: the GPU checks' run config. The Trainer writes nothing; train() would
    write ``out_dir``."""
    held_out = 1_000
    return RunConfig(
        dataset="synthetic",
        train_size=images,
        val_size=held_out,
        test_size=held_out,
        model="resnet9",
        width=width,
        batch_size=batch_size,
        epochs=2,
        lr=0.01,
        momentum=0.9,
        device=device,
        precision=precision,
        channels_last=channels_last,
        quiet=True,
        out_dir=out_dir,
    )


def time_epochs(config: RunConfig, data) -> dict:
    """Seconds of a warm-up epoch and of a timed epoch; images per second of the timed one."""
    trainer = Trainer(config, data)
    seconds = []
    for _ in range(2):
        _synchronize(trainer.device)
        start = time.perf_counter()
        divergence = trainer.train_epoch()
        _synchronize(trainer.device)
        seconds.append(time.perf_counter() - start)
        if divergence is not None:
            raise RuntimeError(f"benchmark run diverged: {divergence.reason}")
    images = config.steps_per_epoch * config.batch_size
    row = {
        "batch_size": config.batch_size,
        "compile": config.compile,
        "precision": config.precision,
        "channels_last": config.channels_last,
        "width": config.width,
        "device": str(trainer.device),
        "images": images,
        "warmup_s": seconds[0],
        "epoch_s": seconds[1],
        "images_per_s": images / seconds[1],
    }
    if trainer.device.type == "cuda":
        row["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
        torch.cuda.reset_peak_memory_stats()
    return row


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    compiles = {"off": [False], "on": [True], "both": [False, True]}[args.compile]
    base = synthetic_config(
        args.images,
        args.width,
        min(args.batch_sizes),
        device.type,
        args.precision,
        channels_last=not args.no_channels_last,
    )
    data = load_splits(base, device)
    print(
        f"device {device}"
        + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else "")
    )
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, ResNet-9 width {args.width}"
    )
    rows = []
    for compile_model in compiles:
        for batch_size in args.batch_sizes:
            config = base.replace(batch_size=batch_size, compile=compile_model)
            row = time_epochs(config, data)
            rows.append(row)
            print(
                f"batch {batch_size:4d}  compile {'on ' if compile_model else 'off'}  "
                f"{args.precision}{' channels_last' if config.channels_last else ''}  "
                f"warm-up epoch {row['warmup_s']:7.2f} s  timed epoch {row['epoch_s']:7.2f} s  "
                f"{row['images_per_s']:10,.0f} images/s",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
