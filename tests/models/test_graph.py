"""Graph regressors: presets, Table 3 sizes, invariances, and a tiny overfit run."""
from dataclasses import asdict

import pytest
import torch

from knn.featurize import BatchMolGraph, MolFeaturizer
from knn.models import count_params, models_of, preset
from knn.models import build as build_model
from knn.models.graph import WLNConfig, WLNRegressor

F = MolFeaturizer.preset("authors")
DIMS = {"atom_dim": F.atom_dim, "bond_dim": F.bond_dim}  # 82, 6
SMILES = [
    "c1ccc([se]1)-c1cc2ccccc2cn1",
    "C1C=CC=C1C1=Cc2ccccc2[SiH2]1",
    "[nH]1c(cc2c3nsnc3c3c4ccccc4oc3c12)-c1ccco1",
    "C1C=Cc2oc(cc12)C1=CC=C[SiH2]1",
    "CCO",
    "c1ccncc1",
    "O",  # no bonds
]
NEURAL = ("wln", "gated_wln", "nfp", "elbp", "emf")
GRAPH = sorted(models_of("graph"))  # every registered graph model, new ones included


def graph_model(name, **overrides):
    """Model ``name`` at its preset (conf/model/<name>.yaml), sized for the authors' features."""
    dims = DIMS if hasattr(preset(name), "atom_dim") else {}
    return build_model(name, **dims, **overrides)


@pytest.mark.parametrize("name", GRAPH)
def test_every_preset_builds_and_equals_its_schema_defaults(name):
    """conf/model/<name>.yaml is the preset; the config dataclass's defaults may not drift from
    it (wln: ``WLNConfig()``; gated_wln: the WLN schema with its name, width and gate)."""
    spec = models_of("graph")[name]
    cfg = preset(name)
    assert cfg.name == name and graph_model(name).cfg.name == name
    expected = WLNConfig(name="gated_wln", hidden=175, gated=True) if name == "gated_wln" \
        else spec.config()
    assert cfg == expected
    if hasattr(cfg, "atom_dim"):
        assert (cfg.atom_dim, cfg.bond_dim) == (None, None)  # from the featurizer
        with pytest.raises(ValueError, match=f"^{name}: atom_dim and bond_dim are None") as err:
            spec.cls(cfg)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["wln", "gated_wln", "nfp", "elbp"])
def test_table_3_sizes(name):
    """Table 3: 0.26m parameters for WLN, gated WLN, NFP and ELBP (within 10%)."""
    n = count_params(graph_model(name))
    assert abs(n - 260_000) <= 26_000, n


def test_exact_sizes_of_the_presets():
    sizes = {name: count_params(graph_model(name)) for name in NEURAL}
    # 6h² + 98h + 1 for the WLN; + 2h² + 7h for the gate (U_u, U_v + b, U_e)
    assert sizes == {"wln": 259_601, "gated_wln": 263_376, "nfp": 261_146, "elbp": 256_256, "emf": 261_801}
    assert count_params(graph_model("wln", hidden=175)) == 200_901  # the authors' default width


def test_registry():
    assert {"wln", "gated_wln", "nfp", "elbp", "emf", "mean", "wl_kernel"} <= set(GRAPH)
    assert preset("gated_wln").gated and preset("gated_wln").hidden == 175
    assert asdict(graph_model("wln", depth=2).cfg)["depth"] == 2
    with pytest.raises(ValueError, match="unknown model"):
        build_model("gcn")
    with pytest.raises(ValueError, match="width"):
        graph_model("wln", width=3)


@pytest.mark.parametrize("name", NEURAL)
def test_batch_equals_molecules_one_at_a_time_and_atom_order_is_irrelevant(name):
    torch.manual_seed(0)
    model = graph_model(name, hidden=16).double().eval()
    graphs = [F(s) for s in SMILES]
    batch = BatchMolGraph.from_graphs(graphs).to("cpu", torch.float64)
    together = model(batch)
    assert together.shape == (len(SMILES),)
    for i, g in enumerate(graphs):
        alone = model(BatchMolGraph.from_graphs([g]).to("cpu", torch.float64))
        torch.testing.assert_close(alone, together[i : i + 1])
        perm = torch.randperm(g.num_atoms, generator=torch.Generator().manual_seed(i))
        permuted = model(BatchMolGraph.from_graphs([g.permute_atoms(perm)]).to("cpu", torch.float64))
        torch.testing.assert_close(permuted, together[i : i + 1])


@pytest.mark.parametrize("name", NEURAL)
def test_forward_and_gradients_are_bitwise_reproducible(name):
    torch.manual_seed(0)
    model = graph_model(name, hidden=16)
    batch = BatchMolGraph.from_graphs([F(s) for s in SMILES])

    def grads():
        model.zero_grad()
        out = model(batch)
        out.square().sum().backward()
        return out.detach(), [p.grad.clone() for p in model.parameters()]

    (out1, g1), (out2, g2) = grads(), grads()
    assert torch.equal(out1, out2) and all(torch.equal(a, b) for a, b in zip(g1, g2))


@pytest.mark.parametrize("gated", [False, True])
def test_tiny_overfit(gated):
    """Six molecules, small WLN: 300 Adam steps take the training MSE (target variance ~7) below 0.01."""
    torch.manual_seed(0)
    model = WLNRegressor(WLNConfig(**DIMS, hidden=32, gated=gated))
    batch = BatchMolGraph.from_graphs([F(s) for s in SMILES[:6]])
    y = torch.tensor([3.6, 6.0, 2.9, 7.6, 0.0, 1.5])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(300):
        opt.zero_grad()
        loss = ((model(batch) - y) ** 2).mean()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-2, loss.item()


def test_wln_dropout_acts_on_h_G_while_training_only():
    """model.dropout (a study factor, not in the paper) drops units of h_G before the head:
    eval output equals the same weights without dropout, training output differs; at 0 the
    forward pass draws no random numbers, so runs made before the option existed repeat."""
    batch = BatchMolGraph.from_graphs([F(s) for s in SMILES]).to("cpu", torch.float64)
    torch.manual_seed(0)
    plain = graph_model("wln", hidden=16).double()
    dropped = graph_model("wln", hidden=16, dropout=0.5).double()
    dropped.load_state_dict(plain.state_dict())
    h_G, _ = plain.encoder(batch)
    torch.manual_seed(1)
    expected_mask = torch.empty_like(h_G).bernoulli_(0.5)  # what nn.Dropout(0.5) draws next
    torch.manual_seed(1)
    train_out = dropped.train()(batch)
    assert torch.allclose(train_out, plain.head(h_G * expected_mask / 0.5))
    assert torch.allclose(dropped.eval()(batch), plain.eval()(batch))
    state = torch.get_rng_state()
    plain.train()(batch)
    assert torch.equal(torch.get_rng_state(), state)
