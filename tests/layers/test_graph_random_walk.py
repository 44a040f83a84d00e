"""Random-walk kernel layers compute the kernels of Sections 3.1-3.3 and 4 (float64)."""
import itertools

import pytest
import torch

from knn.featurize import BatchMolGraph, MolGraph
from knn.kernels.random_walk import Graph, random_walk_kernel, reference_walk
from knn.layers.random_walk import DeepRandomWalkNet, RandomWalkConfig, RandomWalkKernelLayer

D_IN, D, D_E = 3, 4, 2


def random_graph(seed, v=5, p=0.5):
    """An undirected graph with float64 node and bond features and no self-loops."""
    gen = torch.Generator().manual_seed(seed)
    pairs = [(a, b) for a, b in itertools.combinations(range(v), 2) if torch.rand(1, generator=gen) < p]
    x = torch.randn(v, D_IN, dtype=torch.float64, generator=gen)
    e = torch.randn(len(pairs), D_E, dtype=torch.float64, generator=gen)
    return MolGraph(x, torch.tensor(pairs, dtype=torch.long).reshape(-1, 2), e)


def layer(n, **kw):
    torch.manual_seed(0)
    return RandomWalkKernelLayer(D_IN, D, RandomWalkConfig(n=n, **kw)).double()


def run(lay, graphs):
    b = BatchMolGraph.from_graphs(graphs)
    return lay(b.atom_features, b, b.bond_features)[-1], b


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("lam", [0.5, 1.0])
def test_theorem_3_graph_state_is_random_walk_kernel(seed, n, lam):
    """Σ_v c_n[v][k] = K_W^n(G, L_{n,k}), L_{n,k} the walk of rows k of W^{(1)}..W^{(n)}."""
    g = random_graph(seed)
    lay = layer(n, decay_value=lam)
    c_n, b = run(lay, [g])
    h_G = b.sum_atoms(c_n)[0]
    G = Graph(g.atom_features, g.bond_index.tolist())
    W = lay.weight.detach().view(n, D, D_IN)
    for k in range(D):
        ref = reference_walk([W[j, k] for j in range(n)])
        torch.testing.assert_close(h_G[k], random_walk_kernel(G, ref, n, lam))


@pytest.mark.parametrize("seed", [0, 3])
def test_gated_layer_weights_each_walk_by_its_gates(seed):
    """Section 4: Σ_v c_n[v][k] = Σ_{walks x} Π_i λ_{x_i,x_{i+1}}[k] Π_i <w_k^{(i)}, f_{x_i}>."""
    n = 3
    g = random_graph(seed)
    lay = layer(n, decay="gated", gate_scale=2.0)
    c_n, b = run(lay, [g])
    lam = lay.edge_decay(b.atom_features, b).detach()  # (V, D_nb, d), entry [v, slot] for edge u -> v
    W = lay.weight.detach().view(n, D, D_IN)
    for k in range(D):
        weights = {
            (int(b.atom_nbrs[v, s]), v): lam[v, s, k]
            for v in range(b.num_atoms) for s in range(b.atom_nbrs.shape[1]) if b.nbr_mask[v, s]
        }
        G = Graph(g.atom_features, g.bond_index.tolist(), edge_weight=weights)
        ref = reference_walk([W[j, k] for j in range(n)])
        torch.testing.assert_close(b.sum_atoms(c_n)[0, k], random_walk_kernel(G, ref, n))


def test_bond_factor_multiplies_messages():
    """n = 2 with bonds: c_2[v] = W2 f_v ⊙ λ Σ_u W1 f_u ⊙ B e_uv, written out for a 3-node path."""
    g = MolGraph(
        torch.randn(3, D_IN, dtype=torch.float64), torch.tensor([[0, 1], [1, 2]]),
        torch.randn(2, D_E, dtype=torch.float64),
    )
    lay = layer(2, bond_dim=D_E, decay_value=0.3)
    c_2, _ = run(lay, [g])
    W1, W2 = lay.weight.detach().view(2, D, D_IN)
    B = lay.bond_weight.detach()
    f, e = g.atom_features, g.bond_features
    expected_1 = W2 @ f[1] * 0.3 * ((W1 @ f[0]) * (B @ e[0]) + (W1 @ f[2]) * (B @ e[1]))
    torch.testing.assert_close(c_2[1], expected_1)
    torch.testing.assert_close(c_2[0], W2 @ f[0] * 0.3 * (W1 @ f[1]) * (B @ e[0]))


def test_generalized_aggregation_closed_forms():
    g = random_graph(4)
    b = BatchMolGraph.from_graphs([g])
    f = b.atom_features
    # identity σ with ⊙ is Eq. rw_nn; additive with tanh written out for n = 2
    add = layer(2, mapping="additive", activation="tanh", decay_value=0.5)
    W1, W2 = add.weight.detach().view(2, D, D_IN)
    c_2 = add(f, b)[-1]
    expected = f @ W2.t() + 0.5 * b.sum_neighbors(torch.tanh(f @ W1.t()))
    torch.testing.assert_close(c_2, expected)
    # λ = 0: the additive layer is the per-node map W^{(n)} f_v, the multiplicative one is 0
    zero_add = layer(3, mapping="additive", decay_value=0.0)
    torch.testing.assert_close(zero_add(f, b)[-1], f @ zero_add.weight.detach().view(3, D, D_IN)[2].t())
    assert not layer(3, decay_value=0.0)(f, b)[-1].any()


@pytest.mark.parametrize("kw", [{}, {"decay": "gated", "bond_dim": D_E}, {"mapping": "additive", "activation": "relu"}])
def test_permutation_and_batch_invariance(kw):
    lay = layer(3, **kw)
    graphs = [random_graph(s, v=4 + s) for s in range(3)]
    c, b = run(lay, graphs)
    together = b.sum_atoms(c)
    for i, g in enumerate(graphs):
        c1, b1 = run(lay, [g])
        torch.testing.assert_close(together[i], b1.sum_atoms(c1)[0])
        perm = torch.randperm(g.num_atoms, generator=torch.Generator().manual_seed(i))
        cp, bp = run(lay, [g.permute_atoms(perm)])
        torch.testing.assert_close(bp.sum_atoms(cp)[0], together[i])
        torch.testing.assert_close(cp, c1[perm])  # node states move with their nodes


def test_deep_net_one_layer_identity_readout():
    """L = 1, U = I, identity σ: h_G = Σ_v c_n[v] of the single layer."""
    torch.manual_seed(0)
    net = DeepRandomWalkNet(D_IN, D, 1, RandomWalkConfig(n=2), out_activation="identity").double()
    with torch.no_grad():
        net.U[0].weight.copy_(torch.eye(D))
    g = random_graph(5)
    b = BatchMolGraph.from_graphs([g])
    h_G, hs = net(b.atom_features, b)
    torch.testing.assert_close(h_G, b.sum_atoms(net.layers[0](b.atom_features, b)[-1]))
    deep = DeepRandomWalkNet(D_IN, D, 3, RandomWalkConfig(n=2, activation="tanh")).double()
    h_G, hs = deep(b.atom_features, b)
    assert h_G.shape == (1, D) and len(hs) == 3 and all(h.shape == (5, D) for h in hs)


def test_config_validation():
    with pytest.raises(ValueError, match="mapping"):
        RandomWalkConfig(mapping="max")
    with pytest.raises(ValueError, match="bond features"):
        lay = layer(2, bond_dim=D_E)
        b = BatchMolGraph.from_graphs([random_graph(0)])
        lay(b.atom_features, b)
