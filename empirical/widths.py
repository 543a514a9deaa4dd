"""Sizes every architecture shares: the number of classes and the width multiplier's rounding."""

NUM_CLASSES = 10


def scaled_channels(channels: int, width: float) -> int:
    """``max(1, floor(channels * width + 0.5))``: the channel count at width multiplier ``width``."""
    if not width > 0:
        raise ValueError(f"width must be > 0 (got {width})")
    return max(1, int(channels * width + 0.5))


__all__ = ["NUM_CLASSES", "scaled_channels"]
