"""Learning-rate schedules match the authors' loop; the fused Adam is Adam."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from knn.train.optim import (EpochSchedule, FusedAdam, Optimizers, build_optimizer, fused_update,
                             lr_at)


def test_decay_after_matches_authors_loop() -> None:
    # Authors: before epoch e (0-based), `if e >= lr_decay_epoch: lr *= lr_decay`.
    lr, expected = 1.0, []
    for epoch in range(15):
        if epoch >= 10:
            lr *= 0.9
        expected.append(lr)
    got = [lr_at(e, 1.0, "decay_after", 0.9, 10) for e in range(15)]
    assert got == pytest.approx(expected)


def test_constant_and_exponential() -> None:
    assert lr_at(7, 0.1, "constant", 0.5, 0) == 0.1
    assert lr_at(3, 1e-3, "exponential", 0.9, 0) == pytest.approx(1e-3 * 0.9**3)
    with pytest.raises(ValueError, match="schedule"):
        lr_at(0, 1.0, "cosine", 0.9, 0)


def _trained(fused: bool | None, steps: int = 100) -> torch.Tensor:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 3))
    x, y = torch.randn(64, 12), torch.randint(0, 3, (64,))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-3, fused=fused)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_fused_adam_is_adam_up_to_rounding() -> None:
    """The fused kernel build_optimizer picks computes the default Adam's update (within float
    rounding over 100 steps), and actually moves the parameters."""
    default, fused = _trained(None), _trained(True)
    assert not torch.equal(default, _trained(None, steps=0))
    torch.testing.assert_close(fused, default, rtol=1e-5, atol=1e-5)


def test_lean_fused_adam_is_torchs_fused_adam_bit_for_bit(monkeypatch) -> None:
    """FusedAdam's own step (every step after the first) gives torch's fused update bit for
    bit: with the learning rate changed between steps, a parameter without a gradient, and
    its state saved and loaded into a new optimizer midway."""
    def models():
        torch.manual_seed(0)
        a = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 3), nn.Linear(3, 3))
        return a, copy.deepcopy(a)
    x, y = torch.randn(64, 12), torch.randint(0, 3, (64,))
    theirs, ours = models()
    ref = torch.optim.Adam(theirs.parameters(), lr=1e-2, weight_decay=1e-3, fused=True)
    opt = FusedAdam(ours.parameters(), lr=1e-2, weight_decay=1e-3)
    fallbacks = []  # every call of torch's step: the reference's, and FusedAdam's fallbacks
    real_step = torch.optim.Adam.step
    monkeypatch.setattr(torch.optim.Adam, "step", lambda self, closure=None: (
        fallbacks.append(self), real_step(self, closure))[1])
    for step in range(12):
        for model, o in ((theirs, ref), (ours, opt)):
            for group in o.param_groups:
                group["lr"] = 1e-2 * 0.9 ** step
            o.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model[:3](x), y).backward()  # model[3] gets no grad
            o.step()
        if step == 5:
            state = opt.state_dict()
            opt = FusedAdam(ours.parameters(), lr=1.0, weight_decay=1e-3)
            opt.load_state_dict(state)
    for a, b in zip(theirs.parameters(), ours.parameters()):
        assert torch.equal(a, b)
    assert not torch.equal(theirs[0].weight, models()[0][0].weight)  # it trained
    # torch's step ran for the reference every time, for FusedAdam only on the very first
    # step (it creates the state; the reloaded optimizer has it)
    assert sum(o is ref for o in fallbacks) == 12
    assert sum(isinstance(o, FusedAdam) for o in fallbacks) == 1 and opt not in fallbacks


def test_fused_adam_runs_each_step_hook_once() -> None:
    torch.optim.Adam(nn.Linear(2, 2).parameters())  # torch then wraps Adam's step with hooks too
    model = nn.Linear(4, 2)
    opt = FusedAdam(model.parameters(), lr=1e-2)
    pre, post = [], []
    opt.register_step_pre_hook(lambda *args: pre.append(1))
    opt.register_step_post_hook(lambda *args: post.append(1))
    for _ in range(3):  # the first step is torch's (it creates the state), then FusedAdam's
        opt.zero_grad()
        model(torch.randn(3, 4)).sum().backward()
        opt.step()
    assert len(pre) == len(post) == 3


def test_build_optimizer_fuses_adam_on_float_parameters() -> None:
    cfg = SimpleNamespace(optimizer="adam", lr=1e-3, weight_decay=0.0, momentum=0.0,
                          embedding_lr=None)
    opt = build_optimizer(nn.Linear(4, 2), cfg)
    assert opt.defaults["fused"] is True
    assert not fused_update([torch.zeros(2, dtype=torch.float16, device="meta")])


def test_sst_smoke_metrics_unchanged_by_fused_adam(compose_cfg, tmp_path, sst_fixture_mirror,
                                                    monkeypatch) -> None:
    """The fused optimizer's speed-up changes no result beyond rounding: an SST smoke run with the fused
    Adam and one with the per-parameter Adam give the same losses and metrics (rel. 1e-4)."""
    from knn.train import optim, train

    def smoke(name: str) -> dict:
        args = ["experiment=sst/gated_fine", "debug=smoke", "device=cpu", "threads=1", "seed=0",
                "task.phrases=false", f"task.data.mirror={sst_fixture_mirror}",
                f"task.data.cache_dir={tmp_path}", f"run_dir={tmp_path / name}"]
        return train(compose_cfg(args), overrides=args)

    fused = smoke("fused")
    monkeypatch.setattr(optim, "fused_update", lambda params: False)
    default = smoke("default")
    assert fused["steps"] == default["steps"] > 0
    assert fused["health"]["train_loss"] == pytest.approx(default["health"]["train_loss"], rel=1e-4)
    for split in ("valid", "test"):
        assert fused["metrics"][split] == pytest.approx(default["metrics"][split], rel=1e-4)


def _cfg(**kw) -> SimpleNamespace:
    base = dict(optimizer="adagrad", lr=0.05, momentum=0.0, rho=0.95, weight_decay=1e-4,
                embedding_lr=None, schedule="exponential", lr_decay=0.5, lr_decay_epoch=0)
    return SimpleNamespace(**{**base, **kw})


class _Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(5, 3)
        self.out = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.embedding(x))


def test_adadelta_and_adagrad_are_torchs_with_the_papers_settings() -> None:
    delta = build_optimizer(nn.Linear(4, 2), _cfg(optimizer="adadelta", lr=1.0))
    assert isinstance(delta, torch.optim.Adadelta)
    assert (delta.defaults["rho"], delta.defaults["eps"]) == (0.95, 1e-6)  # Kim (2014)
    grad = build_optimizer(nn.Linear(4, 2), _cfg())
    assert isinstance(grad, torch.optim.Adagrad) and grad.defaults["eps"] == 1e-10  # Torch7's
    with pytest.raises(ValueError, match="adadelta, adagrad"):
        build_optimizer(nn.Linear(4, 2), _cfg(optimizer="rmsprop"))


def test_embeddings_by_plain_sgd_the_rest_by_the_optimizer() -> None:
    """Tai et al. (2015): Adagrad with L2 on the network, plain SGD (no L2) on the vectors."""
    torch.manual_seed(0)
    model = _Tagger()
    opt = build_optimizer(model, _cfg(embedding_lr=0.1))
    assert isinstance(opt, Optimizers)
    adagrad, sgd = opt.optimizers
    [[vectors]] = [g["params"] for g in sgd.param_groups]
    assert vectors is model.embedding.weight
    assert all(p is not vectors for g in adagrad.param_groups for p in g["params"])
    before = model.embedding.weight.detach().clone()
    x = torch.tensor([0, 1, 1])
    opt.zero_grad()
    model(x).sum().backward()
    grad = model.embedding.weight.grad.clone()
    opt.step()
    torch.testing.assert_close(model.embedding.weight.detach(), before - 0.1 * grad)
    # the schedule scales each group from its own rate; a checkpoint restores both states
    schedule = EpochSchedule(opt, _cfg(embedding_lr=0.1))
    schedule.set_epoch(2)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.05 * 0.25, 0.1 * 0.25])
    again = build_optimizer(model, _cfg(embedding_lr=0.1))
    again.load_state_dict(opt.state_dict())
    assert torch.equal(again.optimizers[0].state_dict()["state"][0]["sum"],
                       adagrad.state_dict()["state"][0]["sum"])
    with pytest.raises(ValueError, match="trains no input embeddings"):
        build_optimizer(nn.Linear(4, 2), _cfg(embedding_lr=0.1))
