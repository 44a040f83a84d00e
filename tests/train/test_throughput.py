"""knn.train.throughput: counted FLOPs match the model's products; the peak and profile are reported."""
import pytest

from knn.train import throughput


@pytest.fixture
def fast_peak(monkeypatch):
    """A small peak product: the tests check bookkeeping, not the machine's rate."""
    real = throughput.gemm_peak_gflops
    monkeypatch.setattr(throughput, "gemm_peak_gflops", lambda device: real(device, n=64, reps=2))


@pytest.mark.parametrize("depth", [1, 2])
def test_flops_per_token_are_every_product_of_the_kernel_lm(fake_ptb, fast_peak, depth):
    d, V = 16, len(fake_ptb.vocab)
    result = throughput.measure(
        ["experiment=ptb/gated_5m", "debug=smoke", "device=cpu", "threads=1", f"model.depth={depth}"],
        steps=2, warmup=1, profile_steps=2,
    )
    # Forward + backward (3 products each) of: the tied decoder d -> V; per layer the one
    # input projection d -> 3d (W^(1), W_λ, W_f) and the per-step gate U h[t-1], d -> d.
    # Missing any of them (e.g. a product FlopCounterMode cannot see) changes the count.
    assert result["flops_per_token"] == 6 * d * V + depth * (6 * d * 3 * d + 6 * d * d)
    assert result["tokens_per_step"] == 4 * 8  # batch_size x bptt of debug=smoke
    assert set(result["gemm_gflops_by_library"]) == {"aten", "knn"}
    assert result["gemm_peak_gflops"] == max(result["gemm_gflops_by_library"].values())
    # achieved_gflops is rounded to 0.1 and fraction_of_peak to 0.001 before they are compared.
    tolerance = 0.05 / result["gemm_peak_gflops"] + 5e-4
    assert result["fraction_of_peak"] == pytest.approx(result["achieved_gflops"] / result["gemm_peak_gflops"], abs=tolerance)
    ops = result["profile"]["self_time_by_op"]
    # Rounded to 0.01 ms and 0.001: an op of the tiny model may show 0, never less.
    assert ops and ops[0]["share"] > 0 and all(o["ms_per_step"] >= 0 for o in ops)
    assert 0 < sum(o["share"] for o in ops) <= 1 + 1e-3 * len(ops)
    assert [o["share"] for o in ops] == sorted((o["share"] for o in ops), reverse=True)
