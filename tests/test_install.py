"""The package as a library: what a wheel holds, the dependency ranges against the pins,
a light ``import knn``, the README's layer snippet, and (marked ``install``, run by
``.ci/run`` after ``make test``: ``pytest -m install tests/test_install.py``) a wheel
built from the checkout, installed into a fresh venv with ``constraints.txt`` and run
from a folder outside the checkout: the snippet, ``knn-train --cfg job``, smoke trainings
and ``knn-predict``.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knn import paths
from knn.data import mirror

REPO = Path(__file__).resolve().parents[1]
MIRROR = Path(os.environ.get("KNN_DATA_MIRROR") or REPO.parent / "shared" / "data")
PYTHON_FENCE = re.compile(r"^```python\s*$")
RUN_MARKER = re.compile(r"^<!--\s*test:\s*run\s*-->\s*$")


def pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def readme_python_blocks(path: Path = REPO / "README.md") -> list[str]:
    """The ``python`` blocks of the README with ``<!-- test: run -->`` on the line before."""
    lines, blocks = path.read_text().splitlines(), []
    for i, line in enumerate(lines):
        if PYTHON_FENCE.match(line) and i > 0 and RUN_MARKER.match(lines[i - 1].strip()):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            blocks.append("\n".join(lines[i + 1:end]) + "\n")
    return blocks


# --------------------------------------------------------------------------- #
# Cheap checks (the suite)
# --------------------------------------------------------------------------- #

def test_the_wheel_lists_every_package_and_maps_conf() -> None:
    """pyproject lists the packages by hand (find cannot add the mapped knn.conf): every
    folder of knn/ with an __init__.py, and knn.conf = the top-level conf/, yaml included."""
    setuptools_cfg = pyproject()["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "knn").rglob("__init__.py")}
    assert set(setuptools_cfg["packages"]) == found | {"knn.conf"}, "update [tool.setuptools] packages"
    assert setuptools_cfg["package-dir"] == {"knn.conf": "conf"}
    assert "**/*.yaml" in setuptools_cfg["package-data"]["knn.conf"]


def test_constraints_pin_every_dependency_inside_its_range() -> None:
    """constraints.txt pins each run-time and extra dependency, and each pin is allowed by
    pyproject's range (so make setup installs exactly the pins)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = pyproject()["project"]
    pins = paths.pinned_versions()
    assert pins["torch"] == "2.13.0"
    requirements = [*project["dependencies"],
                    *(r for extra in project["optional-dependencies"].values() for r in extra)]
    for text in requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside pyproject's {req}")


def test_pinned_versions_is_empty_without_a_checkout(monkeypatch) -> None:
    monkeypatch.setattr(paths, "CONSTRAINTS", None)
    assert paths.pinned_versions() == {}


def test_data_locations_without_a_checkout(monkeypatch, tmp_path: Path) -> None:
    """A wheel install has no repository: the cache defaults to $XDG_CACHE_HOME/knn
    (~/.cache/knn), $KNN_DATA_CACHE still wins, and no mirror is looked for beside it."""
    assert paths.default_data_cache() == REPO / "data"  # the checkout: unchanged
    monkeypatch.setattr(paths, "CHECKOUT", None)
    monkeypatch.setattr(mirror, "CHECKOUT", None)
    monkeypatch.delenv(mirror.ENV_CACHE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert mirror.default_cache_dir() == tmp_path / "xdg" / "knn"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert mirror.default_cache_dir() == Path.home() / ".cache" / "knn"
    monkeypatch.setenv(mirror.ENV_CACHE, str(tmp_path / "cache"))
    assert mirror.default_cache_dir() == tmp_path / "cache"
    assert mirror._default_mirror_dirs() == [Path.cwd().parent / "shared" / "data"]


def test_import_knn_is_light() -> None:
    """``import knn`` imports no torch; the public names load on use, never matplotlib or
    submitit."""
    code = ("import sys, knn\n"
            "heavy = ('torch', 'rdkit', 'matplotlib', 'submitit')\n"
            "print(*[m for m in heavy if m in sys.modules], sep=',')\n"
            "knn.StringKernelLayer, knn.WLKernelNet, knn.MolFeaturizer, knn.build, knn.preset\n"
            "print(*[m for m in heavy if m in sys.modules], sep=',')\n"
            "print(sorted(set(knn.__all__) - set(dir(knn))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO).stdout.splitlines()
    assert out == ["", "torch,rdkit", "[]"]


def test_predict_help(capsys) -> None:
    """``knn-predict --help`` (the wheel's entry point, knn.predict:main) prints the usage."""
    from knn.predict import main

    assert main(["--help"]) == 0 and "ckpt=" in capsys.readouterr().out
    assert pyproject()["project"]["scripts"]["knn-predict"] == "knn.predict:main"


def test_readme_layer_snippet_runs(tmp_path: Path) -> None:
    blocks = readme_python_blocks()
    assert blocks, "README.md has no python block marked <!-- test: run -->"
    for code in blocks:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]


# --------------------------------------------------------------------------- #
# The wheel, installed elsewhere (marked: .ci/run runs it once after make test)
# --------------------------------------------------------------------------- #

SMILES = ["C", "CC", "CCO", "CCN", "CC=O", "c1ccccc1", "c1ccncc1", "c1ccoc1", "c1ccsc1",
          "Cc1ccccc1", "Oc1ccccc1", "c1ccc2ccccc2c1", "C1CCCCC1", "CC(=O)O", "N#Cc1ccccc1",
          "O=C1CCCC1", "COc1ccccc1", "C=Cc1ccccc1", "CC(C)(C)O", "FC(F)F", "CCCC", "OCCO"]


#: Seconds each step of the install test took, by its command's first words (printed).
TIMES: dict[str, float] = {}


def _run(args: list, cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    start = time.monotonic()
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    step = " ".join(Path(str(a)).name for a in args[:3] if "\n" not in str(a))
    TIMES[step] = TIMES.get(step, 0.0) + time.monotonic() - start
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.install
def test_the_wheel_works_outside_the_checkout(tmp_path: Path, ptb_fixture) -> None:
    start = time.monotonic()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "KNN_DATA_CACHE", "KNN_DATA_MIRROR")}
    # Build from a copy: setuptools writes build/ and *.egg-info beside the sources.
    src = tmp_path / "src"
    for name in ("pyproject.toml", "README.md", "constraints.txt"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, src / name)
    for folder in ("knn", "conf"):
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path / "dist", src],
         tmp_path, env)
    wheel = next((tmp_path / "dist").glob("knn-*.whl"))
    venv = tmp_path / "venv"
    try:
        _check_installed(tmp_path, venv, wheel, env, ptb_fixture.dir, start)
    finally:
        shutil.rmtree(venv, ignore_errors=True)  # over 1 GB (torch); pytest keeps 3 tmp_paths


def _check_installed(tmp_path: Path, venv: Path, wheel: Path, env: dict, ptb_dir: Path,
                     start: float) -> None:
    _run([sys.executable, "-m", "venv", venv], tmp_path, env)
    bin_dir = venv / "bin"
    _run([bin_dir / "python", "-m", "pip", "install", "-q", "--no-compile", "-c", REPO / "constraints.txt", wheel],
         tmp_path, env, timeout=900)
    installed = time.monotonic()

    away = tmp_path / "away"  # a user's folder: no conf/, no knn/, not below the checkout
    away.mkdir()
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               OMP_NUM_THREADS="1", XDG_CACHE_HOME=str(tmp_path / "xdg"),
               # The fused ops' build is checked by the suite; compiled here it would take
               # minutes (a new venv's paths rebuild it), so the reference runs.
               KNN_FUSED="0", TORCH_EXTENSIONS_DIR=str(tmp_path / "torch_extensions"))
    # Where the package and its configs are, then the README's library snippet (one
    # process: each start imports torch).
    where = _run([bin_dir / "python", "-c",
                  "import knn, knn.paths as p; print(knn.__file__); print(p.CHECKOUT); print(p.CONF_DIR);"
                  "print(p.pinned_versions()); print(knn.preset('wln').hidden)\n"
                  + "".join(readme_python_blocks())], away, env)
    package_file, checkout, conf_dir, pins, hidden = where.stdout.splitlines()[:5]
    assert Path(package_file).is_relative_to(venv) and checkout == "None" and pins == "{}"
    assert Path(conf_dir) == Path(package_file).parent / "conf" and hidden == "200"
    configs = {str(f.relative_to(REPO / "conf")) for f in (REPO / "conf").rglob("*.yaml")}
    assert {str(f.relative_to(conf_dir)) for f in Path(conf_dir).rglob("*.yaml")} == configs
    assert (Path(package_file).parent / "ops" / "csrc" / "string_kernel_cpu.cpp").is_file()

    job = _run([bin_dir / "knn-train", "--cfg", "job", "experiment=ptb/gated_5m"], away, env)
    assert "name: ptb" in job.stdout and "variant: gated_5m" in job.stdout

    # One smoke training: data from the mirror through $KNN_DATA_MIRROR (else the PTB
    # test fixture), the cache at the default outside a checkout ($XDG_CACHE_HOME/knn).
    ptb_args = ["experiment=ptb/gated_5m", "debug=smoke", "device=cpu", "hydra.run.dir=runs/ptb"]
    if (MIRROR / "ptb" / "ptb.train.txt").is_file():
        ptb_env = {**env, "KNN_DATA_MIRROR": str(MIRROR)}
    else:
        ptb_env, ptb_args = env, [*ptb_args, f"task.data.dir={ptb_dir}"]
    _run([bin_dir / "knn-train", *ptb_args], away, ptb_env)
    assert json.loads((away / "runs/ptb/result.json").read_text())["metrics"]["test"]["ppl"] > 0
    assert (tmp_path / "xdg" / "knn" / "ptb").is_dir()

    # A molecule property model on the user's CSV, and predictions from its run.
    with open(away / "mols.csv", "w", newline="") as f:
        csv.writer(f).writerows([["smiles", "y"], *([s, round(0.3 * len(s), 2)] for s in SMILES)])
    _run([bin_dir / "knn-train", "task=mol_csv", "task.data.path=mols.csv", "task.data.target_column=y",
          "debug=smoke", "device=cpu", "hydra.run.dir=runs/mol"], away, env)
    pred = _run([bin_dir / "knn-predict", "ckpt=runs/mol", "input=CCO,c1ccccc1"], away, env)
    rows = list(csv.DictReader(pred.stdout.splitlines()))
    assert [r["smiles"] for r in rows] == ["CCO", "c1ccccc1"] and all(r["prediction"] for r in rows)

    print(f"install test: wheel + venv {installed - start:.0f} s, runs {time.monotonic() - installed:.0f} s;",
          "; ".join(f"{step}: {s:.0f} s" for step, s in TIMES.items()))
