"""knn.tools.ensemble: the mean of seeds' predictions, scored on the members' split."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Callable

import pytest

from knn.predict import main as predict
from knn.tools.ensemble import main
from knn.tools.study import rows
from knn.train import train

SMILES = ["C", "CC", "CCO", "CCN", "CC=O", "c1ccccc1", "c1ccncc1", "c1ccoc1", "c1ccsc1",
          "Cc1ccccc1", "Oc1ccccc1", "c1ccc2ccccc2c1", "C1CCCCC1", "CC(=O)O", "N#Cc1ccccc1",
          "O=C1CCCC1", "COc1ccccc1", "C=Cc1ccccc1", "CC(C)(C)O", "c1ccc2sccc2c1", "FC(F)F",
          "CCCC", "CCOC", "OCCO", "C[SiH2]C", "c1cc[se]c1", "CCCCO", "CCCN", "OC1CCCC1", "c1ccccc1O"]


@pytest.fixture
def runs(compose_cfg: Callable, tmp_path: Path) -> Callable[..., Path]:
    """``runs(seed, *overrides)``: a smoke WLN run on a small CSV, every split evaluated whole."""
    data = tmp_path / "mols.csv"
    data.write_text("mol,logS\n" + "".join(f"{s},{0.3 * len(s) - 0.1 * s.count('c'):.3f}\n"
                                           for s in SMILES))

    def run(seed: int, *overrides: str) -> Path:
        run_dir = tmp_path / f"seed{seed}_{len(overrides)}_overrides"
        args = ["task=mol_csv", "model=wln", "debug=smoke", "device=cpu", f"seed={seed}",
                f"run_dir={run_dir}", f"task.data.path={data}", "task.data.smiles_column=mol",
                "task.data.target_column=logS", f"task.data.cache_dir={tmp_path / 'cache'}",
                "task.limit_eval_batches=null", *overrides]
        train(compose_cfg(args), overrides=args)
        return run_dir

    return run


def split_csv(run_dir: Path, split: str, out: Path) -> Path:
    """The ``split`` molecules of a run (its split.json rows of its CSV) as a CSV of their own."""
    result = json.loads((run_dir / "result.json").read_text())
    rows_of = json.loads((run_dir / "split.json").read_text())[split]
    with open(result["config"]["task"]["data"]["path"], newline="") as f:
        records = list(csv.reader(f))
    with open(out, "w", newline="") as f:
        csv.writer(f).writerows([records[0]] + [records[1 + r] for r in rows_of])
    return out


def test_scores_are_those_of_the_mean_prediction(runs, tmp_path: Path, capsys) -> None:
    members = [runs(0), runs(1)]
    assert main([*map(str, members), "--out", str(tmp_path / "ens")]) == 0
    result = json.loads((tmp_path / "ens" / "result.json").read_text())
    for split in ("valid", "test"):
        # independent: knn.predict's ensemble on the split's rows, errors computed here
        out = tmp_path / f"{split}_pred.csv"
        assert predict([f"ckpt={members[0]},{members[1]}",
                        f"input={split_csv(members[0], split, tmp_path / f'{split}.csv')}",
                        f"output={out}"]) == 0
        with open(out, newline="") as f:
            pairs = [(float(r["prediction"]), float(r["logS"])) for r in csv.DictReader(f)]
        rmse = math.sqrt(sum((p - y) ** 2 for p, y in pairs) / len(pairs))
        mae = sum(abs(p - y) for p, y in pairs) / len(pairs)
        assert result["metrics"][split] == pytest.approx({"rmse": rmse, "mae": mae}, rel=1e-6)
        # each member scores what its own run measured with the same checkpoint
        for member, run_dir in zip(result["ensemble"]["members"], members):
            own = json.loads((run_dir / "result.json").read_text())["metrics"][split]
            assert member["metrics"][split] == pytest.approx(own, rel=1e-6)
    assert result["ensemble"]["members"][0]["metrics"] != result["ensemble"]["members"][1]["metrics"]
    own = [json.loads((d / "result.json").read_text()) for d in members]
    assert result["seed"] == [0, 1] and result["params"] == 2 * own[0]["params"]
    assert result["epochs"] == [r["epochs"] for r in own]
    assert result["protocol"] == f"ensemble of 2; {own[0]['protocol']}"  # never averaged with them
    assert result["wall_seconds"] == pytest.approx(sum(r["wall_seconds"] for r in own))
    rates = [r["extra"]["throughput"]["molecules_per_second"] for r in own]
    assert result["extra"]["throughput"]["molecules_per_second"] == \
        pytest.approx(1 / (1 / rates[0] + 1 / rates[1]))
    assert result["command"].startswith("python -m knn.tools.ensemble ") and "git_commit" in result
    # a study reads it as one row, named as an ensemble
    (tmp_path / "study").mkdir()
    for name, src in {"base": members[0] / "result.json", "ens": tmp_path / "ens" / "result.json"}.items():
        (tmp_path / "study" / name).mkdir()
        (tmp_path / "study" / name / "result.json").write_text(src.read_text())
    factors = {r["run"]: r["factor"] for r in rows(tmp_path / "study")}
    assert factors == {"base": "base", "ens": "ensemble of 2 (seeds 0,1)"}
    capsys.readouterr()


def test_members_must_share_the_config(runs, tmp_path: Path, capsys) -> None:
    a, b = runs(0), runs(1, "model.readout=sum")
    assert main([str(a), str(b), "--out", str(tmp_path / "ens")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {b}: its config differs from {a}'s (model.readout=sum)")
    assert err.count("\n") == 1 and not (tmp_path / "ens").exists()
    assert main([str(a), "--out", str(tmp_path / "ens")]) == 1
    assert "at least two run folders" in capsys.readouterr().err
    assert main([str(a), str(tmp_path / "nothing"), "--out", str(tmp_path / "ens")]) == 1
    assert "no readable result.json" in capsys.readouterr().err
    peer = tmp_path / "peer"  # a peer run's result.json (chemprop's), not a training run's
    peer.mkdir()
    (peer / "result.json").write_text(json.dumps({"test_rmse": 0.9, "params": 1}))
    assert main([str(a), str(peer), "--out", str(tmp_path / "ens")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {peer}: not a molecule regression training run (no task, ")
    assert err.count("\n") == 1
    c = tmp_path / "cut"  # the same config under another protocol label
    c.mkdir()
    cut = {**json.loads((a / "result.json").read_text()), "protocol": "cut at 1 epochs"}
    (c / "result.json").write_text(json.dumps(cut))
    assert main([str(a), str(c), "--out", str(tmp_path / "ens")]) == 1
    assert "(protocol 'cut at 1 epochs' vs" in capsys.readouterr().err
