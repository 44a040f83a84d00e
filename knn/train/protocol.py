"""A run's protocol label, derived from its config against its experiment's.

The paper's protocol of a run is the resolved config of its experiment file
alone (``experiment=<name>`` and no other override; composing it needs Hydra,
see :func:`knn.train.config.reference_config`). :func:`protocol_label` compares
the run's resolved config (``result.json["config"]``) with it and names every
difference, except the keys that cannot change a number (:data:`IGNORED`):

* ``full``: no difference;
* ``smoke (limited batches)``: ``task.limit_train_batches`` or
  ``task.limit_eval_batches`` is set (``debug=smoke``); nothing else is said,
  its numbers mean nothing;
* ``budgeted N min``: stopped by ``train.max_minutes`` (N);
* ``cut at N steps``: stopped by ``train.max_steps`` (N);
* ``cut at N epochs``: stopped by ``train.max_epochs`` set below the
  experiment's (N); ``train.max_epochs`` above the experiment's is a
  modification, never a cut;
* ``modified (key=value, ...)``: every other difference, in config order.
  When ``task.name`` or ``model.name`` differs, the group is named once
  (``model=lstm_lm``) instead of each of its keys.

Parts combine with ``; ``, e.g. ``budgeted 30 min; modified
(task.eval_batch_size=10)``. A limit (``max_minutes``, ``max_steps``, a lower
``max_epochs``) that did not stop the run is not named: training ran to the
end of the protocol, the limit changed nothing. A run without
``experiment=`` is compared with the composition of its own ``task=`` and
``model=`` choices alone (:func:`group_choices`; ``task=mol_csv`` brings its
training preset, so a run on those defaults has nothing else to name), and its
label starts with ``custom (no experiment)``.

Keys present in the reference but absent from the run's config were added to
the schema after the run; they are not differences (the run is assumed to
have had the behaviour the default keeps). Pure functions: no Hydra, no
torch, so the results registry and the migration can use them too.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from typing import Any

#: Keys (and the subtrees below them) that cannot change a number: where the run
#: runs, with how many threads, where it reads and writes files, its names,
#: its progress display and checkpointing.
IGNORED = (
    "threads", "device", "keep_freed_memory", "hydra",
    # seed: another draw of the same protocol (the paper reports the best of several).
    "seed",
    "variant", "paper",  # names and the paper's number: metadata
    "run_dir", "task.data.mirror", "task.data.cache_dir",
    # Which keys a model without them may drop; the values themselves are compared.
    "optional_keys",
    "train.progress", "train.log_minutes", "train.checkpoint_every", "train.resume",
    # Deterministic kernels (torch.use_deterministic_algorithms, cudnn.deterministic):
    # the same computation; only the summation order of some GPU reductions (atomic
    # adds, cuDNN's algorithm choice) changes, i.e. rounding, not the protocol. An op
    # without a deterministic kernel warns and runs as usual (knn.train.rng, warn_only).
    "train.deterministic",
)
#: Stopping limits, labelled as budgets and cuts rather than as modifications.
LIMITS = ("train.max_minutes", "train.max_steps", "train.max_epochs")
#: Set by ``debug=smoke``: the run sees a few batches only.
SMOKE_KEYS = ("task.limit_train_batches", "task.limit_eval_batches")
#: Groups whose ``name`` picks a schema: a different name is named once as ``group=name``.
GROUPS = ("task", "model")

FULL, SMOKE, CUSTOM = "full", "smoke (limited batches)", "custom (no experiment)"


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists and empty dicts are leaves."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


# StringKernelConfig's fields as they were when they moved under ``model.kernel``: a frozen
# list, not read from the class (fields added since were never flat, and this module stays
# free of torch).
_KERNEL_FIELDS = ("n", "mapping", "normalized", "output", "activation", "decay", "decay_value",
                  "highway", "rnn_dropout")
#: Model keys renamed by commit 11ddb37 (one model registry), per ``model.name``: old key
#: -> new key, dotted below ``model``. :func:`upgrade` reads a config written before it
#: with today's names, so runs from both sides of the change compare key by key.
RENAMED_MODEL_KEYS: dict[str, dict[str, str]] = {
    "knn_sst": {"d_hidden": "hidden", **{k: f"kernel.{k}" for k in _KERNEL_FIELDS}},
    "knn_lm": {"d": "hidden", **{k: f"kernel.{k}" for k in _KERNEL_FIELDS}},
    "bilstm": {"d_hidden": "hidden"},
    "kim_cnn": {"filters": "hidden"},
    "lstm_lm": {"d": "hidden"},
    "wl_kernel": {"iterations": "depth"},
}


def upgrade(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with its model keys under today's names (:data:`RENAMED_MODEL_KEYS`); a
    config that already uses them comes back equal. Pure: the input is not changed."""
    model = dict(config.get("model") or {})
    for old, new in RENAMED_MODEL_KEYS.get(model.get("name", ""), {}).items():
        if old in model:
            value = model.pop(old)
            *parents, leaf = new.split(".")
            node = model
            for part in parents:  # copied on the way down: the input's dicts stay as they were
                node[part] = dict(node.get(part) or {})
                node = node[part]
            node[leaf] = value
    return {**config, "model": model} if "model" in config else dict(config)


def _under(key: str, roots: Iterable[str]) -> bool:
    """Whether ``key`` is one of ``roots`` or lies below one."""
    return any(key == r or key.startswith(r + ".") for r in roots)


def format_value(value: Any) -> str:
    """A value as a Hydra override writes it: ``null``, ``true``, ``0.5``, ``[1, 2]``, text."""
    return value if isinstance(value, str) else json.dumps(value)


def _more_epochs(value: Any, reference: Any) -> bool:
    """Whether a ``train.max_epochs`` lies above the experiment's (a modification, not a cut)."""
    return value is not None and (reference is None or value > reference)


def differences(run_cfg: dict[str, Any], reference_cfg: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(key, run's value)`` for every key whose value differs from the reference's, in the
    run's config order, without :data:`IGNORED` and :data:`SMOKE_KEYS`, and of
    :data:`LIMITS` only a ``train.max_epochs`` above the experiment's; a differing
    ``task.name`` / ``model.name`` stands for its whole group (``model=lstm_lm``).
    Keys absent from the run's config are not differences (see the module docstring).
    """
    run, ref = flatten(run_cfg), flatten(reference_cfg)
    swapped = {g for g in GROUPS if run.get(f"{g}.name") != ref.get(f"{g}.name")}
    found: list[tuple[str, Any]] = []
    for key, value in run.items():
        group = key.split(".", 1)[0]
        if group in swapped:
            if key == f"{group}.name":
                found.append((group, value))
        elif key in LIMITS:
            if key == "train.max_epochs" and _more_epochs(value, ref.get(key)):
                found.append((key, value))
        elif not _under(key, (*IGNORED, *SMOKE_KEYS)) and (key not in ref or ref[key] != value):
            found.append((key, value))
    return found


def stopped_by(run_cfg: dict[str, Any], reference_cfg: dict[str, Any],
               stop_reason: str | None) -> str | None:
    """``budgeted N min`` / ``cut at N steps`` / ``cut at N epochs`` when a limit the run set
    (not the experiment's own) stopped it; None otherwise."""
    train, ref = run_cfg.get("train") or {}, reference_cfg.get("train") or {}
    minutes, steps, epochs = (train.get(k) for k in ("max_minutes", "max_steps", "max_epochs"))
    if stop_reason == "max_minutes" and minutes != ref.get("max_minutes"):
        return f"budgeted {minutes:g} min"
    if stop_reason == "max_steps" and steps != ref.get("max_steps"):
        return f"cut at {steps} steps"
    if stop_reason == "max_epochs" and epochs != ref.get("max_epochs") \
            and not _more_epochs(epochs, ref.get("max_epochs")):
        return f"cut at {epochs} epochs"
    return None


def is_smoke(run_cfg: dict[str, Any]) -> bool:
    """Whether the run saw a limited number of batches (``debug=smoke``)."""
    flat = flatten(run_cfg)
    return any(flat.get(k) for k in SMOKE_KEYS)


def protocol_label(run_cfg: dict[str, Any], reference_cfg: dict[str, Any], stop_reason: str | None,
                   experiment: str | None) -> str:
    """The run's protocol label (see the module docstring).

    ``reference_cfg`` is the resolved config of ``experiment=<experiment>`` alone, or of
    the run's :func:`group_choices` alone when ``experiment`` is None.
    """
    if is_smoke(run_cfg):
        return SMOKE
    limit = stopped_by(run_cfg, reference_cfg, stop_reason)
    changed = differences(run_cfg, reference_cfg)
    parts = [CUSTOM] if experiment is None else []
    if limit:
        parts.append(limit)
    if changed:
        parts.append("modified (" + ", ".join(f"{k}={format_value(v)}" for k, v in changed) + ")")
    return "; ".join(parts) or FULL


def experiment_of(overrides: Iterable[str]) -> str | None:
    """The ``experiment=`` override that composed the run (the last one wins; ``~experiment``
    and ``experiment=null`` mean none), or None."""
    found = None
    for token in overrides:
        key, _, value = token.partition("=")
        if key.lstrip("+~") == "experiment":
            found = None if key.startswith("~") or value in ("", "null") else value
    return found


def group_choices(overrides: Iterable[str]) -> list[str]:
    """The ``task=`` and ``model=`` overrides that chose the run's groups (the last of each),
    for a run without ``experiment=``: its reference composition."""
    chosen: dict[str, str] = {}
    for token in overrides:
        key, sep, value = token.partition("=")
        if sep and key.lstrip("+") in GROUPS:
            chosen[key.lstrip("+")] = value
    return [f"{group}={value}" for group, value in chosen.items()]


def experiment_of_command(command: str | None) -> str | None:
    """:func:`experiment_of` the tokens of a recorded command line."""
    return experiment_of(shlex.split(command or ""))
