"""Tests for knn.models.classifier: parameter counts, padding invariance, fixed vectors."""

from __future__ import annotations

import pytest
import torch

from dataclasses import replace

from knn.layers.string_kernel import StringKernelConfig
from knn.models import count_params, spec_of
from knn.models.classifier import (BiLSTMConfig, KernelClassifierConfig, KimCNNConfig, last_real,
                                   masked_mean, reverse_padded)

V, D_IN = 50, 300


def _kernel(**changes) -> StringKernelConfig:
    """The SST model's default layer config with ``changes``."""
    return replace(KernelClassifierConfig().kernel, **changes)


def build_classifier(cfg, vectors: torch.Tensor) -> torch.nn.Module:
    return spec_of(cfg.name).cls(cfg, vectors)


def vectors(dtype: torch.dtype = torch.float32, d: int = D_IN) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    v = torch.randn(V, d, generator=g, dtype=dtype)
    return v / v.norm(dim=1, keepdim=True)


@pytest.mark.parametrize(
    "cfg, count",
    [
        # The authors' README: "3-layer network with around 540k parameters".
        # Layer 1: W1, W2, W_λ (3·300·200) + U_λ (200·200) + b_λ = 220,200;
        # layers 2-3: 3·200·200 + 200·200 + 200 = 160,200; softmax 600·C, no bias.
        (KernelClassifierConfig(), 543_600),
        (KernelClassifierConfig(n_classes=2), 541_800),
        (KernelClassifierConfig(kernel=_kernel(decay="constant")), 283_000),  # Table 2, λ = 0.5
        (KernelClassifierConfig(kernel=_kernel(highway=True)), 624_000),  # + W_f, b_f on layers 2-3
        (KimCNNConfig(), 300 * 100 * 12 + 300 + 300 * 5 + 5),
        (BiLSTMConfig(), 2 * (4 * 150 * (300 + 150) + 8 * 150) + 300 * 5 + 5),
        # Tai et al.'s code: one LSTM both ways, and the V x d vectors trained
        (BiLSTMConfig(pooling="last", tied=True, finetune_embeddings=True),
         4 * 150 * (300 + 150) + 8 * 150 + 300 * 5 + 5 + V * D_IN),
    ],
)
def test_trainable_parameter_counts(cfg, count):
    model = build_classifier(cfg, vectors())
    assert count_params(model) == count
    assert "embedding.weight" in model.state_dict()  # fixed table travels with checkpoints


CONFIGS = [
    KernelClassifierConfig(hidden=8, n_classes=3),
    KernelClassifierConfig(hidden=8, n_classes=3, kernel=_kernel(decay="constant"), pooling="last"),
    KernelClassifierConfig(hidden=8, n_classes=3, kernel=_kernel(highway=True, activation="tanh")),
    KimCNNConfig(hidden=4, n_classes=3),
    BiLSTMConfig(hidden=6, n_classes=3),
    BiLSTMConfig(hidden=6, depth=2, n_classes=3, pooling="last"),
    BiLSTMConfig(hidden=6, n_classes=3, pooling="last"),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.name}-{getattr(c, 'pooling', '')}")
def test_padding_does_not_change_a_sentences_logits(cfg):
    torch.manual_seed(0)
    model = build_classifier(cfg, vectors(torch.float64, d=12)).double().eval()
    lengths = [5, 1, 3, 2]  # one shorter than the smallest CNN width
    T = max(lengths) + 2  # extra padding for every sentence
    g = torch.Generator().manual_seed(1)
    # Padding slots hold real word ids, so only the mask can hide them.
    tokens = torch.randint(1, V, (T, len(lengths)), generator=g)
    mask = torch.arange(T).unsqueeze(1) < torch.tensor(lengths).unsqueeze(0)
    with torch.no_grad():
        batch = model(tokens, mask)
        assert batch.shape == (len(lengths), 3) and batch.dtype == torch.float64
        for b, n in enumerate(lengths):
            single = model(tokens[:n, b : b + 1], torch.ones(n, 1, dtype=torch.bool))
            torch.testing.assert_close(batch[b : b + 1], single, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("cfg", CONFIGS[:1] + CONFIGS[3:5], ids=lambda c: c.name)
def test_training_step_leaves_vectors_fixed(cfg):
    torch.manual_seed(0)
    model = build_classifier(cfg, vectors(d=12)).train()
    before = model.embedding.weight.clone()
    tokens = torch.randint(1, V, (4, 3))
    mask = torch.ones(4, 3, dtype=torch.bool)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(model(tokens, mask), torch.tensor([0, 1, 2]))
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    opt.step()
    assert torch.equal(model.embedding.weight, before)


def test_pooling_helpers():
    h = torch.arange(12.0).view(3, 2, 2)  # (T=3, B=2, d=2)
    mask = torch.tensor([[True, True], [True, False], [True, False]])
    torch.testing.assert_close(masked_mean(h, mask), torch.tensor([[4.0, 5.0], [2.0, 3.0]]))
    torch.testing.assert_close(last_real(h, mask), torch.tensor([[8.0, 9.0], [2.0, 3.0]]))


def test_configs_reject_bad_values():
    with pytest.raises(ValueError, match="pooling"):
        KernelClassifierConfig(pooling="max")
    with pytest.raises(ValueError, match="decay"):
        KernelClassifierConfig(kernel=_kernel(decay="sometimes"))
    with pytest.raises(ValueError, match="init must be null or one of"):
        KernelClassifierConfig(init="xavier")
    with pytest.raises(ValueError, match="unknown model 'resnet'"):
        build_classifier(KimCNNConfig(name="resnet"), vectors())


def test_highway_only_above_the_first_layer():
    cfg = KernelClassifierConfig(kernel=_kernel(highway=True))
    assert [cfg.layer_kernel(l).highway for l in range(3)] == [False, True, True]


def test_reverse_padded_reverses_each_sentence_and_keeps_padding():
    x = torch.arange(8.0).view(4, 2, 1)  # column 0: 0 2 4 6 (length 4); column 1: 1 3 (length 2)
    mask = torch.tensor([[True, True], [True, True], [True, False], [True, False]])
    assert reverse_padded(x, mask).squeeze(-1).T.tolist() == [[6, 4, 2, 0], [3, 1, 5, 7]]


def test_tied_bilstm_reads_each_sentence_both_ways_with_one_lstm():
    """z = [h_fwd(last token); h_fwd of the reversed sentence (last token)], the same LSTM, each
    sentence computed alone, without padding: Tai et al.'s LSTMSentiment with structure bilstm."""
    torch.manual_seed(0)
    cfg = BiLSTMConfig(n_classes=3, hidden=6, pooling="last", tied=True, input_dropout=0.0)
    model = build_classifier(cfg, vectors(d=8)).eval()
    tokens = torch.tensor([[3, 7], [4, 9], [5, 0]])  # lengths 3 and 2
    mask = tokens > 0
    logits = model(tokens, mask)
    for b, length in enumerate((3, 2)):
        x = model.embedding(tokens[:length, b]).unsqueeze(1)  # (L, 1, d)
        _, (h_fwd, _) = model.rnn(x)
        _, (h_bwd, _) = model.rnn(x.flip(0))
        z = torch.cat([h_fwd[-1], h_bwd[-1]], dim=-1)
        torch.testing.assert_close(logits[b], model.out(z)[0])
    assert not isinstance(model.embedding, torch.nn.Embedding)  # fixed unless fine-tuned
    with pytest.raises(ValueError, match="pooling='last'"):
        BiLSTMConfig(tied=True, pooling="mean")


def test_finetuned_vectors_are_trained_and_input_dropout_is_its_own():
    cfg = BiLSTMConfig(n_classes=2, hidden=4, pooling="last", finetune_embeddings=True,
                       input_dropout=0.0)
    table = vectors(d=8)
    model = build_classifier(cfg, table)
    assert model.embedding.weight.requires_grad and model.drop_input.p == 0.0
    assert model.drop.p == 0.5
    assert build_classifier(BiLSTMConfig(), vectors()).drop_input.p == 0.5  # None: dropout
    tokens = torch.tensor([[1, 2], [3, 0]])
    model(tokens, tokens > 0).sum().backward()
    assert model.embedding.weight.grad[[1, 2, 3]].abs().sum() > 0
    assert torch.equal(table, vectors(d=8))  # the caller's table is copied, not trained


def test_authors_init_draws_the_gate_jointly_and_the_output_from_its_fan_in(extent) -> None:
    """``init: authors`` redraws W_λ, U_λ from ±√(3/(d_in + d)) and the output W from
    ±√(3/(depth·d)), as the authors' nn/initialization.py; the kernel's W^(1), W^(2) keep
    ±√(3/d_in). Without it, W_λ has its own fan-in's bound and the output torch's ±1/√(depth·d)."""
    d = 200
    ours, theirs = (build_classifier(KernelClassifierConfig(init=init), vectors())
                    for init in (None, "authors"))
    joint = (3 / (D_IN + d)) ** 0.5
    for model, gate_x, gate_h, out in ((ours, (3 / D_IN) ** 0.5, (3 / d) ** 0.5, (1 / 600) ** 0.5),
                                       (theirs, joint, joint, (3 / 600) ** 0.5)):
        first = model.layers[0]
        assert 0.98 < extent(first.weight[:2 * d], (3 / D_IN) ** 0.5) <= 1  # W^(1), W^(2)
        assert 0.98 < extent(first.weight[2 * d:3 * d], gate_x) <= 1     # W_λ
        assert 0.98 < extent(first.weight_h, gate_h) <= 1                # U_λ
        assert 0.95 < extent(model.out.weight, out) <= 1
    upper = theirs.layers[1]  # d_in = d: the joint bound is √(3/2d)
    assert 0.98 < extent(upper.weight_h, (3 / (2 * d)) ** 0.5) <= 1
    constant = build_classifier(KernelClassifierConfig(kernel=_kernel(decay="constant"), init="authors"),
                                vectors())
    assert 0.95 < extent(constant.out.weight, (3 / 600) ** 0.5) <= 1  # no gate: only the output
    with pytest.raises(ValueError, match="needs decay 'gated_xh'"):
        constant.layers[0].init_gate_jointly()
