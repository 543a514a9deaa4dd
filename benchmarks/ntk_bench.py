"""Benchmark 4: the theory's kernels and predictor against neural-tangents, time and peak memory.

- ``ntk_empirical``: the empirical NTK of a 3-layer ReLU MLP (:class:`ReLUMLP`, depth 2, float32) on
  ``n`` inputs, ``initmem.theory.empirical_kernels.empirical_ntk`` (``torch.func``, Jacobian contraction in blocks)
  against neural-tangents' ``empirical_ntk_fn`` (JAX, default implementation, jitted; its compile time is
  reported apart) on the same weights, ``trace_axes=(-1,)``. Each side runs in its own fresh process,
  so its peak memory is its own: the peak resident set size during the kernel calls minus the resident
  size just before them. The kernels are compared entry by entry.
- ``ntk_predictor``: ``initmem.theory.ntk.gradient_descent_mse`` against neural-tangents'
  ``predict.gradient_descent_mse`` on that same kernel (float64 on both sides: ``jax_enable_x64``),
  train and test outputs at a grid of times, interleaved in one process.

Ratios are neural-tangents' time over ours (>= 1: ours no slower). Both processes get this process's
torch thread count (``run.py --threads``) for torch, numpy's BLAS and XLA.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
#: Ours must be no slower than neural-tangents.
NO_SLOWER = 1.0


@dataclass(frozen=True)
class Sizes:
    n: int = 512  # inputs (the kernel is n x n)
    n_test: int = 256  # test inputs of the predictor
    in_dim: int = 32
    width: int = 512
    depth: int = 2  # hidden layers: 3 dense layers in all
    out_dim: int = 1
    block_size: int = 64  # ours: inputs per Jacobian block (empirical_ntk's default)
    repeats: int = 5
    n_times: int = 100  # predictor: times on a log grid
    seed: int = 0


QUICK = Sizes(n=32, n_test=16, in_dim=8, width=32, block_size=8, repeats=1, n_times=5)


def rss_mib() -> float:
    """Current resident set size (MiB), from /proc (Linux)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far (MiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> None:
    """Reset the kernel's high-water mark of this process (Linux >= 4.0: write 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def peak_rss_since_reset_mib() -> float:
    """VmHWM of /proc/self/status (MiB): the peak since :func:`reset_peak_rss`."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return peak_rss_mib()


# ---------------------------------------------------------------------------------- children
def child_torch(sizes: Sizes, workdir: Path) -> dict:
    """Ours, in a fresh process: times, peak memory; writes the kernel to ``workdir/ours.npy``."""
    import torch

    from initmem.theory.empirical_kernels import ReLUMLP, empirical_ntk

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads())))
    torch.manual_seed(sizes.seed)
    x = np.load(workdir / "x.npy")
    mlp = ReLUMLP(
        sizes.in_dim, sizes.width, sizes.depth, sizes.out_dim, seed=sizes.seed, dtype=torch.float32
    )
    xt = torch.from_numpy(x).float()
    out = {}
    for label, block_size in (("default", sizes.block_size), ("one_block", sizes.n)):
        before = rss_mib()
        reset_peak_rss()
        times = []
        for _ in range(sizes.repeats + 1):  # the first call is a warm-up
            start = time.perf_counter()
            kernel = empirical_ntk(mlp, xt, block_size=block_size)
            times.append(time.perf_counter() - start)
        peak = peak_rss_since_reset_mib()
        out[label] = {
            "first_call_s": times[0],
            "times_s": times[1:],
            "peak_extra_mib": peak - before,
            "block_size": block_size,
        }
        if label == "default":
            np.save(workdir / "ours.npy", kernel.ntk)
    return out


def child_jax(sizes: Sizes, workdir: Path) -> dict:
    """neural-tangents in a fresh process (NTK in float32, then the predictors in float64)."""
    import jax
    import neural_tangents as nt
    import torch

    import initmem.theory.ntk as ours_ntk  # before neural_tangents: see theory.kernels._preload_triton
    from initmem.theory.empirical_kernels import ReLUMLP
    from initmem.theory.kernels import relu_mlp_stax

    mlp = ReLUMLP(
        sizes.in_dim, sizes.width, sizes.depth, sizes.out_dim, seed=sizes.seed, dtype=torch.float32
    )
    params = jax.tree_util.tree_map(
        lambda a: jax.numpy.asarray(a, dtype=jax.numpy.float32),
        mlp.stax_params(),
        is_leaf=_is_array,
    )
    _, apply_fn, _ = relu_mlp_stax(sizes.depth, width=sizes.width, out_dim=sizes.out_dim)
    x = jax.numpy.asarray(np.load(workdir / "x.npy"), dtype=jax.numpy.float32)
    kernel_fn = jax.jit(nt.empirical_ntk_fn(apply_fn, trace_axes=(-1,), vmap_axes=0))

    before = rss_mib()
    reset_peak_rss()
    times = []
    for _ in range(sizes.repeats + 1):  # the first call compiles
        start = time.perf_counter()
        k_nt = kernel_fn(x, None, params).block_until_ready()
        times.append(time.perf_counter() - start)
    peak = peak_rss_since_reset_mib()
    k_nt = np.asarray(k_nt, dtype=np.float64)
    k_ours = np.load(workdir / "ours.npy")
    ntk = {
        "first_call_s": times[0],
        "times_s": times[1:],
        "peak_extra_mib": peak - before,
        "max_rel_diff": float(np.abs(k_nt - k_ours).max() / np.abs(k_ours).max()),
    }

    # ------------------------------------------------------------------ predictor, float64
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(sizes.seed)
    n = sizes.n - sizes.n_test
    k_train = k_ours[:n, :n]
    k_test_train = k_ours[n:, :n]
    y = rng.standard_normal((n, 1))
    f0_train = rng.standard_normal((n, 1))
    f0_test = rng.standard_normal((sizes.n_test, 1))
    t = np.concatenate([[0.0], np.logspace(0, 6, sizes.n_times - 1)])
    lr = 1.0

    def ours():
        return ours_ntk.gradient_descent_mse(k_train, k_test_train, y, lr, t, f0_train, f0_test)

    def theirs():
        predict_fn = nt.predict.gradient_descent_mse(k_train, y, learning_rate=lr)
        out = predict_fn(t, f0_train, f0_test, k_test_train)
        return [np.asarray(o) for o in out]

    first = {"ours": _timed(ours), "nt": _timed(theirs)}
    measured = {"ours": [], "nt": []}
    for r in range(sizes.repeats):
        for side in ("ours", "nt") if r % 2 == 0 else ("nt", "ours"):
            measured[side].append(_timed(ours if side == "ours" else theirs))
    a, b = ours(), theirs()
    scale = max(np.abs(a[0]).max(), np.abs(a[1]).max())
    diff = max(np.abs(a[0] - b[0]).max(), np.abs(a[1] - b[1]).max()) / scale
    predictor = {
        "first_call_s": first,
        "times_s": measured,
        "max_rel_diff": float(diff),
        "n_train": n,
        "n_test": sizes.n_test,
        "n_times": len(t),
    }
    return {"ntk": ntk, "predictor": predictor}


def _is_array(a) -> bool:
    return isinstance(a, np.ndarray)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _run_child(side: str, sizes: Sizes, workdir: Path, threads: int) -> dict:
    """Run one side in a fresh process on ``threads`` threads (torch, numpy's BLAS and XLA)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu")
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    if threads == 1:
        env["XLA_FLAGS"] = (
            env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
        ).strip()
    cmd = [sys.executable, str(Path(__file__)), side, str(workdir), json.dumps(asdict(sizes))]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ntk benchmark child '{side}' failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------- benchmark
def bench_ntk(sizes: Sizes):
    from common import BenchResult, median

    with tempfile.TemporaryDirectory(prefix="initmem-ntk-") as tmp:
        workdir = Path(tmp)
        x = np.random.default_rng(sizes.seed).standard_normal((sizes.n, sizes.in_dim))
        np.save(workdir / "x.npy", x.astype(np.float32))
        import torch

        threads = torch.get_num_threads()
        torch_side = _run_child("torch", sizes, workdir, threads)
        jax_side = _run_child("jax", sizes, workdir, threads)

    ours, one_block = torch_side["default"], torch_side["one_block"]
    ours_t, nt_t = median(ours["times_s"]), median(jax_side["ntk"]["times_s"])
    params = sizes.in_dim * sizes.width + (sizes.depth - 1) * sizes.width**2
    params += sizes.width * sizes.out_dim
    ntk = BenchResult(
        name="ntk_empirical",
        description=(
            f"empirical NTK of a 3-layer ReLU MLP ({params:,} parameters, float32) on {sizes.n} "
            "inputs, CPU: initmem (torch.func) vs neural-tangents empirical_ntk_fn (JAX, jit); "
            "time ratio nt / ours"
        ),
        figures={
            "ours_s": ours_t,
            "nt_s": nt_t,
            "ours_block_size": ours["block_size"],
            "ours_first_call_s": ours["first_call_s"],
            "nt_first_call_s": jax_side["ntk"]["first_call_s"],
            "ours_peak_extra_mib": ours["peak_extra_mib"],
            "nt_peak_extra_mib": jax_side["ntk"]["peak_extra_mib"],
            "memory_ratio_nt_over_ours": jax_side["ntk"]["peak_extra_mib"]
            / max(ours["peak_extra_mib"], 1e-3),
            "ours_one_block_s": median(one_block["times_s"]),
            "ours_one_block_peak_extra_mib": one_block["peak_extra_mib"],
            "ratio_nt_over_ours_one_block": nt_t / median(one_block["times_s"]),
            "kernel_max_rel_diff": jax_side["ntk"]["max_rel_diff"],
            "threads": threads,
            "repeats": sizes.repeats,
        },
        ratio=nt_t / ours_t,
        target=NO_SLOWER,
    )
    pred = jax_side["predictor"]
    ours_p, nt_p = median(pred["times_s"]["ours"]), median(pred["times_s"]["nt"])
    predictor = BenchResult(
        name="ntk_predictor",
        description=(
            f"closed-form MSE gradient-descent predictor on that kernel ({pred['n_train']} train, "
            f"{pred['n_test']} test, {pred['n_times']} times, float64): initmem.theory.ntk vs "
            "neural-tangents predict.gradient_descent_mse (setup + evaluation); time ratio nt / ours"
        ),
        figures={
            "ours_s": ours_p,
            "nt_s": nt_p,
            "ours_first_call_s": pred["first_call_s"]["ours"],
            "nt_first_call_s": pred["first_call_s"]["nt"],
            "outputs_max_rel_diff": pred["max_rel_diff"],
            "repeats": sizes.repeats,
        },
        ratio=nt_p / ours_p,
        target=NO_SLOWER,
    )
    return [ntk, predictor]


if __name__ == "__main__":
    side, workdir, sizes_json = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    sizes = Sizes(**json.loads(sizes_json))
    out = child_torch(sizes, workdir) if side == "torch" else child_jax(sizes, workdir)
    print(json.dumps(out))
