"""The molecule regression task in the shared trainer: every Table 3 experiment, a user's CSV."""

from __future__ import annotations

import csv
import hashlib
import json
import random
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import torch

from knn.data import mirror
from knn.data.mirror import DataError
from knn.errors import ConfigError
from knn.models import count_params, preset
from knn.predict import Predictor
from knn.tasks.molecules import (CEP_CSV, CEP_SPLIT, MolDataConfig, MolTaskConfig,
                                 MoleculeRegression, build_regressor)
from knn.tools.cep_table import OWN_ROWS
from knn.train import checkpoint, train
from knn.train.config import experiment_names, resolve_config
from knn.train.optim import lr_at

REAL_MIRROR = Path(__file__).resolve().parents[3] / "shared" / "data"

#: Small valid molecules, varied in size, rings, heteroatoms and bonds.
SMILES = [
    "C", "CC", "CCO", "CCN", "CC=O", "C=CC=C", "C#N", "CC(C)C", "CCCC", "CCOC", "OCCO",
    "c1ccccc1", "c1ccncc1", "c1ccoc1", "c1ccsc1", "c1cc[se]c1", "Cc1ccccc1", "Oc1ccccc1",
    "c1ccc2ccccc2c1", "C1CCCCC1", "C1CCNCC1", "CC(=O)O", "NC(=O)c1ccccc1", "c1ccc(-c2ccccc2)cc1",
    "C1=CC=CC1", "c1cnc2ncccc2c1", "FC(F)F", "ClCCl", "BrCC", "CS(=O)C", "C[SiH2]C",
    "c1csc(-c2cccs2)c1", "N#Cc1ccccc1", "O=C1CCCC1", "CCN(CC)CC", "COc1ccccc1", "c1ccc2[nH]ccc2c1",
    "C=Cc1ccccc1", "CC(C)(C)O", "c1ccc2sccc2c1",
]


def target(smiles: str, rng: random.Random) -> float:
    """A learnable-ish target: size and aromaticity, plus noise; some negative, some zero."""
    return round(0.25 * len(smiles) - 1.0 + 0.8 * smiles.count("c") + rng.uniform(-0.3, 0.3), 4)


def write_csv(path: Path, rows: list[list[str]], header: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def molecule_rows(seed: int = 0) -> list[list[str]]:
    rng = random.Random(seed)
    return [[s, str(target(s, rng))] for s in SMILES] + [["CCCCO", "0"]]


def serve_cep(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make ``root`` a CEP mirror: add the split of its ``cep/cep-processed.csv`` (built by the
    project's rule) and patch the checksum table to match both files."""
    csv_path = root / "cep" / "cep-processed.csv"
    split = root / "cep" / "split-random-80-10-10-seed0.json"
    split.write_bytes(mirror.cep_split_json(csv_path))
    table = dict(mirror.CHECKSUMS)
    for path in (csv_path, split):
        table[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setattr(mirror, "CHECKSUMS", table)
    monkeypatch.delenv(mirror.ENV_MIRROR, raising=False)
    return root


@pytest.fixture
def cep_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A 41-molecule stand-in for the mirror's CEP CSV and split, checksums patched to match."""
    root = tmp_path / "mirror"
    write_csv(root / "cep" / "cep-processed.csv", molecule_rows(), ["smiles", "PCE"])
    return serve_cep(root, monkeypatch)


@pytest.fixture
def smoke(cep_mirror: Path, compose_cfg: Callable, tmp_path: Path) -> Callable[..., dict]:
    """``smoke(run_dir, *overrides)``: a ``debug=smoke`` run on the stand-in mirror."""

    def run(run_dir: Path, *overrides: str) -> dict:
        args = ["debug=smoke", f"run_dir={run_dir}", f"task.data.mirror={cep_mirror}",
                f"task.data.cache_dir={tmp_path / 'cache'}", "device=cpu", *overrides]
        return train(compose_cfg(args), overrides=args)

    return run


def read_rows(csv_path: Path, rows: list[int], column: str) -> tuple[list[str], np.ndarray]:
    """The SMILES and targets of the CSV's 0-based data ``rows``."""
    with open(csv_path, newline="") as f:
        table = list(csv.DictReader(f))
    return [table[i]["smiles"] for i in rows], np.array([float(table[i][column]) for i in rows])


def scores(pred, y: np.ndarray) -> dict[str, float]:
    err = np.asarray(pred, dtype=np.float64) - y
    return {"rmse": float(np.sqrt(np.mean(err**2))), "mae": float(np.mean(np.abs(err)))}


def best_pt_scores(run_dir: Path, csv_path: Path, rows: list[int], column: str) -> dict[str, float]:
    """RMSE and MAE, in target units, of best.pt's predictions from the SMILES of ``rows``
    (knn.predict's path: its own featurizing, batching and un-standardizing)."""
    smiles, y = read_rows(csv_path, rows, column)
    return scores(Predictor.load(run_dir / "best.pt")(smiles, report=False)[0], y)


def make_task(csv_path: Path, name: str = "mol_csv", seed: int = 0, **kw) -> MoleculeRegression:
    data = MolDataConfig(path=str(csv_path), target_column="y", cache_dir=str(csv_path.parent / "cache"),
                         **kw.pop("data", {}))
    task = MoleculeRegression(MolTaskConfig(name=name, data=data, **kw), torch.device("cpu"),
                              seed=seed)
    task.setup(csv_path.parent)
    return task


@pytest.fixture
def user_csv(tmp_path: Path) -> Path:
    return write_csv(tmp_path / "user" / "mols.csv", molecule_rows(1), ["smiles", "y"])


# --------------------------------------------------------------------------- #
# Table 3 experiments
# --------------------------------------------------------------------------- #

PAPER = {"mean": 2.4062, "wl_kernel": 0.2040, "emf": 0.1250, "nfp": 0.1409, "elbp": 0.1065,
         "wln": 0.1058, "gated_wln": 0.1043}


def test_table3_experiments_exist(compose_cfg) -> None:
    own = {f"cep/{v}" for v in OWN_ROWS}  # ours, not the paper's: cep/wln_tuned
    assert sorted(set(experiment_names("cep")) - own) == sorted(f"cep/{v}" for v in PAPER)
    for variant, value in PAPER.items():
        cfg = resolve_config(compose_cfg([f"experiment=cep/{variant}"]))
        assert cfg.paper.value == value and cfg.paper.table == "Table 3"
        assert cfg.model.name == variant and cfg.task.name == "cep"


@pytest.mark.parametrize("experiment", experiment_names("cep"))
def test_every_cep_experiment_runs(smoke, cep_mirror: Path, tmp_path: Path, experiment: str) -> None:
    result = smoke(tmp_path, f"experiment={experiment}")
    variant = experiment.split("/")[1]
    assert result["task"] == "cep" and result["metric"] == "rmse" and result["variant"] == variant
    csv_path, split = cep_mirror / CEP_CSV, json.loads((cep_mirror / CEP_SPLIT).read_text())
    for part in ("valid", "test"):  # every molecule of each is evaluated (one batch of 8)
        assert result["metrics"][part] == pytest.approx(
            best_pt_scores(tmp_path, csv_path, split[part], "PCE"), rel=1e-5)
    # The train-mean predictor's test RMSE, from the CSV alone.
    y_train = read_rows(csv_path, split["train"], "PCE")[1]
    y_test = read_rows(csv_path, split["test"], "PCE")[1]
    baseline = scores(np.full(len(y_test), y_train.mean()), y_test)["rmse"]
    extra = result["extra"]
    assert extra["data"]["sizes"] == {"train": 32, "valid": 4, "test": 5}  # the stand-in's split
    fitted = variant in ("mean", "wl_kernel")
    assert (result["steps"] == 0) == fitted  # closed-form models take no gradient step
    if fitted:
        # mean: one number; wl_kernel: a weight per WL label seen in training, and a bias.
        vocab = checkpoint.load(tmp_path / "best.pt")["model"].get("vocab")
        assert extra["fitted_parameters"] == (1 if vocab is None else len(vocab) + 1)
        assert extra["fit_seconds"] is not None
    if variant == "mean":
        assert result["metrics"]["test"]["rmse"] == pytest.approx(baseline, rel=1e-6)  # float32
    elif variant == "wl_kernel":  # the targets follow size and aromaticity: subtree counts see both
        assert result["metrics"]["test"]["rmse"] < 0.5 * baseline
    else:
        timed = extra["throughput"]
        # 2 epochs of 3 batches of 4; the last batch of each epoch is not timed.
        assert result["steps"] == 6 and timed["molecules"] == 2 * 2 * 4
        # molecules_per_second is molecules / seconds, each rounded (to 0.1 and to 0.001).
        n, s = timed["molecules"], timed["seconds"]
        assert n / (s + 5e-4) - 0.05 <= timed["molecules_per_second"]
        assert s <= 5e-4 or timed["molecules_per_second"] <= n / (s - 5e-4) + 0.05
    assert (tmp_path / "best.pt").exists() and (tmp_path / "result.json").exists()


@pytest.mark.parametrize("variant", ["wln", "gated_wln", "nfp", "elbp"])
def test_table3_models_have_026m_parameters(compose_cfg, variant: str) -> None:
    cfg = resolve_config(compose_cfg([f"experiment=cep/{variant}"]))
    n = count_params(build_regressor(cfg.model, 82, 6))
    assert abs(n - 260_000) <= 26_000, n


def test_authors_optimisation_protocol(compose_cfg) -> None:
    """Adam 1e-3, ×0.9 every 100k samples until below 5e-6, batches of 20, 4 iterations."""
    cfg = resolve_config(compose_cfg(["experiment=cep/gated_wln"]))
    t = cfg.train
    assert (t.optimizer, t.lr, t.schedule, t.lr_decay) == ("adam", 1e-3, "exponential", 0.9)
    assert t.clip is None  # the authors do not clip
    assert cfg.task.batch_size == 20 and cfg.task.samples_per_epoch == 100_000
    assert (cfg.model.hidden, cfg.model.depth, cfg.model.gated) == (175, 4, True)
    lrs = [lr_at(e, t.lr, t.schedule, t.lr_decay, t.lr_decay_epoch) for e in range(t.max_epochs + 1)]
    assert min(lrs[: t.max_epochs]) > 5e-6 > lrs[t.max_epochs]  # the authors' stopping rule
    assert resolve_config(compose_cfg(["experiment=cep/wln"])).model.hidden == 200


def test_epochs_and_evaluation_batches(cep_mirror: Path, tmp_path: Path) -> None:
    """5,000 batches of 20 per epoch; valid and test read once each, in order, never re-sampled."""
    data = MolDataConfig(mirror=str(cep_mirror), cache_dir=str(tmp_path / "cache"))
    task = MoleculeRegression(MolTaskConfig(data=data), torch.device("cpu"))
    task.setup(tmp_path)
    task.build_model(preset("wln", hidden=8, depth=1))
    assert task.num_train_batches() == 5000
    for split in ("valid", "test"):
        targets = torch.cat([b.targets for b in task.eval_batches[split]])
        assert torch.equal(targets, task.splits[split].targets.double())


def test_resume_mid_epoch_is_exact(smoke, tmp_path: Path) -> None:
    whole, split = tmp_path / "whole", tmp_path / "split"
    smoke(whole, "experiment=cep/gated_wln")
    stopped = smoke(split, "experiment=cep/gated_wln", "train.max_steps=4")
    assert stopped["stop_reason"] == "max_steps"
    assert checkpoint.load(split / "last.pt")["progress"]["batch"] == 1  # inside epoch 1
    smoke(split, "experiment=cep/gated_wln", "train.resume=true")
    a, b = (checkpoint.load(d / "last.pt")["model"] for d in (whole, split))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_batches_are_a_function_of_seed_epoch_index(user_csv: Path) -> None:
    for resample in (True, False):
        a = make_task(user_csv, resample=resample, samples_per_epoch=50, batch_size=7)
        b = make_task(user_csv, resample=resample, samples_per_epoch=50, batch_size=7)
        c = make_task(user_csv, resample=resample, samples_per_epoch=50, batch_size=7, seed=1)
        a.train_batch(0, 0)
        a.train_batch(1, 3)
        ya = a.train_batch(2, 5)[1]
        assert torch.equal(ya, b.train_batch(2, 5)[1])  # b never saw the earlier batches
        assert not torch.equal(ya, c.train_batch(2, 5)[1])
        assert a.num_train_batches() == 8 and len(a.train_batch(0, 7)[1]) == 1  # 50 = 7·7 + 1


def test_resampling_favours_rare_targets(user_csv: Path) -> None:
    task = make_task(user_csv, resample=True, resample_bin=0.5, samples_per_epoch=4000)
    y = task.splits["train"].targets
    drawn = y[torch.from_numpy(task.sampler.epoch_indices(0))]
    top = y >= torch.quantile(y, 0.9)
    assert (drawn >= y[top].min()).float().mean() > top.float().mean() * 1.5


def test_metrics_are_in_target_units(user_csv: Path) -> None:
    """The standardised mean predictor scores the RMSE of the training mean, in y's units."""
    task = make_task(user_csv)
    model = task.build_model(preset("mean"))
    task.start_epoch(0)  # fits it
    assert float(model.mean.detach()) == pytest.approx(0.0, abs=1e-6)  # standardised targets
    y = task.splits["valid"].targets.double()
    mean = task.splits["train"].targets.double().mean()
    metrics = task.evaluate(model, "valid")
    assert metrics["rmse"] == pytest.approx(float((y - mean).pow(2).mean().sqrt()), rel=1e-5)
    assert metrics["mae"] == pytest.approx(float((y - mean).abs().mean()), rel=1e-5)
    train_std = task.splits["train"].targets.double().std(unbiased=False)
    assert task.meta()["target_std"] == pytest.approx(float(train_std))


# --------------------------------------------------------------------------- #
# A user's CSV (task=mol_csv)
# --------------------------------------------------------------------------- #


def mol_csv(compose_cfg: Callable, run_dir: Path, csv_path: Path, *overrides: str) -> dict:
    args = ["task=mol_csv", "model=wln", "train=molecules", "debug=smoke", "device=cpu",
            f"run_dir={run_dir}", f"task.data.path={csv_path}", "task.data.target_column=y",
            f"task.data.cache_dir={run_dir.parent / 'cache'}", *overrides]
    return train(compose_cfg(args), overrides=args)


def with_invalid_row(tmp_path: Path) -> Path:
    rows = molecule_rows(2)
    rows.insert(5, ["C1CC(", "2.0"])  # data row 5
    rows.insert(9, ["CCO", "n/a"])  # data row 9
    return write_csv(tmp_path / "bad.csv", rows, ["smiles", "y"])


def test_user_csv_trains_with_random_split(compose_cfg, user_csv: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = mol_csv(compose_cfg, run, user_csv)
    assert result["task"] == "mol_csv"
    assert result["extra"]["data"]["sizes"] == {"train": 32, "valid": 4, "test": 5}
    split = json.loads((run / "split.json").read_text())  # a split made here is saved with the run
    assert sorted(split["train"] + split["valid"] + split["test"]) == list(range(41))
    again = mol_csv(compose_cfg, tmp_path / "again", user_csv)
    assert again["metrics"] == result["metrics"]  # same seeds, same split, same run
    other = mol_csv(compose_cfg, tmp_path / "s1", user_csv, "task.data.split_seed=1")
    assert json.loads((tmp_path / "s1" / "split.json").read_text())["test"] != split["test"]
    assert other["extra"]["data"]["split"].endswith("split_seed 1")


def test_invalid_smiles_stops_with_one_line(compose_cfg, tmp_path: Path) -> None:
    with pytest.raises(DataError) as err:
        mol_csv(compose_cfg, tmp_path / "run", with_invalid_row(tmp_path), "task.data.on_invalid=error")
    msg = str(err.value)  # row 5's SMILES comes first in the file, before row 9's target
    assert "row 5 (column 'smiles'): unparseable SMILES 'C1CC('" in msg and "\n" not in msg
    assert msg.endswith("; set task.data.on_invalid=skip to leave such rows out")
    rows = molecule_rows(2)
    rows.insert(9, ["CCO", "n/a"])
    with pytest.raises(DataError, match=r"row 9 \(line 11\): non-numeric target 'n/a'"):
        mol_csv(compose_cfg, tmp_path / "run2", write_csv(tmp_path / "bad2.csv", rows, ["smiles", "y"]))


def test_skip_counts_and_writes_exclusions(compose_cfg, tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = mol_csv(compose_cfg, run, with_invalid_row(tmp_path), "task.data.on_invalid=skip")
    assert result["extra"]["data"]["excluded"] == 2
    with open(run / "exclusions.csv", newline="") as f:
        excluded = list(csv.DictReader(f))
    assert [(x["row"], x["smiles"], x["reason"]) for x in excluded] == [
        ("5", "C1CC(", "unparseable SMILES"), ("9", "CCO", "non-numeric target")]
    assert sum(result["extra"]["data"]["sizes"].values()) == 41


def test_split_column(compose_cfg, tmp_path: Path) -> None:
    rows = [r + [("test" if i % 10 == 0 else "Valid" if i % 10 == 1 else "train")]
            for i, r in enumerate(molecule_rows())]
    path = write_csv(tmp_path / "cols.csv", rows, ["smiles", "y", "fold"])
    result = mol_csv(compose_cfg, tmp_path / "run", path, "task.data.split_column=fold")
    assert result["extra"]["data"]["sizes"] == {"train": 32, "valid": 4, "test": 5}
    rows[3][2] = "holdout"
    with pytest.raises(DataError, match=r"row 3 .*split value 'holdout'"):
        path = write_csv(tmp_path / "c2.csv", rows, ["smiles", "y", "fold"])
        mol_csv(compose_cfg, tmp_path / "run2", path, "task.data.split_column=fold")


@pytest.mark.parametrize("overrides, message", [
    ([], "task=mol_csv needs task.data.path"),
    (["task.data.path={csv}", "model.atom_dim=10"], "model.atom_dim=10 but the featurizer gives 82"),
    (["task.data.path={csv}", "task.data.on_invalid=drop"], "on_invalid must be one of"),
    (["task.data.path={csv}", "model=nfp", "model.depth=two"], r"model\.depth"),
])
def test_config_errors_are_one_line(compose_cfg, tmp_path: Path, overrides, message) -> None:
    path = write_csv(tmp_path / "x.csv", molecule_rows(), ["smiles", "y"])
    args = ["task=mol_csv", "model=wln", "train=molecules", f"run_dir={tmp_path}",
            "task.data.target_column=y", *(o.format(csv=path) for o in overrides)]
    with pytest.raises(ConfigError, match=message) as err:
        train(compose_cfg(args), overrides=args)
    assert "\n" not in str(err.value)


def test_smoke_on_cep_like_molecules(compose_cfg, tmp_path: Path, cep_fixture: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """experiment=cep/wln's smoke run on a mirror whose CEP CSV is the CEP-like fixture (90
    oligomers, S/Se/Si/N/O, fused rings; split 72/9/9 by the project's rule): the first 64
    training molecules, whose mean target standardizes the regression, 2 evaluation batches."""
    root = tmp_path / "mirror"
    (root / "cep").mkdir(parents=True)
    shutil.copyfile(cep_fixture, root / "cep" / "cep-processed.csv")
    serve_cep(root, monkeypatch)
    args = ["experiment=cep/wln", "debug=smoke", "device=cpu", f"run_dir={tmp_path / 'run'}",
            f"task.data.mirror={root}", f"task.data.cache_dir={tmp_path / 'cache'}",
            "task.limit_train_items=64", "task.limit_eval_batches=2"]
    result = train(compose_cfg(args), overrides=args)
    data = result["extra"]["data"]
    assert data["sizes"] == {"train": 64, "valid": 9, "test": 9} and data["excluded"] == 0
    split = json.loads((root / "cep" / "split-random-80-10-10-seed0.json").read_text())
    with open(cep_fixture, newline="") as f:
        pce = [float(row["PCE"]) for row in csv.DictReader(f)]
    assert data["target"]["mean"] == pytest.approx(np.mean([pce[i] for i in split["train"][:64]]))
    assert result["steps"] == 6
    for part in ("valid", "test"):  # 2 batches of 8 hold all 9 of each
        assert result["metrics"][part] == pytest.approx(
            best_pt_scores(tmp_path / "run", cep_fixture, split[part], "PCE"), rel=1e-5)


@pytest.mark.skipif(not (REAL_MIRROR / "cep" / "cep-processed.csv").is_file(),
                    reason="checks the real CEP files; no data mirror here")
def test_smoke_on_the_real_mirror(compose_cfg, tmp_path: Path) -> None:
    """A slice of the real CEP: 64 training molecules, 2 evaluation batches; the real split's
    sizes and the real PCE's mean (the same run on CEP-like molecules: just above)."""
    args = ["experiment=cep/wln", "debug=smoke", "device=cpu", f"run_dir={tmp_path}",
            f"task.data.mirror={REAL_MIRROR}", "task.limit_train_items=64", "task.limit_eval_batches=2"]
    result = train(compose_cfg(args), overrides=args)
    assert result["extra"]["data"]["sizes"] == {"train": 64, "valid": 2997, "test": 2999}
    split = json.loads((REAL_MIRROR / CEP_SPLIT).read_text())
    y = read_rows(REAL_MIRROR / CEP_CSV, split["train"][:64], "PCE")[1]
    # targets are held as float32
    assert result["extra"]["data"]["target"]["mean"] == pytest.approx(y.mean(), rel=1e-6)
    assert y.mean() == pytest.approx(3.391516828125, rel=1e-12)  # the pinned files: a recorded value


# --------------------------------------------------------------------------- #
# Each task's own training defaults; run health
# --------------------------------------------------------------------------- #


def test_mol_csv_brings_its_own_training_defaults(compose_cfg) -> None:
    """Without train=..., task=mol_csv trained with PTB's SGD (lr 1.0, clip 5): loss 7.8e14.
    Now each molecule task selects its optimiser; train.* and train=<name> still override."""
    t = resolve_config(compose_cfg(["task=mol_csv", "model=wln"])).train
    assert (t.optimizer, t.lr, t.clip, t.schedule) == ("adam", 1e-3, None, "exponential")
    t = resolve_config(compose_cfg(["task=cep", "model=wln"])).train
    assert (t.optimizer, t.lr, t.lr_decay, t.max_epochs, t.clip) == ("adam", 1e-3, 0.9, 51, None)
    t = resolve_config(compose_cfg(["task=mol_csv", "model=wln", "train.lr=0.01"])).train
    assert (t.optimizer, t.lr) == ("adam", 0.01)
    t = resolve_config(compose_cfg(["task=mol_csv", "model=wln", "train=molecules"])).train
    assert (t.lr_decay, t.max_epochs, t.patience) == (0.9, 51, None)  # the authors' schedule
    t = resolve_config(compose_cfg(["task=mol_csv", "model=wln", "train=default"])).train
    assert (t.optimizer, t.lr) == ("sgd", 1.0)  # asked for by name: still possible


def test_mol_csv_schedule_is_in_epochs_of_the_users_data(compose_cfg) -> None:
    """One epoch = one pass, no re-sampling, early stopping; the lr at the last epoch is still
    well above the 5e-6 at which the authors' schedule stops, so more epochs still train."""
    cfg = resolve_config(compose_cfg(["task=mol_csv", "model=wln"]))
    t = cfg.train
    assert cfg.task.samples_per_epoch is None and cfg.task.resample is False
    assert t.patience is not None and t.patience < t.max_epochs
    last = lr_at(t.max_epochs - 1, t.lr, t.schedule, t.lr_decay, t.lr_decay_epoch)
    assert last > 5e-6 * 5
    assert lr_at(2 * t.max_epochs - 1, t.lr, t.schedule, t.lr_decay, t.lr_decay_epoch) < last


def test_run_length_estimate() -> None:
    from knn.tasks.molecules import describe_run_length

    line = describe_run_length(n_train=800, samples_per_epoch=800, resample=False, batch_size=20,
                               steps_per_epoch=40, max_epochs=300, max_steps=None, patience=30,
                               metric="rmse", lr_first=1e-3, lr_last=4.9e-5)
    assert line.startswith("run length: an epoch is 1 pass over 800 training molecules = 40 "
                           "steps of 20; at most 300 epochs = 12,000 steps (train.max_epochs); "
                           "stops early after 30 epochs without a better valid rmse")
    cep = describe_run_length(n_train=23982, samples_per_epoch=100_000, resample=True,
                              batch_size=20, steps_per_epoch=5000, max_epochs=51, max_steps=7500,
                              patience=None, metric="rmse", lr_first=1e-3, lr_last=5.2e-6)
    assert "100,000 molecules drawn from 23,982 (re-sampled toward rare targets)" in cep
    assert "at most 7,500 steps = 1.5 epochs (train.max_steps)" in cep and "no early stop" in cep
    assert "no gradient steps" in describe_run_length(
        n_train=10, samples_per_epoch=10, resample=False, batch_size=20, steps_per_epoch=0,
        max_epochs=1, max_steps=None, patience=None, metric="rmse", lr_first=1e-3, lr_last=1e-3)


def test_mol_csv_logs_its_length_and_is_healthy_or_says_so(compose_cfg, user_csv: Path,
                                                           tmp_path: Path, caplog) -> None:
    args = ["task=mol_csv", "model=wln", "debug=smoke", "device=cpu", f"run_dir={tmp_path}",
            f"task.data.path={user_csv}", "task.data.target_column=y",
            f"task.data.cache_dir={tmp_path / 'c'}", "task.samples_per_epoch=12"]
    with caplog.at_level("INFO"):
        result = train(compose_cfg(args), overrides=args)
    assert any(r.getMessage().startswith("run length: an epoch is 12 molecules drawn from 32")
               for r in caplog.records)  # 12 an epoch; debug=smoke: 3 batches of 4
    health = json.loads((tmp_path / "result.json").read_text())["health"]
    assert health == result["health"] and health["diverged"] is False
    assert health["constant_baseline_name"] == "train-mean predictor"


def test_exploding_run_is_flagged(compose_cfg, user_csv: Path, tmp_path: Path, caplog) -> None:
    """SGD at lr 1e6: finite but enormous losses. The run finishes, and says what happened."""
    args = ["task=mol_csv", "model=wln", "train=default", "train.lr=1e6", "debug=smoke",
            "device=cpu", f"run_dir={tmp_path}", f"task.data.path={user_csv}",
            "task.data.target_column=y", f"task.data.cache_dir={tmp_path / 'c'}"]
    with caplog.at_level("WARNING", logger="knn.train.health"):
        train(compose_cfg(args), overrides=args)
    health = json.loads((tmp_path / "result.json").read_text())["health"]
    assert health["diverged"] is True and health["beats_constant_baseline"] is False
    assert health["train_loss"]["last"] > 1e6 * health["train_loss"]["constant"]
    messages = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(m.startswith("training diverged") for m in messages)
    assert any("no better than the train-mean predictor" in m for m in messages)


def test_mean_predictor_is_the_constant_baseline(user_csv: Path) -> None:
    """The task's constant baseline is what the fitted mean model scores (and no better)."""
    task = make_task(user_csv)
    model = task.build_model(preset("mean"))
    task.start_epoch(0)
    base = task.constant_baseline()
    assert base.metric == pytest.approx(task.evaluate(model, "valid")["rmse"], rel=1e-6)
    assert base.train_loss == pytest.approx(1.0) and not base.log_loss  # standardised targets
    limited = make_task(user_csv, eval_batch_size=2, limit_eval_batches=1)
    y = limited.splits["valid"].targets.double()[:2]
    mean = limited.splits["train"].targets.double().mean()
    assert limited.constant_baseline().metric == pytest.approx(float((y - mean).pow(2).mean().sqrt()))
