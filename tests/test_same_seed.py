"""Same seed, same command, same numbers: every task's smoke run, twice, bit for bit.

Once, three CPU runs of one ``task=mol_csv`` command with seed 0 gave test
RMSE 0.689 / 0.663 / 0.671; the graph layers' gradient (a multi-threaded
scatter-add) summed in thread order. Each case here trains twice in this
process with ``threads=2`` and compares ``result.json``'s metrics and every
``metrics.jsonl`` number (losses, validation metrics) exactly; timing fields
are left out. Data: the files made for the tests (``tests/fixtures``: PTB-format
text, SST trees and vectors served as a mirror, 90 CEP-like molecules), so every
case runs on every machine, with or without the data mirror.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch

from knn.train import train

#: metrics.jsonl fields that are measurements of time, not results.
TIMING = {"valid_seconds", "elapsed"}


@pytest.fixture(autouse=True)
def restore_threads() -> Iterator[None]:
    """``threads=2`` sets torch's thread count for the process; put it back afterwards."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def run_twice(compose_cfg, tmp_path: Path, *overrides: str) -> tuple[dict, dict, list, list]:
    """Two runs of one command (seed 0, 2 threads, CPU) in fresh run dirs: their results
    and their metrics.jsonl records without timing fields."""
    out: list[Any] = []
    for name in ("a", "b"):
        run_dir = tmp_path / name
        args = ["debug=smoke", "device=cpu", "threads=2", "seed=0", f"run_dir={run_dir}",
                *overrides]
        result = train(compose_cfg(args), overrides=args)
        records = [{k: v for k, v in json.loads(line).items() if k not in TIMING}
                   for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        out.append((result, records))
    (a, rec_a), (b, rec_b) = out
    return a, b, rec_a, rec_b


def assert_identical(a: dict, b: dict, rec_a: list, rec_b: list) -> None:
    assert a["steps"] == b["steps"] > 0
    assert a["metrics"] == b["metrics"]  # floats compared exactly
    assert a["health"] == b["health"]
    assert rec_a == rec_b  # every epoch's training loss and validation metrics


def test_ptb(compose_cfg, tmp_path: Path, ptb_fixture) -> None:
    assert_identical(*run_twice(compose_cfg, tmp_path, "experiment=ptb/gated_5m",
                                f"task.data.dir={ptb_fixture.dir}",
                                f"task.data.cache_dir={tmp_path}"))


def test_sst(compose_cfg, tmp_path: Path, sst_fixture_mirror: Path) -> None:
    """Sentence-level training (task.phrases=false) keeps it to seconds; the step is the same.
    The trees and the default vectors come from a mirror of the SST fixture."""
    assert_identical(*run_twice(compose_cfg, tmp_path, "experiment=sst/gated_fine",
                                "task.phrases=false", f"task.data.mirror={sst_fixture_mirror}",
                                f"task.data.cache_dir={tmp_path}"))


@pytest.mark.parametrize("model", ["gated_wln", "elbp"])
def test_molecules(compose_cfg, tmp_path: Path, cep_fixture: Path, model: str) -> None:
    """task=mol_csv on the CEP-like fixture (oligomers of ~19 heavy atoms, as CEP's). Batches
    of 20 and hidden 64 (not the smoke's 4 and 8): the neighbour gathers' gradients are then
    large enough that PyTorch's scatter-add, which their backward used before, ran on both
    threads (with that backward put back, both models' runs differ on this data)."""
    assert_identical(*run_twice(compose_cfg, tmp_path, "task=mol_csv", f"model={model}",
                                f"task.data.path={cep_fixture}", "task.data.target_column=PCE",
                                f"task.data.cache_dir={tmp_path / 'cache'}", "task.batch_size=20",
                                "task.samples_per_epoch=200", "task.limit_train_batches=10",
                                "model.hidden=64"))
