"""knn.tools.rows: a row's departures name the seeds a run-specific departure holds for."""

from __future__ import annotations

from knn.paths import pinned_versions
from knn.tools import rows

PINNED = pinned_versions()["torch"]


def run(seed: int, device: str, torch_version: str) -> dict:
    segment = {"device": device, "torch_version": torch_version, "cpu_model": "Intel Xeon",
               "start": {"epoch": 0, "batch": 0, "step": 0},
               "end": {"epoch": 50, "batch": 0, "step": 41500}, "recorded": True}
    return {"task": "ptb", "variant": "lstm_5m", "seed": seed, "config": {"task": {}},
            "machine": {"cpu_model": "Intel Xeon"}, "ops": {"scan": "fused"},
            "segments": [segment]}


EXPERIMENT = rows.Experiment(name="ptb/lstm_5m", task="ptb", variant="lstm_5m",
                             paper={"departures": ["declared in the experiment file"]},
                             config={})
GPU = "cuda:0 (NVIDIA H100 80GB HBM3)"


def test_a_departure_of_some_seeds_names_them() -> None:
    mixed = [run(0, GPU, "2.11.0+cu130"), run(1, "cpu", f"{PINNED}+cpu")]
    assert rows.departures(EXPERIMENT, mixed) == [
        "declared in the experiment file", f"seed 0: torch 2.11.0, not the pinned {PINNED}"]
    three = [*mixed, run(2, GPU, "2.11.0+cu130")]
    assert rows.departures(EXPERIMENT, three)[1] == \
        f"seeds 0, 2: torch 2.11.0, not the pinned {PINNED}"


def test_a_departure_of_every_run_is_stated_once_without_seeds() -> None:
    both = [run(0, GPU, "2.11.0+cu130"), run(1, GPU, "2.11.0+cu130")]
    assert rows.departures(EXPERIMENT, both) == [
        "declared in the experiment file", f"torch 2.11.0, not the pinned {PINNED}"]
    pinned = [run(0, "cpu", f"{PINNED}+cpu"), run(1, "cpu", f"{PINNED}+cpu")]
    assert rows.departures(EXPERIMENT, pinned) == ["declared in the experiment file"]
