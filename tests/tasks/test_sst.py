"""The SST task in the shared trainer: every Table 2 experiment on a tiny fake mirror."""

from __future__ import annotations

import gzip
import hashlib
import random
from pathlib import Path
from typing import Callable

import pytest
import torch

from knn.data import mirror
from knn.data.mirror import DataError
from knn.data.sst import SST_FILES
from knn.errors import ConfigError
from knn.tasks.sst import (
    DEFAULT_VECTORS,
    SentimentClassification,
    SSTDataConfig,
    SSTTaskConfig,
    SSTVectorsConfig,
)
from knn.train import checkpoint, train
from knn.train.config import experiment_names, resolve_config, to_dataclass

WORDS = [f"w{i}" for i in range(20)] + ["-LRB-", "1\\/2"]
DIM = 6
REAL_MIRROR = Path(__file__).resolve().parents[3] / "shared" / "data"


def tree(words: list[str], rng: random.Random) -> str:
    """A right-branching tree over ``words`` with random 0-4 labels on every node."""
    if len(words) == 1:
        return f"({rng.randint(0, 4)} {words[0]})"
    return f"({rng.randint(0, 4)} ({rng.randint(0, 4)} {words[0]}) {tree(words[1:], rng)})"


def fake_files(seed: int = 0) -> dict[str, str]:
    rng = random.Random(seed)
    sizes = {"train": 40, "dev": 12, "test": 12}
    files = {SST_FILES[s]: "".join(tree(rng.choices(WORDS, k=rng.randint(1, 9)), rng) + "\n"
                                   for _ in range(n)) for s, n in sizes.items()}
    # Vectors for all but two types; "w19" and "1/2" (normalized) are out of vocabulary.
    rows = [f"{w} " + " ".join(f"{rng.uniform(-1, 1):.4f}" for _ in range(DIM))
            for w in [*WORDS[:19], "("]]
    files[DEFAULT_VECTORS] = "\n".join(rows) + "\n"
    return files


@pytest.fixture
def sst_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Tiny SST trees and a tiny gzipped vector file, with the checksum table patched to match."""
    root = tmp_path / "mirror"
    table = {}
    for name, text in fake_files().items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = gzip.compress(text.encode(), mtime=0) if name.endswith(".gz") else text.encode()
        path.write_bytes(data)
        table[name] = hashlib.sha256(data).hexdigest()
    monkeypatch.setattr(mirror, "CHECKSUMS", table)
    monkeypatch.delenv(mirror.ENV_MIRROR, raising=False)
    return root


@pytest.fixture
def smoke(sst_mirror: Path, compose_cfg: Callable) -> Callable[..., dict]:
    """``smoke(run_dir, *overrides)``: a ``debug=smoke`` run on the fake mirror."""

    def run(run_dir: Path, *overrides: str) -> dict:
        args = ["debug=smoke", f"run_dir={run_dir}", f"task.data.mirror={sst_mirror}",
                f"task.data.cache_dir={run_dir / 'cache'}", *overrides]
        return train(compose_cfg(args), overrides=args)

    return run


def make_task(mirror_dir: Path, seed: int = 0, **kw) -> SentimentClassification:
    cfg = SSTTaskConfig(data=SSTDataConfig(mirror=str(mirror_dir)), **kw)
    task = SentimentClassification(cfg, torch.device("cpu"), seed=seed)
    task.setup()
    return task


#: Valid and test loss of each experiment's smoke run on ``fake_files()`` (random labels,
#: so near ln 2 = 0.693 or ln 5 = 1.609 after 6 steps), as measured (torch 2.13, CPU; the fused
#: op and KNN_FUSED=0 agree to 6 digits) with the ``smoke`` fixture's command:
#: ``python -m knn.train debug=smoke task.data.mirror=<fake mirror> experiment=<e>``.
#: Any change to a model's forward pass, initialisation or optimiser moves them.
SMOKE_LOSSES = {
    "sst/bilstm_binary": (0.747954, 0.704169),
    "sst/bilstm_fine": (1.631636, 1.632030),
    "sst/const_binary": (0.698772, 0.684060),
    "sst/const_fine": (1.602793, 1.600321),
    "sst/gated_binary": (0.701726, 0.686576),
    "sst/gated_fine": (1.633359, 1.610383),
    "sst/kim_cnn_binary": (0.680196, 0.700988),
    "sst/kim_cnn_fine": (1.486421, 1.694862),
    "sst/bilstm_tai2015_binary": (0.752003, 0.713690),
    "sst/bilstm_tai2015_fine": (1.640255, 1.679856),
    "sst/kim_cnn_kim2014_binary": (0.705647, 0.700569),
    "sst/kim_cnn_kim2014_fine": (1.491194, 1.726577),
}


def test_smoke_losses_cover_every_experiment() -> None:
    assert sorted(SMOKE_LOSSES) == sorted(experiment_names("sst"))


def test_sst_smoke_metrics_unchanged_by_the_fused_cpu_ops(compose_cfg, tmp_path, sst_fixture_mirror,
                                                           monkeypatch, require_fused) -> None:
    """The fused SST path's speed-ups change no result beyond rounding: an SST smoke run with the
    fused scan and dropout sampler (knn.ops) and one with the PyTorch reference scan and
    torch's bernoulli_ give the same losses and metrics (rel. 1e-4)."""
    from knn.ops import recurrence, usage

    require_fused("cpu")

    def smoke(name: str) -> dict:
        args = ["experiment=sst/gated_fine", "debug=smoke", "device=cpu", "threads=1", "seed=0",
                "task.phrases=false", f"task.data.mirror={sst_fixture_mirror}",
                f"task.data.cache_dir={tmp_path}", f"run_dir={tmp_path / name}"]
        return train(compose_cfg(args), overrides=args)

    usage.reset()  # the tally is per process: count each run's calls alone
    fused = smoke("fused")
    monkeypatch.setattr(recurrence, "fused_available", lambda device_type="cpu": False)
    usage.reset()
    reference = smoke("reference")
    assert fused["ops"]["fused_scan"] and fused["ops"]["fused_bernoulli"]
    assert reference["ops"]["fused_scan"] is False and reference["ops"]["fused_bernoulli"] is False
    assert fused["steps"] == reference["steps"] > 0
    assert fused["health"]["train_loss"] == pytest.approx(reference["health"]["train_loss"], rel=1e-4)
    for split in ("valid", "test"):
        assert fused["metrics"][split] == pytest.approx(reference["metrics"][split], rel=1e-4)


#: The sizes SMOKE_LOSSES were recorded at where they differ from debug=smoke's.
SMOKE_SIZES = {"sst/kim_cnn_fine": ["model.hidden=4"], "sst/kim_cnn_binary": ["model.hidden=4"],
               "sst/kim_cnn_kim2014_fine": ["model.hidden=4"],
               "sst/kim_cnn_kim2014_binary": ["model.hidden=4"],
               "sst/bilstm_fine": ["model.depth=1"], "sst/bilstm_binary": ["model.depth=1"],
               "sst/bilstm_tai2015_fine": ["model.depth=1"],
               "sst/bilstm_tai2015_binary": ["model.depth=1"]}


@pytest.mark.parametrize("experiment", experiment_names("sst"))
def test_every_sst_experiment_runs(smoke, tmp_path: Path, experiment: str) -> None:
    result = smoke(tmp_path, f"experiment={experiment}", *SMOKE_SIZES.get(experiment, []))
    assert result["task"] == "sst" and result["metric"] == "acc"
    assert result["variant"] == experiment.split("/")[1]
    assert result["paper"]["value"] > 40 and result["paper"]["table"] == "Table 2"
    losses = tuple(result["metrics"][split]["loss"] for split in ("valid", "test"))
    assert losses == pytest.approx(SMOKE_LOSSES[experiment], rel=1e-4)
    binary = experiment.endswith("binary")
    assert result["config"]["task"]["granularity"] == ("binary" if binary else "fine")
    meta = checkpoint.load(tmp_path / "best.pt")["meta"]
    assert meta["n_classes"] == (2 if binary else 5) and meta["dim"] == DIM
    assert meta["coverage"]["types"] == [20, 22]  # w19 and 1/2 have no vector


def test_phrase_and_sentence_level_training(sst_mirror: Path) -> None:
    phrases = make_task(sst_mirror, phrases=True)
    sentences = make_task(sst_mirror, phrases=False)
    assert len(sentences.train) == 40 and len(phrases.train) > 40
    assert sum(b.labels.numel() for b in sentences.eval_batches["valid"]) == 12
    binary = make_task(sst_mirror, phrases=False, granularity="binary")
    labels = torch.cat([b.labels for b in binary.eval_batches["test"]])
    assert labels.numel() < 12 and set(labels.tolist()) <= {0, 1}  # neutral dropped


def test_batch_order_is_a_function_of_seed_and_epoch(sst_mirror: Path) -> None:
    a, b, c = make_task(sst_mirror), make_task(sst_mirror), make_task(sst_mirror, seed=1)
    a.start_epoch(0)
    a.start_epoch(3)
    assert a._batches(3) == b._batches(3)  # b never saw epochs 0..2 (a resumed run)
    assert a._batches(3) != a._batches(4) and a._batches(3) != c._batches(3)
    order = sorted(i for batch in a._batches(3) for i in batch)
    assert order == list(range(len(a.train)))


def test_evaluation_does_not_depend_on_batching(sst_mirror: Path, compose_cfg: Callable) -> None:
    one, many = make_task(sst_mirror, eval_batch_size=1), make_task(sst_mirror, eval_batch_size=64)
    cfg = resolve_config(compose_cfg(["experiment=sst/gated_fine", "debug=smoke"]))
    torch.manual_seed(0)
    model = one.build_model(to_dataclass(cfg.model))
    a, b = one.evaluate(model, "test"), many.evaluate(model, "test")
    assert len(one.eval_batches["test"]) == 12 and len(many.eval_batches["test"]) == 1
    assert a["acc"] == b["acc"] and a["loss"] == pytest.approx(b["loss"], abs=1e-5)


def test_class_count_must_match_granularity(smoke, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="n_classes=5 but task.granularity=binary has 2"):
        smoke(tmp_path, "experiment=sst/gated_fine", "task.granularity=binary")


def test_out_max_norm_constrains_output_rows(smoke, tmp_path: Path) -> None:
    smoke(tmp_path, "experiment=sst/kim_cnn_fine", "task.out_max_norm=0.05",
          "train.lr=0.1")
    w = checkpoint.load(tmp_path / "last.pt")["model"]["out.weight"]  # (C, F)
    assert w.shape[0] == 5 and float(w.norm(dim=1).max()) <= 0.05 + 1e-6


def test_resume_mid_epoch_is_exact(smoke, tmp_path: Path) -> None:
    whole, split = tmp_path / "whole", tmp_path / "split"
    smoke(whole, "experiment=sst/gated_fine")
    smoke(split, "experiment=sst/gated_fine", "train.max_steps=4")
    smoke(split, "experiment=sst/gated_fine", "train.resume=true")
    a, b = checkpoint.load(whole / "last.pt")["model"], checkpoint.load(split / "last.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_vectors_path_and_oov_policy(sst_mirror: Path, tmp_path: Path) -> None:
    glove = tmp_path / "glove.txt"
    glove.write_text("w0 1 0 0\nw1 0 2 0\n")
    cfg = SSTVectorsConfig(path=str(glove), oov="zero", normalize=True)
    task = make_task(sst_mirror, phrases=False, vectors=cfg)
    emb = task.embeddings
    assert emb.dim == 3 and emb.coverage.found_types == 2
    assert torch.allclose(emb.vectors[emb.vocab["w1"]], torch.tensor([0.0, 1.0, 0.0]))
    assert float(emb.vectors[emb.vocab["w5"]].abs().sum()) == 0  # its own zero row
    with pytest.raises(DataError, match="does not exist"):
        make_task(sst_mirror, vectors=SSTVectorsConfig(path=str(tmp_path / "missing.txt")))
    with pytest.raises(ValueError, match="oov"):
        SSTVectorsConfig(oov="drop")


@pytest.mark.skipif(not (REAL_MIRROR / "sst").is_dir(), reason="no local SST mirror")
def test_smoke_on_the_real_mirror(tmp_path: Path, compose_cfg: Callable) -> None:
    args = ["experiment=sst/gated_binary", "debug=smoke", f"task.data.mirror={REAL_MIRROR}",
            "task.phrases=false", f"run_dir={tmp_path}"]
    result = train(compose_cfg(args), overrides=args)
    # As measured (torch 2.13, CPU) with these overrides: 6 Adam steps, still near ln 2.
    assert result["metrics"]["test"]["loss"] == pytest.approx(0.694537, rel=1e-4)
    meta = checkpoint.load(tmp_path / "best.pt")["meta"]
    # oov=unk: the 1.8k types without a GloVe 6B vector (even lowercased) share <unk>'s row.
    assert len(meta["vocab"]) == 2 + 19_900 and meta["coverage"]["types"] == [19_900, 21_701]
    assert meta["dim"] == 50  # the model's input width follows the default vectors
