"""Kernel Neural Networks (Lei, Jin, Barzilay, Jaakkola, ICML 2017) in PyTorch.

The public names load on first use, so ``import knn`` itself imports nothing (no torch,
no RDKit, and never the optional matplotlib or submitit)::

    import knn
    layer = knn.StringKernelLayer(16, 32, knn.StringKernelConfig(n=2))
    model = knn.build("wln", atom_dim=82, bond_dim=6)

Each name is also importable from its module (``knn.layers.string_kernel``, ...), which
is what code inside the package does: nothing below the root imports through it.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module that defines it.
_PUBLIC: dict[str, str] = {
    # layers and their configs
    "StringKernelConfig": "knn.layers.string_kernel",
    "StringKernelLayer": "knn.layers.string_kernel",
    "StringKernelNet": "knn.layers.string_kernel",
    "KernelState": "knn.layers.string_kernel",
    "RandomWalkConfig": "knn.layers.random_walk",
    "RandomWalkKernelLayer": "knn.layers.random_walk",
    "DeepRandomWalkNet": "knn.layers.random_walk",
    "WLConfig": "knn.layers.wl",
    "WLKernelNet": "knn.layers.wl",
    # molecules to graphs
    "MolFeaturizer": "knn.featurize",
    "MolGraph": "knn.featurize",
    "BatchMolGraph": "knn.featurize",
    "parse_smiles": "knn.featurize",
    # models by name, at their presets (conf/model/<name>.yaml)
    "MODELS": "knn.models",
    "build": "knn.models",
    "preset": "knn.models",
    "count_params": "knn.models",
}

__all__ = sorted([*_PUBLIC, "__version__"])


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("knn")
        except PackageNotFoundError:  # run from a checkout that was never installed
            return "0+unknown"
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value  # once loaded, a plain attribute
        return value
    raise AttributeError(f"module 'knn' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
