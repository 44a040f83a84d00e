"""Where each stretch of a run trained: the segments of a paused and resumed run.

A run resumed with ``train.resume=true`` may go on on another machine, another device or
another torch version. Every process that trains a run adds one *segment*; the list is
saved in each checkpoint and written to ``result.json["segments"]``, oldest first::

    {"device": "cpu" | "cuda:0 (<GPU>)", "torch_version": "2.13.0+cpu",
     "cpu_model": ..., "logical_cores": ..., "torch_threads": ..., "git_commit": ...,
     "started": "<UTC ISO time>", "start": {"epoch", "batch", "step"},
     "end": {"epoch", "batch", "step"}, "training_seconds": ..., "recorded": true}

``start``/``end`` delimit the optimizer steps ``[start.step, end.step)`` whose updates
are in the final weights. A process killed between two checkpoints loses the steps after
its last one, which the next segment trains again: a segment ends at the last checkpoint
its process wrote (or at the end of training). A checkpoint written before segments were
kept yields one segment with ``"recorded": false`` covering the steps before it.

Pure functions over plain dicts (no torch), so the report and the migrations use them too.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

#: The fields naming where a segment ran; consecutive segments equal on them are one place.
PLACE = ("device", "torch_version", "cpu_model")


def position(progress: Any) -> dict[str, int]:
    """``{"epoch", "batch", "step"}`` of a :class:`knn.train.loop.Progress`."""
    return {"epoch": progress.epoch, "batch": progress.batch, "step": progress.step}


def begin(progress: Any, device: str, torch_version: str, machine: dict[str, Any],
          git_commit: str | None) -> dict[str, Any]:
    """A new segment starting at ``progress``, on this process's device and machine."""
    return {"device": device, "torch_version": torch_version, **machine, "git_commit": git_commit,
            "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "start": position(progress), "end": position(progress), "training_seconds": 0.0,
            "recorded": True}


def unrecorded(progress: Any) -> dict[str, Any]:
    """The segment standing for a checkpoint's past when the checkpoint kept none."""
    zero = {"epoch": 0, "batch": 0, "step": 0}
    return {"device": None, "torch_version": None, "cpu_model": None, "git_commit": None,
            "started": None, "start": zero, "end": position(progress),
            "training_seconds": round(progress.elapsed, 2), "recorded": False}


def extend(segment: dict[str, Any], progress: Any, seconds: float) -> None:
    """Move ``segment``'s end to ``progress``; ``seconds``: its training time so far."""
    segment["end"] = position(progress)
    segment["training_seconds"] = round(seconds, 2)


def from_result(result: dict[str, Any]) -> dict[str, Any]:
    """One segment for a ``result.json`` written before segments were kept, from its own
    top-level fields: right for a run that never moved, and marked as derived."""
    machine = result.get("machine") or {}
    end = {"epoch": result.get("epochs"), "batch": 0, "step": result.get("steps")}
    return {"device": result.get("device"), "torch_version": result.get("torch_version"),
            "cpu_model": machine.get("cpu_model"), "logical_cores": machine.get("logical_cores"),
            "torch_threads": machine.get("torch_threads"), "git_commit": result.get("git_commit"),
            "started": None, "start": {"epoch": 0, "batch": 0, "step": 0}, "end": end,
            "training_seconds": result.get("wall_seconds"), "recorded": False,
            "derived_from": "the result's own fields (written before segments were kept)"}


def of(result: dict[str, Any]) -> list[dict[str, Any]]:
    """A result's segments: recorded, migrated, or derived from its fields."""
    return result.get("segments") or [from_result(result)]


def hardware(segment: dict[str, Any]) -> str:
    """``NVIDIA H100 80GB HBM3`` or ``CPU (AMD EPYC)``; ``not recorded`` when unknown."""
    device = segment.get("device")
    if device is None:
        return "not recorded"
    if device.startswith("cuda") and "(" in device:
        return device[device.index("(") + 1:device.rindex(")")]
    return f"CPU ({segment['cpu_model']})" if segment.get("cpu_model") else device.upper()


def places(segments: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive segments merged where they ran in the same place (:data:`PLACE`):
    ``{"hardware", "torch_version", "start", "end", "training_seconds"}`` each."""
    merged: list[dict[str, Any]] = []
    last_key = None
    for s in segments:
        key = tuple(s.get(k) for k in PLACE)
        if merged and key == last_key:
            merged[-1]["end"] = s["end"]
            merged[-1]["training_seconds"] = (merged[-1]["training_seconds"] or 0) + \
                (s.get("training_seconds") or 0)
            continue
        merged.append({"hardware": hardware(s), "torch_version": s.get("torch_version"),
                       "start": dict(s["start"]), "end": dict(s["end"]),
                       "training_seconds": s.get("training_seconds")})
        last_key = key
    return merged


def _span(place: dict[str, Any]) -> str:
    start, end = place["start"], place["end"]
    if end.get("step") is None:
        return "all steps"
    last_epoch = end["epoch"] if end.get("batch") else end["epoch"] - 1
    span = f"epochs {start['epoch']}-{last_epoch}" if last_epoch > start["epoch"] \
        else f"epoch {start['epoch']}"
    return f"{span} (steps {start['step']:,}-{end['step']:,})"


def where(segments: list[dict[str, Any]]) -> str:
    """Where a run trained, in a table cell: ``CPU (AMD EPYC), torch 2.13.0+cpu`` for one
    place; ``<place>: epochs 0-32 (steps ...); then <place>: ...`` for several."""
    merged = places(segments)
    def name(p: dict[str, Any]) -> str:
        version = p["torch_version"]
        return p["hardware"] + (f", torch {version}" if version else "")
    if len(merged) == 1:
        return name(merged[0])
    return "; then ".join(f"{name(p)}: {_span(p)}" for p in merged)


def threads(segments: list[dict[str, Any]]) -> str | None:
    """The torch threads a run trained with: ``1 thread(s)`` when every segment used one
    count; ``1 thread(s) for steps 0-400, then 2 for steps 400-41,500`` when it changed
    (a thread count changes speed). None when no segment recorded it."""
    runs: list[list[Any]] = []  # [threads, start, end] over consecutive equal counts
    for s in segments:
        n = s.get("torch_threads")
        if runs and runs[-1][0] == n:
            runs[-1][2] = s["end"]
        else:
            runs.append([n, s["start"], s["end"]])
    if all(n is None for n, _, _ in runs):
        return None
    if len(runs) == 1:
        return f"{runs[0][0]} thread(s)"
    def steps(start: dict[str, Any], end: dict[str, Any]) -> str:
        if start.get("step") is None or end.get("step") is None:
            return "steps not recorded"
        return f"steps {start['step']:,}-{end['step']:,}"
    return ", then ".join(
        f"{'not recorded' if n is None else n}{' thread(s)' if i == 0 else ''} for "
        f"{steps(start, end)}" for i, (n, start, end) in enumerate(runs))


def base_version(version: str | None) -> str | None:
    """``2.13.0+cpu`` -> ``2.13.0``."""
    return None if version is None else version.split("+", 1)[0]


def departure(segments: list[dict[str, Any]], pinned_torch: str | None) -> str | None:
    """What a reader must know about where a run trained, or None when it trained in one
    place with the pinned torch (``pinned_torch``; None: not checked). One line."""
    merged = places(segments)
    notes = []
    if len(merged) > 1:
        notes.append(f"trained in {len(merged)} places (see where it ran)")
    if any(p["hardware"] == "not recorded" for p in merged):
        notes.append("where part of it trained was not recorded")
    versions = sorted({v for p in merged if (v := base_version(p["torch_version"])) is not None})
    off = [v for v in versions if pinned_torch is not None and v != pinned_torch]
    if off:
        notes.append(f"torch {', '.join(off)}, not the pinned {pinned_torch}")
    return ", ".join(notes) or None
