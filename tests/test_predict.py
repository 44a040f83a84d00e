"""``python -m knn.predict``: predictions from a training run's checkpoint, on a CSV or a SMILES list."""

from __future__ import annotations

import csv
import json
import math
import random
import re
from pathlib import Path
from typing import Callable

import pytest
import torch

from knn.data.molecules import collate
from knn.featurize import MolFeaturizer
from knn.predict import looks_like_path, main
from knn.tasks.molecules import build_regressor
from knn.train import checkpoint as ckpt_io
from knn.train import train

SMILES = ["C", "CC", "CCO", "CCN", "CC=O", "c1ccccc1", "c1ccncc1", "c1ccoc1", "c1ccsc1",
          "Cc1ccccc1", "Oc1ccccc1", "c1ccc2ccccc2c1", "C1CCCCC1", "CC(=O)O", "N#Cc1ccccc1",
          "O=C1CCCC1", "COc1ccccc1", "C=Cc1ccccc1", "CC(C)(C)O", "c1ccc2sccc2c1", "FC(F)F",
          "CCCC", "CCOC", "OCCO", "C[SiH2]C", "c1cc[se]c1"]


def write_csv(path: Path, rows: list[list], header: list[str]) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def read_csv(path_or_text: Path | str) -> list[dict[str, str]]:
    text = path_or_text.read_text() if isinstance(path_or_text, Path) else path_or_text
    return list(csv.DictReader(text.splitlines()))


@pytest.fixture
def data_csv(tmp_path: Path) -> Path:
    rng = random.Random(0)
    rows = [[s, round(0.3 * len(s) + rng.uniform(-0.2, 0.2), 3)] for s in SMILES]
    return write_csv(tmp_path / "mols.csv", rows, ["mol", "logS"])


@pytest.fixture
def trained(compose_cfg: Callable, tmp_path: Path, data_csv: Path) -> Callable[[str], Path]:
    """``trained(model)``: the run directory of a smoke run of ``model`` on ``data_csv``."""

    def run(model: str) -> Path:
        run_dir = tmp_path / f"run_{model}"
        args = ["task=mol_csv", f"model={model}", "train=molecules", "debug=smoke", "device=cpu",
                f"run_dir={run_dir}", f"task.data.path={data_csv}", "task.data.smiles_column=mol",
                "task.data.target_column=logS", f"task.data.cache_dir={tmp_path / 'cache'}",
                "task.limit_eval_batches=null"]
        train(compose_cfg(args), overrides=args)
        return run_dir

    return run


def own_forward(ckpt: Path, smiles: list[str]) -> list[float]:
    """The checkpoint's model on ``smiles`` (one batch), featurized by the featurizer's plain
    reference path, in target units (the training mean and std of the checkpoint's meta)."""
    state = ckpt_io.load(ckpt)
    meta = state["meta"]
    featurizer = MolFeaturizer.preset(meta["featurizer"])
    model = build_regressor(state["config"]["model"], featurizer.atom_dim, featurizer.bond_dim)
    model.load_state_dict(state["model"])
    with torch.no_grad():
        y = model.eval()(collate([featurizer.reference(s) for s in smiles])).double()
    return (y * meta["target_std"] + meta["target_mean"]).tolist()


@pytest.mark.parametrize("model", ["gated_wln", "nfp", "wl_kernel"])
def test_predict_csv_matches_the_run(trained, tmp_path: Path, data_csv: Path, capsys,
                                     model: str) -> None:
    """On the run's test rows, the checkpoint's predictions reproduce result.json's test RMSE."""
    run_dir = trained(model)
    result = json.loads((run_dir / "result.json").read_text())
    test_rows = set(json.loads((run_dir / "split.json").read_text())["test"])
    out = tmp_path / "pred" / "out.csv"
    assert main([f"ckpt={run_dir / 'best.pt'}", f"input={data_csv}", f"output={out}"]) == 0
    rows = read_csv(out)
    assert list(rows[0]) == ["row", "smiles", "logS", "prediction"]  # smiles column from the run
    assert [r["smiles"] for r in rows] == SMILES
    assert [int(r["row"]) for r in rows] == list(range(len(SMILES)))
    err = [float(r["prediction"]) - float(r["logS"]) for r in rows if int(r["row"]) in test_rows]
    assert math.sqrt(sum(e * e for e in err) / len(err)) == pytest.approx(
        result["metrics"]["test"]["rmse"], rel=1e-5)
    assert "logS: rmse" in capsys.readouterr().err


def test_checkpoint_with_wl_kernel_iterations_still_loads(trained, tmp_path: Path, capsys) -> None:
    """Checkpoints written before wl_kernel's ``iterations`` became ``depth`` predict the same."""
    from knn.train import checkpoint as ckpt_io

    run_dir = trained("wl_kernel")
    state = ckpt_io.load(run_dir / "best.pt")
    model = dict(state["config"]["model"])
    model["iterations"] = model.pop("depth")
    state["config"] = {**state["config"], "model": model}
    old = tmp_path / "old.pt"
    ckpt_io.save(state, old)
    assert main([f"ckpt={run_dir}", "input=CCO,c1ccccc1"]) == 0
    expected = capsys.readouterr().out
    assert main([f"ckpt={old}", "input=CCO,c1ccccc1"]) == 0
    assert capsys.readouterr().out == expected


def test_predict_smiles_list_and_file(trained, tmp_path: Path, capsys) -> None:
    run_dir = trained("wln")
    assert main([f"ckpt={run_dir}", "input=CCO,C=CC=O,c1ccccc1"]) == 0  # a run dir means its best.pt
    rows = read_csv(capsys.readouterr().out)
    assert [r["smiles"] for r in rows] == ["CCO", "C=CC=O", "c1ccccc1"]
    # best.pt's own forward, in target units and in input order (three different predictions)
    preds = [float(r["prediction"]) for r in rows]
    assert preds == pytest.approx(own_forward(run_dir / "best.pt", ["CCO", "C=CC=O", "c1ccccc1"]),
                                  rel=1e-12, abs=0) and len(set(preds)) == 3
    listed = tmp_path / "list.txt"
    listed.write_text("CCO\n\nC=CC=O\nc1ccccc1\n")
    assert main([f"ckpt={run_dir / 'best.pt'}", f"input={listed}"]) == 0
    assert read_csv(capsys.readouterr().out) == rows


def test_invalid_smiles(trained, capsys) -> None:
    run_dir = trained("wln")
    assert main([f"ckpt={run_dir}", "input=CCO,C1CC(,CC"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "input item 1: unparseable SMILES 'C1CC('" in err
    assert main([f"ckpt={run_dir}", "input=CCO,C1CC(,CC", "on_invalid=skip"]) == 0
    rows = read_csv(capsys.readouterr().out)
    assert [(r["prediction"] == "", r["invalid"]) for r in rows] == [
        (False, ""), (True, "unparseable SMILES"), (False, "")]


@pytest.mark.parametrize("argv, status, message", [
    (["input=CCO"], 2, "ckpt=... is required"),
    (["ckpt=x", "input=CCO", "format=json"], 2, "unknown argument 'format=json'"),
    (["ckpt=/nonexistent/best.pt", "input=CCO"], 1, "no checkpoint at /nonexistent/best.pt"),
])
def test_argument_errors(capsys, argv, status, message) -> None:
    assert main(argv) == status
    assert message in capsys.readouterr().err


def test_missing_smiles_column(trained, data_csv: Path, capsys) -> None:
    run_dir = trained("wln")
    assert main([f"ckpt={run_dir}", f"input={data_csv}", "smiles_column=smiles"]) == 1
    assert "no column 'smiles'; columns present: mol, logS" in capsys.readouterr().err


def test_hinted_override_works(trained, capsys) -> None:
    """The invalid-SMILES error names this command's own key; typing it in makes the run pass."""
    run_dir = trained("wln")
    argv = [f"ckpt={run_dir}", "input=CCO,C1CC(,CC"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    hint = re.search(r"; set (\S+=skip) to leave such rows out$", err.strip())
    assert hint and hint.group(1) == "on_invalid=skip", err
    assert main([*argv, hint.group(1)]) == 0


@pytest.mark.parametrize("spec", ["/tmp/x/tset.csv", "tset.csv", "data/smiles", "mols.SMI",
                                  "~/no/such/list.txt"])
@pytest.mark.parametrize("on_invalid", ["error", "skip"])
def test_mistyped_input_path_is_no_such_file(tmp_path: Path, capsys, spec: str,
                                              on_invalid: str) -> None:
    """A path to no file is one line and status 1, not a SMILES (nor, with skip, an empty row);
    it is caught before the checkpoint is read."""
    argv = [f"ckpt={tmp_path / 'no.pt'}", f"input={spec}", f"on_invalid={on_invalid}"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"error: input={spec}: no such file\n"


@pytest.mark.parametrize(("spec", "path_like"), [
    ("/tmp/x/tset.csv", True), ("a.tsv", True), ("x.txt", True), ("dir/file", True),
    ("F/C=C/F", False), ("C/C=C\\C", False), ("CCO,c1ccccc1", False), ("CCO", False),
    ("CCO.C", False), ("F/C=C/F,CC", False),
])
def test_looks_like_path(spec: str, path_like: bool) -> None:
    """Stereo bonds (``/``, ``\\``) keep a SMILES a SMILES; file endings and non-SMILES paths do not."""
    assert looks_like_path(spec) is path_like


def test_ensemble_mean_and_spread(compose_cfg: Callable, tmp_path: Path, data_csv: Path,
                                  capsys) -> None:
    """``ckpt=a,b``: each row's prediction is the members' mean, ``std`` their sample std."""
    runs = []
    for seed in (0, 1):
        run_dir = tmp_path / f"wln_seed{seed}"
        args = ["task=mol_csv", "model=wln", "debug=smoke", "device=cpu", f"seed={seed}",
                f"run_dir={run_dir}", f"task.data.path={data_csv}", "task.data.smiles_column=mol",
                "task.data.target_column=logS", f"task.data.cache_dir={tmp_path / 'cache'}"]
        train(compose_cfg(args), overrides=args)
        runs.append(run_dir)
    single = []
    for i, run_dir in enumerate(runs):
        out = tmp_path / f"single{i}.csv"
        assert main([f"ckpt={run_dir}", f"input={data_csv}", f"output={out}"]) == 0
        single.append([float(r["prediction"]) for r in read_csv(out)])
    out = tmp_path / "ensemble.csv"
    assert main([f"ckpt={runs[0]},{runs[1]}", f"input={data_csv}", f"output={out}"]) == 0
    rows = read_csv(out)
    assert list(rows[0]) == ["row", "smiles", "logS", "prediction", "std"]
    for row, a, b in zip(rows, *single):
        assert float(row["prediction"]) == pytest.approx((a + b) / 2, rel=1e-12)
        assert float(row["std"]) == pytest.approx(abs(a - b) / math.sqrt(2), rel=1e-9, abs=1e-12)
    assert any(float(r["std"]) > 0 for r in rows)  # two seeds, two models
    capsys.readouterr()


def test_ensemble_of_two_tasks_is_refused(trained, tmp_path: Path, capsys) -> None:
    from knn.train import checkpoint as ckpt_io

    run_dir = trained("wln")
    state = ckpt_io.load(run_dir / "best.pt")
    state["meta"] = {**state["meta"], "target_column": "PCE"}
    other = tmp_path / "other.pt"
    ckpt_io.save(state, other)
    assert main([f"ckpt={run_dir},{other}", "input=CCO"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: ckpt={other}: its target_column ('PCE') differs") and err.count("\n") == 1


def test_molecules_without_bonds_get_one_prediction_and_a_warning(trained, capsys, caplog) -> None:
    """A walk of length 2 needs a bond: a WLN's h_G is 0 for methane, water or a salt of
    single-atom ions, so they share one prediction, and both training and prediction say so."""
    run_dir = trained("wln")
    result = json.loads((run_dir / "result.json").read_text())
    assert sum(result["extra"]["data"]["bondless"].values()) == 1  # "C" of SMILES
    caplog.clear()
    assert main([f"ckpt={run_dir}", "input=C,O,[Na+].[Cl-],CCO,CC"]) == 0
    preds = [float(r["prediction"]) for r in read_csv(capsys.readouterr().out)]
    assert preds[0] == preds[1] == preds[2]
    assert len({preds[0], preds[3], preds[4]}) == 3
    assert "input: 3 of 5 molecules have no bond" in caplog.text
