"""The brute-force random-walk kernel on graphs small enough to count by hand."""
import pytest
import torch

from knn.kernels.random_walk import Graph, local_kernel, random_walk_kernel, reference_walk, walks


def ones(v):
    return torch.ones(v, 1, dtype=torch.float64)


TRIANGLE = Graph(ones(3), [(0, 1), (1, 2), (2, 0)])
PATH3 = Graph(ones(3), [(0, 1), (1, 2)])


def test_walk_counts_by_hand():
    # Path a-b-c: 2-node walks ab ba bc cb; 3-node walks aba abc bab bcb cba cbc.
    assert len(list(walks(PATH3, 1))) == 3
    assert sorted(walks(PATH3, 2)) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    assert len(list(walks(PATH3, 3))) == 6
    assert len(list(walks(TRIANGLE, 3))) == 12  # 3 starts x 2 x 2


def test_kernel_with_unit_features_counts_walk_pairs():
    # <f, f'> = 1, so K^n = λ^{n-1} |P_n(G)| |P_n(G')|.
    assert random_walk_kernel(PATH3, TRIANGLE, 3, lam=0.5).item() == pytest.approx(0.25 * 6 * 12)


def test_reference_walk_has_one_walk():
    ref = reference_walk([torch.ones(2), torch.ones(2), torch.ones(2)])
    assert list(walks(ref, 3)) == [(0, 1, 2)]


def test_edge_weights_multiply_along_the_walk():
    g = Graph(ones(2), [(0, 1)], edge_weight={(0, 1): 2.0, (1, 0): 3.0})
    assert random_walk_kernel(g, reference_walk([torch.ones(1, dtype=torch.float64)] * 2), 2).item() == 5.0


@pytest.mark.parametrize("n", [1, 2, 3])
def test_unified_view_recursion_equals_enumeration(n):
    gen = torch.Generator().manual_seed(n)
    g = Graph(torch.randn(4, 3, dtype=torch.float64, generator=gen), [(0, 1), (1, 2), (2, 3), (3, 1)])
    h = Graph(torch.randn(3, 3, dtype=torch.float64, generator=gen), [(0, 1), (1, 2)])
    torch.testing.assert_close(local_kernel(g, h, n, 0.7), random_walk_kernel(g, h, n, 0.7))
    torch.testing.assert_close(random_walk_kernel(g, h, n, 0.7), random_walk_kernel(h, g, n, 0.7))
