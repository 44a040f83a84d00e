"""Data-parallel training: 2 gloo processes on the CPU take the steps of 1 process.

Each test launches ``torchrun --standalone --nproc_per_node=2`` on this file
(its ``__main__`` block is the worker; it trains with :func:`run`) and
compares the final parameters (``last.pt``), the logged training losses and
the evaluation metrics with a 1-process run of the same effective batch made
in the test's own process. Dropout is 0: the ranks draw different masks.

* PTB (tiny corpus; 4 columns split 2 + 2; 6 SGD steps at lr 1 over two
  epochs, state carried): in float64, so that the only difference, the order
  in which the batch's gradient terms are summed (per rank, then averaged),
  is ~1e-16 relative (2e-16 seen); ``atol = rtol = 1e-9`` leaves ample room for
  its growth and is far below what a wrong column split or loss scale does
  (changes > 1e-3).
* mol_csv (WLN, Adam; batches of 5, 5 and 1 molecules: unequal parts and, for
  the batch of 1, rank 0's zero-weighted stand-in): in float32, the
  featurizer's dtype, so ``atol = rtol = 1e-6``: float32 rounding of
  parameters of size ~0.1-1 after 6 Adam steps (1.5e-8 seen), while a wrong
  weighting moves them by ~1e-4 or more.
"""

from __future__ import annotations

import csv
import gc
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
import torch
from torch.nn.parallel import DistributedDataParallel

from knn.train import checkpoint as ckpt

SMILES = ["C", "CC", "CCO", "CCN", "CC=O", "C=CC=C", "C#N", "CC(C)C", "CCCC", "CCOC", "OCCO",
          "c1ccccc1", "c1ccncc1", "c1ccoc1", "Cc1ccccc1", "Oc1ccccc1", "C1CCCCC1", "CC(=O)O",
          "NC(=O)c1ccccc1", "FC(F)F", "ClCCl", "O=C1CCCC1", "CCN(CC)CC", "COc1ccccc1"]

#: task -> (overrides of both runs, default dtype, tolerance)
SETUPS: dict[str, tuple[list[str], torch.dtype, float]] = {
    "ptb": (["task=ptb", "model.dropout=0"], torch.float64, 1e-9),
    "mol_csv": (["task=mol_csv", "model=wln", "train=molecules", "task.batch_size=5",
                 "task.samples_per_epoch=11", "task.data.target_column=y"], torch.float32, 1e-6),
}


def run(compose: Callable, task: str, run_dir: str, *extra: str) -> dict:
    """One ``debug=smoke`` run of ``task``, in this process or in each torchrun worker.

    Writes ``counts.<rank>.json``: the examples (tokens, molecules) this
    process trained on at each step, and ``wrappers.<rank>.json``: the DDP
    wrappers alive when the trainer left the process group (none may be: one
    that outlives the group tears the group down after it was left).
    """
    from knn import dist
    from knn.tasks import TASKS
    from knn.train import train

    cls, counts, wrappers = TASKS[task], [], []
    step, shutdown = cls.training_step, dist.shutdown

    def counted(self, model, batch):
        out = step(self, model, batch)
        counts.append(out.count)
        return out

    def counted_shutdown():
        wrappers.append(sum(isinstance(o, DistributedDataParallel) for o in gc.get_objects()))
        shutdown()

    cls.training_step, dist.shutdown = counted, counted_shutdown
    overrides, dtype, _ = SETUPS[task]
    args = [*overrides[:1], "debug=smoke", *overrides[1:], "device=cpu", "threads=1",
            f"run_dir={run_dir}", *extra]
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        result = train(compose(args), overrides=args)
    finally:
        torch.set_default_dtype(previous)
        cls.training_step, dist.shutdown = step, shutdown
    rank = os.environ.get("RANK", "0")
    (Path(run_dir) / f"counts.{rank}.json").write_text(json.dumps(counts))
    (Path(run_dir) / f"wrappers.{rank}.json").write_text(json.dumps(wrappers))
    return result


#: Seconds a torchrun launch may take; a worker still running WORKER_STACKS_AFTER seconds
#: in prints every thread's stack and exits, so that a hang fails with where it hung.
LAUNCH_TIMEOUT, WORKER_STACKS_AFTER = 300, 240


def torchrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           __file__, *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=LAUNCH_TIMEOUT)
    except subprocess.TimeoutExpired as e:  # fail with what the launch printed so far
        out, err = (x.decode(errors="replace") if isinstance(x, bytes) else x or ""
                    for x in (e.stdout, e.stderr))  # bytes on a timeout, even with text=True
        return subprocess.CompletedProcess(cmd, -9, out, f"{err}\nno exit after {LAUNCH_TIMEOUT} s")


def why(proc: subprocess.CompletedProcess) -> str:
    """A failed launch's story: the workers' own errors come first, torchrun's summary last."""
    err = proc.stderr
    return err if len(err) < 6000 else f"{err[:4000]}\n...\n{err[-1500:]}"


def train_losses(run_dir: Path) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["train"]["loss"] for line in lines]


@pytest.mark.parametrize("task", ["ptb", "mol_csv"])
def test_two_processes_take_the_steps_of_one(task: str, tmp_path: Path, compose_cfg,
                                             fake_ptb) -> None:
    extra: list[str] = []
    if task == "mol_csv":
        path = tmp_path / "mols.csv"
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows([["smiles", "y"]] + [[s, str(0.1 * len(s) + 0.3 * s.count("c"))]
                                                         for s in SMILES])
        extra = [f"task.data.path={path}", f"task.data.cache_dir={tmp_path / 'cache'}"]
    one = run(compose_cfg, task, str(tmp_path / "one"), *extra)
    proc = torchrun(task, str(tmp_path / "two"), *extra, cwd=tmp_path)
    assert proc.returncode == 0, why(proc)
    two = json.loads((tmp_path / "two" / "result.json").read_text())

    # Each rank trained on its part of every batch: PTB 2 of 4 columns; the molecule
    # batches of 5, 5, 1 as 2 + 3, 2 + 3 and a (zero-weighted, uncounted) stand-in + 1.
    counts = [json.loads((tmp_path / d / f"counts.{r}.json").read_text())
              for d, r in (("one", 0), ("two", 0), ("two", 1))]
    assert [a + b for a, b in zip(counts[1], counts[2])] == counts[0]
    if task == "ptb":
        assert counts[1] == counts[2]
    else:
        assert counts[0] == [5, 5, 1] * 2 and counts[1] == [2, 2, 0] * 2
    for r in (0, 1):
        assert json.loads((tmp_path / "two" / f"wrappers.{r}.json").read_text()) == [0]
    tol = SETUPS[task][2]
    assert two["steps"] == one["steps"] == 6
    assert (one["processes"], two["processes"]) == (1, 2)
    a = ckpt.load(tmp_path / "one" / ckpt.LAST)["model"]
    b = ckpt.load(tmp_path / "two" / ckpt.LAST)["model"]
    assert a.keys() == b.keys()  # the plain module's names, not DDP's "module." ones
    for k in a:
        torch.testing.assert_close(b[k], a[k], atol=tol, rtol=tol, msg=k)
    # Logged training losses sum over both ranks; evaluation is rank 0's, broadcast.
    assert train_losses(tmp_path / "two") == pytest.approx(train_losses(tmp_path / "one"), rel=tol)
    for split in ("valid", "test"):
        assert two["metrics"][split] == pytest.approx(one["metrics"][split], rel=tol, abs=tol)


def test_a_run_resumes_on_another_number_of_processes(tmp_path: Path, compose_cfg,
                                                      fake_ptb) -> None:
    """1 process stops mid-epoch (step 4 of 6, state carried), 2 processes finish it: the
    parameters of an uninterrupted run (checkpoints hold the state of all the columns)."""
    run(compose_cfg, "ptb", str(tmp_path / "whole"))
    run(compose_cfg, "ptb", str(tmp_path / "resumed"), "train.max_steps=4")
    proc = torchrun("ptb", str(tmp_path / "resumed"), "train.resume=true", cwd=tmp_path)
    assert proc.returncode == 0, why(proc)
    a = ckpt.load(tmp_path / "whole" / ckpt.LAST)["model"]
    b = ckpt.load(tmp_path / "resumed" / ckpt.LAST)
    assert b["progress"]["step"] == 6
    tol = SETUPS["ptb"][2]
    for k in a:
        torch.testing.assert_close(b["model"][k], a[k], atol=tol, rtol=tol, msg=k)


if __name__ == "__main__":  # a torchrun worker: <task> <run_dir> <overrides...>
    import faulthandler

    faulthandler.dump_traceback_later(WORKER_STACKS_AFTER, exit=True)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/conftest.py
    import conftest

    import knn.tasks.lm

    knn.tasks.lm.load_corpus = lambda data: conftest.tiny_corpus()
    run(conftest.compose_config, *sys.argv[1:])
