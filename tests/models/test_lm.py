"""KernelLM and LSTMLM: shapes, weight tying, the two inits, state round trip."""

from __future__ import annotations

import math

import pytest
import torch

from knn.layers.string_kernel import StringKernelConfig
from knn.models import build, models_of
from knn.models.lm import KernelLM, KernelLMConfig, LSTMLM, LSTMLMConfig

V, T, B = 50, 7, 3
LEARNED = StringKernelConfig(decay="learned", decay_value=0.8)


def models() -> list[torch.nn.Module]:
    torch.manual_seed(0)
    return [
        KernelLM(KernelLMConfig(hidden=8, depth=2, dropout=0.0), V),
        KernelLM(KernelLMConfig(hidden=8, depth=2, kernel=LEARNED), V),
        LSTMLM(LSTMLMConfig(hidden=8, depth=2, dropout=0.0), V),
    ]


@pytest.mark.parametrize("model", models(), ids=["kernel", "kernel-learned", "lstm"])
def test_shapes_and_tying(model) -> None:
    ids = torch.randint(0, V, (T, B))
    logits, state = model(ids)
    assert logits.shape == (T, B, V)
    assert model.decoder.weight is model.embedding.weight
    params = list(model.parameters())
    assert sum(p is model.embedding.weight for p in params) == 1  # counted once


@pytest.mark.parametrize("model", models(), ids=["kernel", "kernel-learned", "lstm"])
def test_carried_state_equals_one_pass(model) -> None:
    """Two halves with the state carried over equal one pass over the whole."""
    model.eval()
    ids = torch.randint(0, V, (T, B))
    whole, _ = model(ids)
    first, state = model(ids[:3])
    flat = model.state_to_tensors(state)
    second, _ = model(ids[3:], model.state_from_tensors([t.clone() for t in flat]))
    torch.testing.assert_close(torch.cat([first, second]), whole)


def test_default_init() -> None:
    """Matrices ±√(3/d), vectors zero (the authors' PyTorch script), a learned λ as set."""
    model = KernelLM(KernelLMConfig(hidden=8, depth=1, kernel=LEARNED), V)
    bound = math.sqrt(3.0 / 8)
    for name, p in model.named_parameters():
        if name.endswith("decay_logit"):  # starts at the configured λ, not 0
            torch.testing.assert_close(torch.sigmoid(p), torch.full_like(p, 0.8))
        elif p.dim() > 1:
            assert p.abs().max() <= bound and p.abs().max() > 0.5 * bound, name
        else:
            assert torch.all(p == 0), name


@pytest.mark.parametrize("init", [None, "authors"])
def test_init_authors_draws_the_decay_gate_jointly(init: str | None, extent) -> None:
    """``init: authors`` draws each layer's W_λ and U_λ from ±√(3/(2d)), as the authors'
    Theano RecurrentLayer draws an (n_in + n_out, n_out) block; every other matrix, and
    both gate parts without it, from ±√(3/d)."""
    d = 64
    torch.manual_seed(0)
    model = KernelLM(KernelLMConfig(hidden=d, depth=2, init=init), V)
    gate = (3 / (2 * d)) ** 0.5 if init == "authors" else (3 / d) ** 0.5
    for layer in model.rnn.layers:  # weight rows: W^(1), W_λ, W_f (n = 1, gated, highway)
        assert 0.97 < extent(layer.weight[:d], (3 / d) ** 0.5) <= 1
        assert 0.97 < extent(layer.weight[d:2 * d], gate) <= 1
        assert 0.97 < extent(layer.weight[2 * d:], (3 / d) ** 0.5) <= 1
        assert 0.97 < extent(layer.weight_h, gate) <= 1
    assert 0.97 < extent(model.embedding.weight, (3 / d) ** 0.5) <= 1


def test_init_authors_needs_the_gated_xh_decay() -> None:
    with pytest.raises(ValueError, match="init must be null or one of"):
        KernelLMConfig(init="theano")
    for decay in ("constant", "learned", "gated_x"):
        with pytest.raises(ValueError, match="redraws the gate of decay 'gated_xh' only"):
            KernelLMConfig(kernel=StringKernelConfig(decay=decay), init="authors")


def test_untied() -> None:
    model = LSTMLM(LSTMLMConfig(hidden=8, depth=1, tie=False), V)
    assert model.decoder.weight is not model.embedding.weight


def test_bad_kernel_value_fails_at_config() -> None:
    with pytest.raises(ValueError, match="decay must be one of"):
        KernelLMConfig(kernel=StringKernelConfig(decay="gated"))


@pytest.mark.parametrize("name", sorted(models_of("lm")))
def test_state_batch_dim_is_the_column_dimension(name: str) -> None:
    """``state_batch_dim`` indexes the batch columns of ``state_to_tensors`` (checkpoints
    split the carried state across processes along it)."""
    model = build(name, V, hidden=8, depth=2)
    _, state = model(torch.randint(0, V, (T, B)))
    assert all(t.size(model.state_batch_dim) == B for t in model.state_to_tensors(state))
    _, state = model(torch.randint(0, V, (T, B + 2)))
    assert all(t.size(model.state_batch_dim) == B + 2 for t in model.state_to_tensors(state))
