"""Baselines of Table 3, checked against written-out equations and hand-made graphs."""
import numpy as np
import torch

from knn.featurize import BatchMolGraph, MolFeaturizer, MolGraph
from knn.models import count_params
from knn.models.graph_baselines import (
    LoopyBPConfig,
    LoopyBPRegressor,
    MeanFieldConfig,
    MeanFieldRegressor,
    MeanPredictor,
    NFPConfig,
    NFPRegressor,
    WLSubtreeConfig,
    WLSubtreeRidge,
    directed_edges,
    wl_labels,
)

F = MolFeaturizer.preset("authors")
DIMS = {"atom_dim": F.atom_dim, "bond_dim": F.bond_dim}  # the featurizer's sizes, 82 and 6
SMILES = ["CCO", "c1ccccc1", "c1ccncc1", "c1ccc([se]1)-c1cc2ccccc2cn1", "C1C=CC=C1C1=Cc2ccccc2[SiH2]1", "CC(C)(C)O"]


def batch(smiles, dtype=torch.float64):
    return BatchMolGraph.from_graphs([F(s) for s in smiles]).to("cpu", dtype)


def test_directed_edges_of_ethanol():
    b = batch(["CCO"])  # bonds b0 = C0-C1, b1 = C1-O2; edge b: begin -> end, edge b + 2: end -> begin
    src, rev, in_edges = directed_edges(b)
    assert src.tolist() == [0, 1, 1, 2] and rev.tolist() == [2, 3, 0, 1]
    # into C0: from C1 over b0 (edge 2); into C1: C0 over b0 (edge 0), O2 over b1 (edge 3); into O2: edge 1
    assert in_edges.tolist() == [[2, 4], [0, 3], [1, 4]]


def test_loopy_bp_messages_equal_a_plain_loop():
    torch.manual_seed(0)
    model = LoopyBPRegressor(LoopyBPConfig(**DIMS, hidden=8, depth=4)).double()
    b = batch(["c1ccc([se]1)-c1cc2ccccc2cn1", "CC(C)(C)O"])
    m, _ = model.messages(b)
    edges = b.bond_index.tolist() + [[v, u] for u, v in b.bond_index.tolist()]
    E = b.num_bonds
    feats = [torch.cat([b.atom_features[u], b.bond_features[d % E]]) for d, (u, v) in enumerate(edges)]
    x = [model.W_in(f) for f in feats]
    ref = [torch.relu(t) for t in x]
    for _ in range(3):
        new = []
        for d, (u, v) in enumerate(edges):
            into_u = [ref[k] for k, (w, t) in enumerate(edges) if t == u and w != v]
            s = torch.stack(into_u).sum(0) if into_u else torch.zeros(8, dtype=torch.float64)
            new.append(torch.relu(x[d] + model.W_bp(s)))
        ref = new
    torch.testing.assert_close(m, torch.stack(ref))


def test_mean_field_two_iterations_written_out():
    torch.manual_seed(0)
    model = MeanFieldRegressor(MeanFieldConfig(**DIMS, hidden=8, depth=2)).double()
    b = batch(["CCO"])
    f, e = b.atom_features, b.bond_features
    x = model.W_1(f) + model.W_3(torch.stack([e[0], e[0] + e[1], e[1]]))
    mu1 = torch.relu(x)
    mu2 = torch.relu(x + model.W_2(torch.stack([mu1[1], mu1[0] + mu1[2], mu1[1]])))
    torch.testing.assert_close(model(b), model.head(mu2.sum(0, keepdim=True)))


def test_nfp_fingerprint_rows_sum_to_depth_times_atoms():
    torch.manual_seed(0)
    model = NFPRegressor(NFPConfig(**DIMS, hidden=8, depth=4)).double().eval()
    b = batch(SMILES)
    sizes = torch.tensor([F(s).num_atoms for s in SMILES], dtype=torch.float64)
    torch.testing.assert_close(model.fingerprint(b).sum(1), 4 * sizes)


def test_nfp_batch_norm_uses_running_statistics_in_eval():
    torch.manual_seed(0)
    model = NFPRegressor(NFPConfig(**DIMS, hidden=8)).double()
    b = batch(SMILES)
    model.train()
    model(b)  # updates running statistics
    model.eval()
    one = model(batch(SMILES[:1]))
    torch.testing.assert_close(one, model(b)[:1])


def test_mean_predictor():
    model = MeanPredictor().fit([1.0, 2.0, 6.0])
    assert model(batch(SMILES)).tolist() == [3.0] * len(SMILES)
    assert count_params(model) == 1


def uniform(edges, v):
    return MolGraph(torch.ones(v, 2), torch.tensor(edges).reshape(-1, 2), torch.ones(len(edges), 1))


def test_wl_labels_on_a_path_by_hand():
    """Path 0-1-2-3: colours a a a a / b c c b / d e e d (see tests/layers/test_graph_wl.py)."""
    labels = wl_labels(BatchMolGraph.from_graphs([uniform([(0, 1), (1, 2), (2, 3)], 4)]), 2)
    assert len(set(labels[0].tolist())) == 1
    for l in labels[1:]:
        assert l[0] == l[3] and l[1] == l[2] and l[0] != l[1]
    assert not set(labels[1].tolist()) & set(labels[2].tolist())  # iterations do not share labels


def test_wl_labels_cannot_tell_hexagon_from_two_triangles():
    hexagon = uniform([(i, (i + 1) % 6) for i in range(6)], 6)
    triangles = uniform([(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)], 6)
    path = uniform([(i, i + 1) for i in range(5)], 6)
    lh, lt, lp = (wl_labels(BatchMolGraph.from_graphs([g]), 3) for g in (hexagon, triangles, path))
    assert all(sorted(a.tolist()) == sorted(b.tolist()) for a, b in zip(lh, lt))
    assert sorted(lh[1].tolist()) != sorted(lp[1].tolist())


def test_wl_labels_ignore_atom_order():
    g = F("c1ccc([se]1)-c1cc2ccccc2cn1")
    perm = torch.randperm(g.num_atoms, generator=torch.Generator().manual_seed(0))
    a = wl_labels(BatchMolGraph.from_graphs([g]), 3)
    b = wl_labels(BatchMolGraph.from_graphs([g.permute_atoms(perm)]), 3)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x[perm.numpy()], y)


def test_wl_ridge_fits_a_linear_function_of_label_counts():
    graphs = [F(s) for s in SMILES]
    model = WLSubtreeRidge(WLSubtreeConfig(depth=2, alpha=1e-8))
    # Targets: a random linear function of the label counts (6 graphs: exactly fittable).
    y = torch.tensor([0.5, -1.0, 2.0, 3.5, 1.0, 0.0])
    model.fit(graphs, y)
    assert model.num_features > 0
    torch.testing.assert_close(model(BatchMolGraph.from_graphs(graphs)).double(), y.double(), atol=1e-4, rtol=0)
    # checkpointable: buffers rebuild the same model
    clone = WLSubtreeRidge(WLSubtreeConfig(depth=2))
    clone.load_state_dict(model.state_dict())
    torch.testing.assert_close(clone(BatchMolGraph.from_graphs(graphs)), model(BatchMolGraph.from_graphs(graphs)))


def test_wl_ridge_ignores_unseen_labels():
    model = WLSubtreeRidge(WLSubtreeConfig(depth=1, alpha=1.0)).fit([F("CCO"), F("CCCO")], [1.0, 2.0])
    # a molecule sharing no label with training gets the intercept
    out = model(BatchMolGraph.from_graphs([F("[Se]")]))
    torch.testing.assert_close(out.double(), model.bias.reshape(1))
