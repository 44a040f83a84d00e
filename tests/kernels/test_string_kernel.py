"""The enumerated string kernel agrees with its own feature map."""
import torch

from knn.kernels.string_kernel import chain_weight, kernel, phi


def test_kernel_is_inner_product_of_feature_maps():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, dtype=torch.float64, generator=g)
    y = torch.randn(4, 3, dtype=torch.float64, generator=g)
    for n in (1, 2, 3):
        for lam in (0.0, 0.3, 1.0):
            direct = kernel(x, y, n, lam)
            via_phi = (phi(x, n, lam) * phi(y, n, lam)).sum()
            torch.testing.assert_close(direct, via_phi)


def test_bigram_kernel_counts_shared_subsequences_of_one_hot_strings():
    # "abc" vs "ac": shared non-contiguous bigram (a, c), once; λ = 1 counts it.
    eye = torch.eye(3, dtype=torch.float64)
    abc, ac = eye[[0, 1, 2]], eye[[0, 2]]
    assert kernel(abc, ac, 2, 1.0).item() == 1.0
    # With decay λ the gap in "abc" costs λ^{|x|-i-1} = λ^{3-1-1} for (a, c), and λ^0 for "ac".
    assert abs(kernel(abc, ac, 2, 0.5).item() - 0.5) < 1e-12


def test_chain_weight_reduces_to_theorem_1_weight_for_constant_decay():
    lam = torch.full((6,), 0.7, dtype=torch.float64)
    ones = torch.ones_like(lam)
    for idx in [(1, 3, 4), (2, 5, 6), (4, 5, 6)]:
        expected = 0.7 ** (6 - idx[0] - 3 + 1)
        assert abs(chain_weight(idx, 6, lam, ones).item() - expected) < 1e-12
