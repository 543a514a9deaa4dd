"""Shared test options: slow tests run with --runslow, GPU tests only where CUDA is present."""

import os

import pytest
import torch

# Load triton (through initmem.theory.empirical_kernels) before any test imports neural-tangents: with
# tensorflow loaded first, torch.func's lazy triton import segfaults (see theory/kernels.py).
import initmem.theory.empirical_kernels  # noqa: F401

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("MPLBACKEND", "Agg")
# One torch thread in the test process and the processes it starts (unless the caller sets
# OMP_NUM_THREADS): the tests' models are tiny, and two threads on two cores shared with other work
# wait on each other (issue 36: the suite took 1.8x its quiet time at a load of 3-4 with two).
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture
def pyplot_forbidden(monkeypatch):
    """Switch matplotlib to the "svg" backend and make pyplot's ``figure`` raise, for one test.

    A test of figure-drawing library code then asserts that the backend is still "svg" (the code did
    not call ``matplotlib.use``) and that ``plt.get_fignums()`` is empty; any pyplot figure fails it.
    The backend is restored afterwards.
    """
    import matplotlib
    import matplotlib.pyplot as plt

    def no_pyplot(*args, **kwargs):
        raise AssertionError("library code drew through pyplot")

    before = matplotlib.get_backend()
    matplotlib.use("svg")
    monkeypatch.setattr(plt, "figure", no_pyplot)
    try:
        yield plt
    finally:
        matplotlib.use(before)


@pytest.fixture
def single_thread():
    """Run torch on one thread: tiny models are faster that way, above all on a loaded machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run slow tests")


def pytest_collection_modifyitems(config, items):
    import torch

    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "slow" in item.keywords and not config.getoption("--runslow"):
            item.add_marker(skip_slow)
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(skip_gpu)
