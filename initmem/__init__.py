"""initmem: how much of a network's random initialization survives training."""

__version__ = "0.1.0"
