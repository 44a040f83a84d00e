"""The rows of the paper's tables, built from the experiment configs and the runs.

Every experiment config (``conf/experiment/<task>/<name>.yaml``) is a row, run or not;
its runs (:mod:`knn.tools.results`) with one label (the protocol label each run records,
:mod:`knn.train.protocol`, and the data or vectors substituted for the paper's) make one
row. Beside the aggregates (:func:`knn.tools.results.aggregate`) a row says what a reader
needs to trust it: its departures from the paper and where its runs trained. The report
(:mod:`knn.tools.report`), the judgements (:mod:`knn.tools.judge`) and the task tables
(:mod:`knn.tools.cep_table`, :mod:`knn.tools.sst_table`) read these rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from knn.data.mirror import GLOVE_6B_SST, SPACY_STAND_IN
from knn.paths import CONF_DIR, pinned_versions
from knn.tasks.sst import DEFAULT_VECTORS
from knn.tools import results
from knn.tools.results import aggregate, protocol
from knn.train import segments
from knn.train.config import experiment_names

#: How a report names the vectors an SST run used (``result["extra"]["vectors"]["file"]``).
SST_VECTORS = {
    GLOVE_6B_SST: "GloVe 6B 50d uncased vectors (paper: 840B 300d cased)",
    SPACY_STAND_IN: "spaCy en_core_web_md stand-in vectors (superseded; paper: GloVe 840B 300d)",
}
CEP_SUBSET = "public CEP subset (29,978 molecules), not the paper's 2.3M"


@dataclass(frozen=True)
class Experiment:
    """One experiment config: its name, task, variant, ``paper:`` field and whole config."""

    name: str
    task: str
    variant: str
    paper: dict[str, Any]
    config: dict[str, Any]


def experiments() -> list[Experiment]:
    """Every experiment config, composed as ``python -m knn.train experiment=<name>`` would."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    found = []
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for name in experiment_names():
            cfg = compose(config_name="train", overrides=[f"experiment={name}"])
            plain = cast("dict[str, Any]", OmegaConf.to_container(cfg, resolve=True))
            found.append(Experiment(name, plain["task"]["name"], plain["variant"],
                                    plain.get("paper") or {}, plain))
    return found


def draws(r: dict[str, Any]) -> str:
    """How the run drew its training molecules, from its config: molecules per epoch and
    whether re-sampled toward rare targets (the authors') or uniformly; ``-`` for a
    closed-form fit. The protocol label alone does not say it: ``full`` is the run's own
    experiment, e.g. 100,000 re-sampled for ``cep/wln`` but 24,000 uniform for
    ``cep/wln_tuned``."""
    if (r.get("extra") or {}).get("fitted_parameters") is not None:
        return "-"
    task = (r.get("config") or {}).get("task") or {}
    if "samples_per_epoch" not in task:
        return "not recorded"
    n = task["samples_per_epoch"]
    return (f"{n:,}" if n else "one pass") + (", re-sampled" if task.get("resample") else ", uniform")


def substitution(task: str, config: dict[str, Any], vectors: str | None = None) -> str | None:
    """What a run (or config) uses in place of the paper's data or vectors; None: nothing.

    ``vectors``: the SST vector file a run recorded using (else read from ``config``,
    whose null path means today's default)."""
    task_cfg = config.get("task") or {}
    if task == "sst":
        used = vectors or (task_cfg.get("vectors") or {}).get("path") or DEFAULT_VECTORS
        return SST_VECTORS.get(used, f"vectors from {Path(used).name} (paper: GloVe 840B 300d)")
    if task == "cep":
        path = (task_cfg.get("data") or {}).get("path")
        return CEP_SUBSET if path is None else f"data from {Path(path).name}"
    return None


def protocol_cell(run: dict[str, Any]) -> str:
    """The run's protocol label (:mod:`knn.train.protocol`: whether the experiment file ran
    unchanged); a trained CEP run also says how it drew its training molecules, which
    ``full`` alone does not (:func:`draws`: ``cep/wln`` draws 100,000 an
    epoch re-sampled, ``cep/wln_tuned`` 24,000 uniformly)."""
    drawn = draws(run) if run["task"] == "cep" else "-"
    parts = [protocol(run), None if drawn in ("-", "not recorded") else f"draws per epoch: {drawn}"]
    return "; ".join(p for p in parts if p)


def run_substitution(run: dict[str, Any]) -> str | None:
    """:func:`substitution` of a run, with the SST vector file it recorded using."""
    vectors = ((run.get("extra") or {}).get("vectors") or {}).get("file")
    return substitution(run["task"], run.get("config") or {}, vectors)


def label(run: dict[str, Any]) -> str:
    """What makes runs of one experiment one row: the protocol cell and the substitution."""
    return "; ".join(p for p in (protocol_cell(run), run_substitution(run)) if p)


def provenance_gaps(runs: list[dict[str, Any]]) -> str | None:
    """``machine, ops not recorded (2 of 3 runs)`` when runs lack those provenance keys."""
    gaps = {k: sum(not r.get(k) for r in runs) for k in ("machine", "ops")}
    missing = [k for k, n in gaps.items() if n]
    if not missing:
        return None
    n = max(gaps.values())
    return f"{', '.join(missing)} not recorded ({n} of {len(runs)} run{'s' * (len(runs) > 1)})"


def departures(e: Experiment, runs: list[dict[str, Any]]) -> list[str]:
    """Every known departure of a row from the paper, one short line each: the data or
    vectors substituted, those its experiment file declares (``paper.departures``), where
    its runs trained when that was not one machine with the pinned torch
    (:func:`knn.train.segments.departure`; prefixed with the seeds it holds for when not
    every run shares it), and provenance its runs lack."""
    pinned = pinned_versions().get("torch")
    found = [run_substitution(r) for r in runs]  # the data or vectors first: the largest
    found += e.paper.get("departures") or []
    seeds_of: dict[str, list[int]] = {}
    for r in runs:
        if d := segments.departure(segments.of(r), pinned):
            seeds_of.setdefault(d, []).append(r["seed"])
    found += [d if len(seeds) == len(runs) else f"{seed_list(seeds)}: {d}"
              for d, seeds in seeds_of.items()]
    found.append(provenance_gaps(runs))
    return list(dict.fromkeys(d for d in found if d))  # first-seen order, once each


def seed_list(seeds: list[int]) -> str:
    """``seed 0`` or ``seeds 0, 2``."""
    return f"seed{'s' * (len(seeds) > 1)} {', '.join(map(str, sorted(seeds)))}"


def where_ran(runs: list[dict[str, Any]]) -> str:
    """Where a row's runs trained (:func:`knn.train.segments.where`), once when they agree,
    else per seed."""
    return per_seed({r["seed"]: results.where(r) for r in runs})


def per_seed(places: dict[int, str]) -> str:
    """Where seeds ran (``{seed: place}``): once when they agree, else seed by seed."""
    if len(set(places.values())) == 1:
        return next(iter(places.values()))
    return "; ".join(f"seed {seed}: {where}" for seed, where in sorted(places.items()))


def table_rows(task: str, exps: list[Experiment], runs: list[dict[str, Any]],
               failed: list[dict[str, Any]], accepts: Callable[[Experiment], bool] = lambda e: True,
               order: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """One row per (experiment, label) with runs, one per experiment without: the
    experiments of ``task`` that ``accepts`` takes, those named in ``order`` (variants)
    first, in that order, the others after them by name.

    A row: ``experiment``, ``group`` (the :func:`knn.tools.results.aggregate` group, or None),
    ``members`` (its runs' ``result.json`` dicts), ``label`` (:func:`label`, the grouping
    key), ``protocol`` (:func:`protocol_cell`), ``substitution`` (:func:`run_substitution`),
    ``departures`` (:func:`departures`), ``where`` (:func:`where_ran`) and ``failed`` (how
    many of the experiment's runs failed).
    """
    rank = {v: i for i, v in enumerate(order)}
    chosen = sorted((e for e in exps if e.task == task and accepts(e)),
                    key=lambda e: (rank.get(e.variant, len(rank)), e.variant))
    rows: list[dict[str, Any]] = []
    for e in chosen:
        key = (e.task, e.variant)
        n_failed = sum((f.get("task"), f.get("variant")) == key for f in failed)
        by_label: dict[str, list[dict[str, Any]]] = {}
        for r in runs:
            if (r["task"], r["variant"]) == key:
                by_label.setdefault(label(r), []).append(r)
        if not by_label:
            declared = list(e.paper.get("departures") or [])
            rows.append({"experiment": e, "group": None, "members": [], "failed": n_failed,
                         "label": "-", "protocol": "-", "substitution": substitution(e.task, e.config),
                         "departures": [d for d in [substitution(e.task, e.config)] if d] + declared,
                         "where": "-"})
        for lab in sorted(by_label):
            members = by_label[lab]
            [group] = aggregate(members)
            rows.append({"experiment": e, "group": group, "members": members, "failed": n_failed,
                         "label": lab, "protocol": protocol_cell(members[0]),
                         "substitution": run_substitution(members[0]),
                         "departures": departures(e, members), "where": where_ran(members)})
    return rows
