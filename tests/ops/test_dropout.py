"""The CPU Bernoulli sampler draws torch's own masks, and dropout built on it is torch's dropout.

Two references: NumPy's MT19937 (the same engine, seeded as ``torch.manual_seed``
seeds torch's) with torch's documented transformation, computed here
independently; and torch's ``bernoulli_`` itself, where this torch build takes
its mt19937 path (not its MKL one, see knn/ops/dropout.py).
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from numpy.random import MT19937

from knn.models.classifier import KernelClassifier, KernelClassifierConfig
from knn.ops import dropout as D
from knn.ops import usage

CASES = [  # (seed, draws made before, elements, q)
    (0, 0, 5000, 0.65),
    (3, 17, 1, 0.8),
    (7, 2, 311, 0.5),   # ends exactly at the 624-word state boundary (2 + 311 * 2 words) ...
    (7, 3, 400, 0.5),   # ... and one value's two words on either side of it
    (9, 1, 100_000, 0.9),
    (1, 0, 0, 0.5),
    (2, 3, 313, 1.0),
    (5, 2, 1000, 0.0),
    (11, 0, 4099, 1e-7),  # longer than one pass of the sampler's chunks
]


def numpy_bernoulli(seed: int, skip_words: int, n: int, q: float) -> np.ndarray:
    """torch.manual_seed(seed), skip_words 32-bit draws, then n values of torch's bernoulli_(q).

    Per value: hi, lo = two words; u = ((hi << 32 | lo) mod 2^53) * 2^-53; value = u < q.
    """
    engine = MT19937()
    engine._legacy_seeding(seed)  # init_genrand(seed), as at::mt19937(seed)
    engine.random_raw(skip_words)
    w = engine.random_raw(2 * n).astype(np.uint64)
    v = ((w[0::2] << np.uint64(32)) | w[1::2]) & np.uint64((1 << 53) - 1)
    return (v.astype(np.float64) * 2.0**-53 < q).astype(np.float32)


def torch_takes_mt19937_path() -> bool:
    torch.manual_seed(123)
    return np.array_equal(torch.empty(256).bernoulli_(0.5).numpy(), numpy_bernoulli(123, 0, 256, 0.5))


@pytest.fixture
def sampler(require_fused):
    """The fused sampler (it is built with the CPU scan); skips or fails as ``require_fused`` decides."""
    require_fused("cpu")


def skip_words(k: int) -> None:
    """Advance torch's default generator by k 32-bit words (``random_`` on int32 draws one each)."""
    if k:
        torch.empty(k, dtype=torch.int32).random_(0, 2)


def drawn_from(seed: int, skip: int, draw):
    """``draw()`` after torch.manual_seed(seed) and ``skip`` words, and the generator state after."""
    torch.manual_seed(seed)
    skip_words(skip)
    values = draw()
    return values, torch.get_rng_state()


@pytest.mark.parametrize("seed,skip,n,q", CASES)
def test_sampler_draws_numpys_mt19937_values(sampler, seed, skip, n, q):
    torch.manual_seed(seed)
    skip_words(skip)
    got = D.bernoulli(torch.empty(0), (n,), q)
    assert got.dtype == torch.float32 and got.shape == (n,)
    np.testing.assert_array_equal(got.numpy(), numpy_bernoulli(seed, skip, n, q))


def test_skip_words_draws_one_word_per_element():
    """The helper above: NumPy's replica must see the same offset as torch's generator."""
    torch.manual_seed(4)
    skip_words(9)
    if not torch_takes_mt19937_path():
        pytest.skip("this torch build draws CPU Bernoulli values through MKL")
    torch.manual_seed(4)
    skip_words(9)
    np.testing.assert_array_equal(torch.empty(50).bernoulli_(0.3).numpy(), numpy_bernoulli(4, 9, 50, 0.3))


@pytest.mark.parametrize("seed,skip,n,q", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sampler_equals_torch_and_leaves_the_generator_where_torch_does(sampler, seed, skip, n, q, dtype):
    if not torch_takes_mt19937_path():
        pytest.skip("this torch build draws CPU Bernoulli values through MKL")
    want, want_state = drawn_from(seed, skip, lambda: torch.empty(n, dtype=dtype).bernoulli_(q))
    got, got_state = drawn_from(seed, skip, lambda: D.bernoulli(torch.empty(0, dtype=dtype), (n,), q))
    assert got.dtype == dtype
    assert torch.equal(got, want)
    assert torch.equal(got_state, want_state)


@pytest.mark.parametrize("seed,skip,n,q", [c for c in CASES if c[3] > 0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scaled_mask_is_the_mask_divided_by_q(sampler, seed, skip, n, q, dtype):
    # The one-pass mask against the sampler's mask and torch's div_ over the whole tensor.
    like = torch.empty(0, dtype=dtype)
    want, want_state = drawn_from(seed, skip, lambda: D.bernoulli(like, (n,), q).div_(q))
    got, got_state = drawn_from(seed, skip, lambda: D.scaled_mask(like, (n,), q))
    assert got.dtype == dtype
    assert torch.equal(got, want)
    assert torch.equal(got_state, want_state)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scaled_masks_kept_value_is_torchs_one_divided_by_q(sampler, dtype):
    # The kept value is computed in the dtype (csrc/bernoulli_cpu.cpp), not by div_ itself:
    # it must be div_'s value for every keep rate, including ones whose float rounds.
    for q in [1.0, 0.9, 0.8, 0.65, 0.5, 1 / 3, 0.1, 0.123456789, 1e-3, 0.999999, 0.7000001]:
        kept = D.scaled_mask(torch.empty(0, dtype=dtype), (20_000,), q).unique()
        want = torch.ones(1, dtype=dtype).div_(q)
        assert torch.equal(kept[kept != 0], want), q  # 20,000 draws keep some at q = 1e-3


def test_sampler_shape_and_usage(sampler):
    usage.reset()
    torch.manual_seed(0)
    got = D.bernoulli(torch.empty(0, dtype=torch.float64), (3, 4, 5), 0.5)
    assert got.shape == (3, 4, 5) and got.dtype == torch.float64 and got.is_contiguous()
    assert set(got.unique().tolist()) == {0.0, 1.0}
    assert usage.ops_report()["fused_bernoulli"] is True


def test_sampler_rejects_a_probability_outside_0_1(sampler):
    with pytest.raises(RuntimeError, match=r"p must be in \[0, 1\]"):
        D.bernoulli(torch.empty(0), (3,), 1.5)
    with pytest.raises(RuntimeError, match=r"q must be in \(0, 1\]"):
        D.scaled_mask(torch.empty(0), (3,), 0.0)


def test_other_dtypes_fall_back_to_torch():
    usage.reset()
    torch.manual_seed(0)
    got = D.bernoulli(torch.empty(0, dtype=torch.bfloat16), (10,), 0.5)
    assert got.dtype == torch.bfloat16
    assert usage.ops_report()["fused_bernoulli"] is False


@pytest.mark.parametrize("p", [0.0, 0.2, 0.35, 0.5, 1.0])
def test_dropout_is_torch_dropout_bit_for_bit(sampler, p):
    if not torch_takes_mt19937_path():
        pytest.skip("this torch build draws CPU Bernoulli values through MKL")
    x = torch.randn(37, 3, 50, requires_grad=True)
    g = torch.randn(37, 3, 50)
    results = []
    for fn in (F.dropout, D.dropout):
        torch.manual_seed(1)
        y = fn(x, p, True)
        (dx,) = torch.autograd.grad((y * g).sum(), x)
        results.append((y.detach(), dx))
    assert torch.equal(results[0][0], results[1][0])
    assert torch.equal(results[0][1], results[1][1])


def test_dropout_keeps_the_expected_share_and_scale(sampler):
    torch.manual_seed(0)
    y = D.dropout(torch.ones(200_000), 0.35, True)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.65) < 0.005  # 5 standard deviations is 0.0053
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.65))


def test_dropout_outside_training_and_on_strided_input_is_torch_dropout():
    x = torch.randn(6, 5)
    assert torch.equal(D.dropout(x, 0.5, False), x)
    xt = x.t()  # torch fills a strided input's mask in memory order: left to torch
    torch.manual_seed(2)
    want = F.dropout(xt, 0.5, True)
    torch.manual_seed(2)
    assert torch.equal(D.dropout(xt, 0.5, True), want)
    with pytest.raises(ValueError, match="dropout probability"):
        D.dropout(x, 1.5, True)


def test_dropout_module_matches_nn_dropout(sampler):
    if not torch_takes_mt19937_path():
        pytest.skip("this torch build draws CPU Bernoulli values through MKL")
    ours, theirs = D.Dropout(0.3), torch.nn.Dropout(0.3)
    assert repr(ours) == repr(theirs)
    x = torch.randn(8, 9)
    torch.manual_seed(3)
    want = theirs(x)
    torch.manual_seed(3)
    assert torch.equal(ours(x), want)
    ours.eval()
    assert torch.equal(ours(x), x)


def test_a_kernel_classifier_step_is_unchanged_bit_for_bit(sampler, monkeypatch):
    """Every dropout of the SST model (embeddings, between layers, variational, pooled) at once."""
    if not torch_takes_mt19937_path():
        pytest.skip("this torch build draws CPU Bernoulli values through MKL")
    cfg = KernelClassifierConfig(n_classes=5, hidden=16, depth=2)
    tokens = torch.randint(0, 30, (7, 4))
    mask = torch.ones(7, 4, dtype=torch.bool)
    mask[5:, 1] = False
    runs = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(D, "_DTYPES", ())  # every draw through torch's bernoulli_
        torch.manual_seed(0)
        model = KernelClassifier(cfg, torch.randn(30, 12))
        logits = model(tokens, mask)
        grads = torch.autograd.grad(logits.logsumexp(-1).sum(), [p for p in model.parameters() if p.requires_grad])
        runs.append((logits.detach(), grads, torch.get_rng_state()))
    assert torch.equal(runs[0][0], runs[1][0])
    assert all(torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1]))
    assert torch.equal(runs[0][2], runs[1][2])
