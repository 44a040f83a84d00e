"""Weight averaging (``train.ema_decay``, knn.train.average): the recursion, and that the
trainer validates, selects, checkpoints and resumes θ̄ while training θ."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from knn.errors import ConfigError
from knn.train import checkpoint
from knn.train.average import WeightAverage


def test_average_follows_the_recursion_with_its_ramp() -> None:
    """θ̄_t = β_t θ̄_{t-1} + (1 - β_t) θ_t with β_t = min(d, (1+t)/(10+t)), computed here
    in float64 over a random walk of the weights, against the module's float32 lerp."""
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    model.bias.requires_grad_(False)  # only trainable parameters are averaged
    avg = WeightAverage(model, decay=0.8)
    expected = model.weight.detach().double().clone()
    for t in range(1, 31):
        with torch.no_grad():
            model.weight.add_(torch.randn_like(model.weight))
            model.bias.add_(1.0)
        avg.update()
        beta = min(0.8, (1 + t) / (10 + t))
        expected = beta * expected + (1 - beta) * model.weight.detach().double()
    assert avg.names == ["weight"] and avg.updates == 30
    torch.testing.assert_close(avg.shadow[0].double(), expected, rtol=1e-5, atol=1e-5)
    bias = model.bias.detach().clone()
    with avg.applied():
        torch.testing.assert_close(model.weight.detach(), avg.shadow[0])
        assert torch.equal(model.bias, bias)  # untouched: not trainable


def test_applied_restores_the_trained_weights_even_on_error() -> None:
    model = nn.Linear(4, 1)
    avg = WeightAverage(model, decay=0.5)
    with torch.no_grad():
        model.weight.mul_(3.0)
    trained = model.weight.detach().clone()
    with pytest.raises(RuntimeError), avg.applied():
        assert not torch.equal(model.weight, trained)
        raise RuntimeError("evaluation failed")
    assert torch.equal(model.weight, trained)


def test_state_dict_round_trip_and_mismatch() -> None:
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    avg_a = WeightAverage(a, 0.9)
    for _ in range(3):
        with torch.no_grad():
            a.weight.add_(1.0)
        avg_a.update()
    avg_b = WeightAverage(b, 0.9)
    avg_b.load_state_dict(avg_a.state_dict())
    assert avg_b.updates == 3 and all(torch.equal(x, y) for x, y in zip(avg_a.shadow, avg_b.shadow))
    with pytest.raises(ValueError, match="averages parameters"):
        WeightAverage(nn.Linear(2, 2, bias=False), 0.9).load_state_dict(avg_a.state_dict())


def test_decay_out_of_range_is_a_config_error(train_smoke, tmp_path) -> None:
    with pytest.raises(ConfigError, match="ema_decay"):
        train_smoke(tmp_path, "train.ema_decay=1.0")


def trainable(run_dir) -> list[str]:
    return list(checkpoint.load(run_dir / "last.pt")["average"]["shadow"])


def test_trainer_selects_and_tests_the_average(train_smoke, tmp_path) -> None:
    """One epoch: best.pt holds θ̄ (last.pt's average), not the trained θ, and the
    final metrics are θ̄'s: equal to the validation logged for that epoch."""
    result = train_smoke(tmp_path, "train.ema_decay=0.9", "train.max_epochs=1")
    last, best = (checkpoint.load(tmp_path / n) for n in ("last.pt", "best.pt"))
    names = trainable(tmp_path)
    assert names and last["average"]["updates"] == result["steps"] == 3
    for n in names:
        assert torch.equal(best["model"][n], last["average"]["shadow"][n]), n
    assert any(not torch.equal(last["model"][n], best["model"][n]) for n in names)
    assert result["metrics"]["valid"] == best["valid"]


def test_decay_zero_repeats_the_plain_run(train_smoke, tmp_path) -> None:
    """β = 0 makes θ̄ = θ after every step: the run must equal one without averaging, so the
    plumbing (swaps, copies, checkpoints) changes nothing else, RNG draws included."""
    plain = train_smoke(tmp_path / "plain", "experiment=ptb/gated_vd_20m")
    zero = train_smoke(tmp_path / "zero", "experiment=ptb/gated_vd_20m", "train.ema_decay=0.0")
    assert plain["metrics"] == zero["metrics"]
    a, b = (checkpoint.load(tmp_path / d / "best.pt")["model"] for d in ("plain", "zero"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_restores_the_average(train_smoke, tmp_path) -> None:
    whole, split = tmp_path / "whole", tmp_path / "split"
    args = ("experiment=ptb/gated_vd_20m", "train.ema_decay=0.9")
    train_smoke(whole, *args)
    train_smoke(split, *args, "train.max_steps=4")  # stops inside epoch 1
    resumed = train_smoke(split, *args, "train.resume=true")
    a, b = (checkpoint.load(d / "last.pt")["average"] for d in (whole, split))
    assert a["updates"] == b["updates"] == resumed["steps"] == 6
    assert all(torch.equal(a["shadow"][k], b["shadow"][k]) for k in a["shadow"])


def test_resume_needs_the_same_averaging(train_smoke, tmp_path) -> None:
    train_smoke(tmp_path / "plain", "train.max_epochs=1")
    with pytest.raises(ConfigError, match="without train.ema_decay"):
        train_smoke(tmp_path / "plain", "train.ema_decay=0.9", "train.resume=true")
    train_smoke(tmp_path / "averaged", "train.ema_decay=0.9", "train.max_epochs=1")
    with pytest.raises(ConfigError, match="with train.ema_decay"):
        train_smoke(tmp_path / "averaged", "train.resume=true")
