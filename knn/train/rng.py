"""Seeding and capture/restore of every random number generator.

States are converted to plain containers of tensors, ints and lists so that a
checkpoint holding them loads with ``torch.load(..., weights_only=True)``
(that unpickler refuses numpy arrays and arbitrary tuples of objects).
"""

from __future__ import annotations

import logging
import os
import random
from typing import Any, cast

import numpy as np
import torch

log = logging.getLogger(__name__)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and every CUDA device)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds all CUDA devices


def set_deterministic(enabled: bool) -> None:
    """Ask torch for deterministic kernels (``train.deterministic``), or stop asking.

    Same-seed CPU runs are bit-identical without it (for a fixed thread
    count): the gradient of the graph layers' neighbour gathers, the one
    reduction whose order could depend on thread scheduling, sums in a fixed
    order on CPU (:mod:`knn.featurize.graph`). The switch is for GPU runs (that
    scatter-add and others use atomic adds there; cuDNN picks algorithms), and
    costs nothing measurable on CPU (WLN steps are no slower with it).

    ``warn_only``: an op that has no deterministic kernel warns (once, naming
    the op) instead of raising a RuntimeError in the middle of training. On CPU
    none of this library's models (every task's smoke run) uses such an op.

    cuBLAS needs a fixed workspace to be deterministic; the variable must be
    set before the first CUDA matmul, which is why this runs before the model
    is built.
    """
    if enabled:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        log.info("train.deterministic: deterministic kernels; an op without one warns")
    torch.use_deterministic_algorithms(enabled, warn_only=enabled)
    torch.backends.cudnn.deterministic = enabled
    torch.backends.cudnn.benchmark = False


def get_rng_state() -> dict[str, Any]:
    """All generator states as tensors, ints and lists."""
    version, mt, gauss = random.getstate()
    # The legacy tuple (legacy=True is the default); numpy's stubs pick the dict overload.
    legacy = cast("tuple[str, np.ndarray, int, int, float]", np.random.get_state())
    name, keys, pos, has_gauss, cached = legacy
    state: dict[str, Any] = {
        "python": {"version": version, "state": list(mt), "gauss": gauss},
        "numpy": {
            "name": name,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`get_rng_state` returned.

    The state tensors may arrive on a GPU (a checkpoint loaded with
    ``map_location=cuda``); every setter wants them on the CPU.
    """
    py = state["python"]
    random.setstate((py["version"], tuple(py["state"]), py["gauss"]))
    n = state["numpy"]
    keys = n["keys"].cpu().numpy().astype(np.uint32)
    np.random.set_state((n["name"], keys, n["pos"], n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
