"""Segments of a resumed run (knn.train.segments): recorded by the trainer, summarised for
tables, and a checkpoint without them read as one unrecorded segment."""

from __future__ import annotations

import torch

from knn.train import checkpoint, segments


def seg(device: str, torch_version: str, cpu: str, start: tuple[int, int, int],
        end: tuple[int, int, int], seconds: float) -> dict:
    pos = lambda t: dict(zip(("epoch", "batch", "step"), t))  # noqa: E731
    return {"device": device, "torch_version": torch_version, "cpu_model": cpu,
            "start": pos(start), "end": pos(end), "training_seconds": seconds, "recorded": True}


GPU = "cuda:0 (NVIDIA H100 80GB HBM3)"


def test_one_place_is_named_once_and_is_no_departure() -> None:
    run = [seg("cpu", "2.13.0+cpu", "AMD EPYC", (0, 0, 0), (9, 10, 8310), 100.0),
           seg("cpu", "2.13.0+cpu", "AMD EPYC", (9, 10, 8310), (50, 0, 41500), 300.0)]
    assert segments.where(run) == "CPU (AMD EPYC), torch 2.13.0+cpu"
    [place] = segments.places(run)
    assert place["training_seconds"] == 400.0 and place["end"]["step"] == 41500
    assert segments.departure(run, "2.13.0") is None


def test_a_move_and_an_unpinned_torch_are_departures() -> None:
    run = [seg(GPU, "2.11.0+cu130", "Intel Xeon", (0, 0, 0), (33, 210, 27600), 213.0),
           seg("cpu", "2.13.0+cpu", "AMD EPYC", (33, 210, 27600), (50, 0, 41500), 6147.0)]
    assert segments.where(run) == (
        "NVIDIA H100 80GB HBM3, torch 2.11.0+cu130: epochs 0-33 (steps 0-27,600); "
        "then CPU (AMD EPYC), torch 2.13.0+cpu: epochs 33-49 (steps 27,600-41,500)")
    assert segments.departure(run, "2.13.0") == \
        "trained in 2 places (see where it ran), torch 2.11.0, not the pinned 2.13.0"
    assert segments.departure(run[1:], "2.13.0") is None


def test_threads_are_named_once_or_part_by_part() -> None:
    one = seg("cpu", "2.13.0+cpu", "AMD EPYC", (0, 0, 0), (0, 400, 400), 170.0)
    two = seg("cpu", "2.13.0+cpu", "AMD EPYC", (0, 400, 400), (50, 0, 41500), 11000.0)
    again = seg("cpu", "2.13.0+cpu", "AMD EPYC", (50, 0, 41500), (60, 0, 49800), 900.0)
    one["torch_threads"], two["torch_threads"], again["torch_threads"] = 1, 2, 2
    assert segments.threads([two, again]) == "2 thread(s)"
    assert segments.threads([one, two, again]) == \
        "1 thread(s) for steps 0-400, then 2 for steps 400-49,800"
    assert segments.threads([seg("cpu", "2.13.0+cpu", "AMD EPYC", (0, 0, 0), (1, 0, 9), 1.0)]) is None


def test_result_without_segments_gives_one_derived_segment() -> None:
    result = {"device": "cpu", "torch_version": "2.13.0+cpu", "epochs": 50, "steps": 41500,
              "wall_seconds": 12.5, "machine": {"cpu_model": "AMD EPYC", "logical_cores": 2,
                                                "torch_threads": 2}}
    [one] = segments.of(result)
    assert one["recorded"] is False and one["end"]["step"] == 41500
    assert segments.where([one]) == "CPU (AMD EPYC), torch 2.13.0+cpu"


def test_trainer_records_each_resumed_stretch(train_smoke, tmp_path) -> None:
    first = train_smoke(tmp_path, "train.max_steps=4")
    [only] = first["segments"]
    assert only["recorded"] and only["device"] == "cpu" and only["torch_version"] == torch.__version__
    assert only["start"]["step"] == 0 and only["end"]["step"] == 4 == first["steps"]
    resumed = train_smoke(tmp_path, "train.resume=true")  # to the end: 2 epochs of 3 batches
    a, b = resumed["segments"]
    assert a["start"]["step"] == 0 and a["end"] == b["start"] and b["end"]["step"] == 6
    assert a["end"]["step"] == 4 and b["training_seconds"] > 0
    saved = checkpoint.load(tmp_path / "last.pt")["segments"]
    # the result's last segment also counts the final evaluation's seconds
    assert [s["end"] for s in saved] == [s["end"] for s in resumed["segments"]]


def test_checkpoint_without_segments_resumes_with_an_unrecorded_one(train_smoke, tmp_path) -> None:
    train_smoke(tmp_path, "train.max_steps=4")
    state = checkpoint.load(tmp_path / "last.pt")
    del state["segments"]  # as written before segments were kept
    checkpoint.save(state, tmp_path / "last.pt")
    resumed = train_smoke(tmp_path, "train.max_steps=6", "train.resume=true")
    past, now = resumed["segments"]
    assert past["recorded"] is False and past["device"] is None
    assert past["end"]["step"] == 4 and now["start"]["step"] == 4 and now["end"]["step"] == 6
    assert "not recorded" in segments.departure(resumed["segments"], None)
