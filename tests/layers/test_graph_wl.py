"""The Weisfeiler-Lehman kernel network (Section 3.4) on hand-checked graphs (float64)."""
import pytest
import torch

from knn.featurize import BatchMolGraph, MolGraph
from knn.layers.wl import WLConfig, WLKernelNet
from knn.models import count_params

D_IN, D_E, H = 3, 2, 8


def net(**kw):
    torch.manual_seed(0)
    return WLKernelNet(D_IN, D_E, WLConfig(hidden=H, **kw)).double()


def uniform_graph(edges, v):
    """All nodes carry one feature vector and all bonds another (a single WL colour to start)."""
    gen = torch.Generator().manual_seed(42)
    x, e = torch.rand(1, D_IN, dtype=torch.float64, generator=gen), torch.rand(1, D_E, dtype=torch.float64, generator=gen)
    return MolGraph(x.repeat(v, 1), torch.tensor(edges).reshape(-1, 2), e.repeat(len(edges), 1))


def random_graph(seed, v=6):
    gen = torch.Generator().manual_seed(seed)
    edges = [(i, i + 1) for i in range(v - 1)] + [(0, v - 1), (1, v - 2)]
    return MolGraph(
        torch.randn(v, D_IN, dtype=torch.float64, generator=gen), torch.tensor(edges),
        torch.randn(len(edges), D_E, dtype=torch.float64, generator=gen),
    )


def encode(model, graphs):
    return model(BatchMolGraph.from_graphs(graphs))


@pytest.mark.parametrize("gated", [False, True])
def test_path_graph_labels_follow_wl_colours(gated):
    """Path 0-1-2-3, one initial colour a. WL colours by hand:
    iteration 0: a a a a;  1: b c c b  (ends see {a}, middles {a, a});  2: d e e d  (ends (b,{c}),
    middles (c,{b,c})). Nodes of equal colour get equal WLN labels h^{(l)}; the ends and the
    middles, of different colour from iteration 1 on, get different labels."""
    _, labels = encode(net(depth=3, gated=gated), [uniform_graph([(0, 1), (1, 2), (2, 3)], 4)])
    assert len(labels) == 3  # h^{(0)}, h^{(1)}, h^{(2)}
    torch.testing.assert_close(labels[0], labels[0][:1].expand(4, H))  # a a a a
    for h in labels[1:]:
        torch.testing.assert_close(h[0], h[3])
        torch.testing.assert_close(h[1], h[2])
        assert (h[0] - h[1]).abs().max() > 1e-6


@pytest.mark.parametrize("gated", [False, True])
def test_hexagon_and_two_triangles_are_wl_equivalent(gated):
    """In C6 and in two disjoint triangles every node has colour a and neighbours {a, a} at every
    iteration, so the WL test (and any WL kernel) cannot tell them apart: equal h_G. A 6-path,
    whose ends have one neighbour, has another colour histogram and another h_G."""
    model = net(depth=4, gated=gated, readout="sum")
    hexagon = uniform_graph([(i, (i + 1) % 6) for i in range(6)], 6)
    triangles = uniform_graph([(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)], 6)
    path = uniform_graph([(i, i + 1) for i in range(5)], 6)
    h_G, _ = encode(model, [hexagon, triangles, path])
    torch.testing.assert_close(h_G[0], h_G[1])
    assert (h_G[0] - h_G[2]).abs().max() > 1e-6


def test_one_iteration_written_out():
    """depth 1: h_G = Σ_v W2 h_v ⊙ Σ_{u∈N(v)} W1 h_u ⊙ B e_uv, h = relu(W0 f), on a 3-node path."""
    model = net(depth=1)
    g = random_graph(1, v=3)
    g = MolGraph(g.atom_features, torch.tensor([[0, 1], [1, 2]]), g.bond_features[:2])
    h_G, _ = encode(model, [g])
    k = model.kernels[0]
    W1, W2 = k.weight.detach().view(2, H, H)
    B = k.bond_weight.detach()
    h = torch.relu(g.atom_features @ model.embed.weight.detach().t())
    m = lambda u, b: (W1 @ h[u]) * (B @ g.bond_features[b])  # noqa: E731
    expected = W2 @ h[0] * m(1, 0) + W2 @ h[1] * (m(0, 0) + m(2, 1)) + W2 @ h[2] * m(1, 1)
    torch.testing.assert_close(h_G[0], expected)


def test_sum_readout_is_the_sum_of_last_readouts():
    graphs = [random_graph(s) for s in range(2)]
    total, _ = encode(net(depth=3, readout="sum"), graphs)
    parts = [encode(net(depth=l), graphs)[0] for l in (1, 2, 3)]  # same seed: same shared weights
    torch.testing.assert_close(total, sum(parts))


def test_unshared_kernels_add_parameters():
    per_kernel = count_params(net().kernels[0])
    assert count_params(net(share_kernel=False)) - count_params(net()) == 3 * per_kernel
    assert len(net(share_kernel=False, depth=4).kernels) == 4


@pytest.mark.parametrize("kw", [{}, {"gated": True, "readout": "sum"}, {"share_kernel": False}])
def test_batch_and_permutation_invariance(kw):
    model = net(**kw)
    graphs = [random_graph(s, v=5 + s) for s in range(3)]
    together, _ = encode(model, graphs)
    for i, g in enumerate(graphs):
        torch.testing.assert_close(encode(model, [g])[0][0], together[i])
        perm = torch.randperm(g.num_atoms, generator=torch.Generator().manual_seed(i))
        torch.testing.assert_close(encode(model, [g.permute_atoms(perm)])[0][0], together[i])


def test_config_validation():
    with pytest.raises(ValueError, match="readout"):
        WLConfig(hidden=H, readout="mean")
    with pytest.raises(TypeError, match="hidden"):
        WLConfig()  # no preset of its own: the models' presets size it
