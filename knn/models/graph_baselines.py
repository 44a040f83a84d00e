"""Table 3's baselines, in the same harness as the WLN (BatchMolGraph -> (G,)).

* :class:`NFPRegressor`: neural fingerprint (Duvenaud et al. 2015), 4 layers;
* :class:`MeanFieldRegressor`: embedded mean field (Dai et al. 2016);
* :class:`LoopyBPRegressor`: embedded loopy belief propagation (Dai et al. 2016);
* :class:`MeanPredictor`: the training mean;
* :class:`WLSubtreeRidge`: Weisfeiler-Lehman subtree-kernel features + ridge regression.

The neural baselines follow the authors' re-implementations
(``graph_knn/neuralfp`` and ``graph_knn/loopybp`` in taolei87/icml17_knn),
whose sizes (conf/model/<name>.yaml) give Table 3's 0.26m parameters; the
equations are in each class. Each config's defaults are its preset file's (a
test keeps them equal); ``atom_dim`` and ``bond_dim`` are None until filled
in from the featurizer. All neighbour sums are gathers over the padded lists of
:class:`~knn.featurize.graph.BatchMolGraph` (:func:`~knn.featurize.graph.gather_rows`),
whose gradients are summed in a fixed order on CPU too: same-seed CPU runs
are bit-identical.
"""
from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch
from torch import Tensor, nn

from knn.featurize.graph import BatchMolGraph, MolGraph, gather_rows
from knn.layers.random_walk import normal_linear
from knn.models.graph import feature_dims
from knn.models.heads import RegressionHead

# --------------------------------------------------------------------------- #
# Neural fingerprint
# --------------------------------------------------------------------------- #


@dataclass
class NFPConfig:
    name: str = "nfp"
    atom_dim: int | None = None  # None: from the featurizer
    bond_dim: int | None = None
    hidden: int = 145
    depth: int = 4
    batch_norm: bool = True
    bn_momentum: float = 0.01  # running statistics for eval (the authors always used batch statistics)


class NFPLayer(nn.Module):
    """One neural-fingerprint convolution (the authors' version of Duvenaud et al. 2015).

    .. math::

        h'_v = \\mathrm{relu}\\Big(\\mathrm{BN}\\big(W_s h_v + b_s + \\sum_{u∈N(v)} (W_a h_u + W_e e_{uv})\\big)\\Big),
        \\qquad o_v = \\mathrm{softmax}(W_o h'_v + b_o)

    Shapes: h (V, d_in), e (E, d_e) -> h' (V, d), o (V, d).
    """

    def __init__(self, d_in: int, bond_dim: int, d: int, batch_norm: bool, bn_momentum: float) -> None:
        super().__init__()
        self.W_a = normal_linear(d_in, d, bias=False)
        self.W_e = normal_linear(bond_dim, d, bias=False)
        self.W_s = normal_linear(d_in, d)
        self.bn = nn.BatchNorm1d(d, eps=1e-6, momentum=bn_momentum) if batch_norm else nn.Identity()
        self.W_o = normal_linear(d, d)

    def forward(self, h: Tensor, graph: BatchMolGraph) -> tuple[Tensor, Tensor]:
        nbr = graph.gather_atoms(self.W_a(h)) + graph.gather_bonds(self.W_e(graph.bond_features))  # (V, D, d)
        h = torch.relu(self.bn(self.W_s(h) + nbr.sum(1)))  # padding slots gather zeros
        return h, torch.softmax(self.W_o(h), dim=-1)


class NFPRegressor(nn.Module):
    """h_G = Σ_l Σ_v o^{(l)}_v over the ``depth`` layers, then the regression head."""

    def __init__(self, cfg: NFPConfig) -> None:
        super().__init__()
        self.cfg = cfg
        atom_dim, bond_dim = feature_dims(cfg)
        self.layers = nn.ModuleList(
            NFPLayer(atom_dim if l == 0 else cfg.hidden, bond_dim, cfg.hidden, cfg.batch_norm, cfg.bn_momentum)
            for l in range(cfg.depth)
        )
        self.head = RegressionHead(cfg.hidden, cfg.hidden)

    def fingerprint(self, graph: BatchMolGraph) -> Tensor:
        """h_G: (G, d); each o_v sums to 1, so each row sums to depth · |V_G|."""
        h = graph.atom_features
        fp: Tensor | float = 0.0
        for layer in self.layers:
            h, o = layer(h, graph)
            fp = fp + graph.sum_atoms(o)  # (G, d)
        return cast(Tensor, fp)  # depth >= 1 layers

    def forward(self, graph: BatchMolGraph) -> Tensor:
        return self.head(self.fingerprint(graph))


# --------------------------------------------------------------------------- #
# Embedded mean field and loopy BP (structure2vec)
# --------------------------------------------------------------------------- #


@dataclass
class MeanFieldConfig:
    name: str = "emf"
    atom_dim: int | None = None  # None: from the featurizer
    bond_dim: int | None = None
    hidden: int = 340   # 0.26m parameters, like the other neural baselines
    depth: int = 4      # iterations, counting the first


class MeanFieldRegressor(nn.Module):
    """Embedded mean field (Dai et al. 2016) on atoms.

    .. math::

        x_v &= W_1 f_v + W_3 \\sum_{u∈N(v)} e_{uv} \\\\
        μ^{(1)}_v &= \\mathrm{relu}(x_v), \\qquad
        μ^{(t)}_v = \\mathrm{relu}\\Big(x_v + W_2 \\sum_{u∈N(v)} μ^{(t-1)}_u\\Big), \\quad 1 < t \\le T \\\\
        h_G &= \\sum_v μ^{(T)}_v

    Shapes: f (V, F_a), e (E, F_b), μ (V, d), h_G (G, d).
    """

    def __init__(self, cfg: MeanFieldConfig) -> None:
        super().__init__()
        self.cfg = cfg
        atom_dim, bond_dim = feature_dims(cfg)
        self.W_1 = normal_linear(atom_dim, cfg.hidden, bias=False)
        self.W_3 = normal_linear(bond_dim, cfg.hidden, bias=False)
        self.W_2 = normal_linear(cfg.hidden, cfg.hidden, bias=False)
        self.head = RegressionHead(cfg.hidden, cfg.hidden)

    def forward(self, graph: BatchMolGraph) -> Tensor:
        x = self.W_1(graph.atom_features) + self.W_3(graph.gather_bonds(graph.bond_features).sum(1))
        mu = torch.relu(x)
        for _ in range(self.cfg.depth - 1):
            mu = torch.relu(x + self.W_2(graph.sum_neighbors(mu)))
        return self.head(graph.sum_atoms(mu))


@dataclass
class LoopyBPConfig:
    name: str = "elbp"
    atom_dim: int | None = None  # None: from the featurizer
    bond_dim: int | None = None
    hidden: int = 265
    depth: int = 4      # iterations, counting the first (the authors' -d 4)


def directed_edges(graph: BatchMolGraph) -> tuple[Tensor, Tensor, Tensor]:
    """Each bond b in both directions: edge b is bond_index[b,0] -> bond_index[b,1], edge b+E the reverse.

    Returns src (2E,), rev (2E,) (the reverse edge of each) and in_edges (V, D):
    the edge u -> v for each padded neighbour u of v, padding 2E.
    """
    E = graph.num_bonds
    a, b = graph.bond_index[:, 0], graph.bond_index[:, 1]
    src = torch.cat([a, b])
    idx = torch.arange(2 * E, device=src.device)
    rev = (idx + E) % max(2 * E, 1)
    bond = graph.bond_nbrs.clamp(max=max(E - 1, 0))
    v = torch.arange(graph.num_atoms, device=src.device).unsqueeze(1)
    into_end = graph.bond_index[bond, 1] == v if E else torch.zeros_like(graph.nbr_mask)  # u -> v is edge b
    in_edges = torch.where(into_end, bond, bond + E)
    in_edges = torch.where(graph.nbr_mask, in_edges, torch.full_like(in_edges, 2 * E))
    return src, rev, in_edges


class LoopyBPRegressor(nn.Module):
    """Embedded loopy BP (Dai et al. 2016), messages on directed bonds (the authors' version).

    .. math::

        x_{uv} &= W_{in} [f_u, e_{uv}] \\\\
        m^{(1)}_{uv} &= \\mathrm{relu}(x_{uv}), \\qquad
        m^{(t)}_{uv} = \\mathrm{relu}\\Big(x_{uv} + W_{bp} \\sum_{w∈N(u)\\setminus v} m^{(t-1)}_{wu}\\Big), \\quad 1 < t \\le T \\\\
        h_v &= \\mathrm{relu}\\Big(W_a f_v + W_m \\sum_{u∈N(v)} m^{(T)}_{uv}\\Big), \\qquad h_G = \\sum_v h_v

    Σ_{w∈N(u)\\v} m_{wu} is computed as Σ_{w∈N(u)} m_{wu} - m_{vu} (a gather
    and a subtraction: deterministic). Shapes: x, m (2E, d); h (V, d); h_G (G, d).
    """

    def __init__(self, cfg: LoopyBPConfig) -> None:
        super().__init__()
        self.cfg = cfg
        atom_dim, bond_dim = feature_dims(cfg)
        self.W_in = normal_linear(atom_dim + bond_dim, cfg.hidden, bias=False)
        self.W_bp = normal_linear(cfg.hidden, cfg.hidden, bias=False)
        self.W_a = normal_linear(atom_dim, cfg.hidden, bias=False)
        self.W_m = normal_linear(cfg.hidden, cfg.hidden, bias=False)
        self.head = RegressionHead(cfg.hidden, cfg.hidden)

    def messages(self, graph: BatchMolGraph) -> tuple[Tensor, Tensor]:
        """Final messages m^{(T)} (2E, d) and in_edges (V, D) (see :func:`directed_edges`)."""
        src, rev, in_edges = directed_edges(graph)
        x = self.W_in(torch.cat([graph.atom_features[src], graph.bond_features.repeat(2, 1)], dim=1))
        m = torch.relu(x)  # (2E, d)
        for _ in range(self.cfg.depth - 1):
            # Σ_{w∈N(u)} m_wu for every edge u -> v: atom u is read deg(u) times, so its
            # gradient is a sum; gather_rows takes it in a fixed order (knn.featurize.graph).
            incoming = gather_rows(_incoming(m, in_edges), src)  # (2E, d)
            m = torch.relu(x + self.W_bp(incoming - gather_rows(m, rev)))
        return m, in_edges

    def forward(self, graph: BatchMolGraph) -> Tensor:
        m, in_edges = self.messages(graph)
        h = torch.relu(self.W_a(graph.atom_features) + self.W_m(_incoming(m, in_edges)))  # (V, d)
        return self.head(graph.sum_atoms(h))


def _incoming(m: Tensor, in_edges: Tensor) -> Tensor:
    """Σ_{u∈N(v)} m_{uv}: messages (2E, d) -> (V, d), a gather over padded lists."""
    return gather_rows(m, in_edges).sum(1)


# --------------------------------------------------------------------------- #
# Mean predictor
# --------------------------------------------------------------------------- #


@dataclass
class MeanPredictorConfig:
    name: str = "mean"


class MeanPredictor(nn.Module):
    """ŷ = mean of the training targets (one parameter; :meth:`fit` sets it)."""

    def __init__(self, cfg: MeanPredictorConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg or MeanPredictorConfig()
        self.mean = nn.Parameter(torch.zeros(()))

    @torch.no_grad()
    def fit(self, targets: Tensor | Sequence[float]) -> MeanPredictor:
        self.mean.fill_(float(torch.as_tensor(targets, dtype=torch.float64).mean()))
        return self

    def forward(self, graph: BatchMolGraph) -> Tensor:
        return self.mean.expand(graph.num_graphs)


# --------------------------------------------------------------------------- #
# Weisfeiler-Lehman subtree kernel + ridge regression
# --------------------------------------------------------------------------- #

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """A bijective 64-bit mixer (Steele et al.'s SplitMix64 finaliser), elementwise on uint64."""
    x = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x += np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _row_hash(x: Tensor) -> np.ndarray:
    """A 64-bit label per row of a feature matrix (equal rows, equal labels), (N,) uint64."""
    rows = np.ascontiguousarray(x.detach().cpu().numpy().astype(np.float32))
    if rows.shape[0] == 0:
        return np.zeros(0, dtype=np.uint64)
    keys = rows.view(np.dtype((np.void, rows.shape[1] * 4))).ravel()
    uniq, inverse = np.unique(keys, return_inverse=True)
    table = np.array(
        [int.from_bytes(hashlib.blake2b(k.tobytes(), digest_size=8).digest(), "little") for k in uniq],
        dtype=np.uint64,
    )
    return table[inverse.ravel()]


def wl_labels(graph: BatchMolGraph, depth: int) -> list[np.ndarray]:
    """Weisfeiler-Lehman subtree labels l_0..l_T of every atom (T = ``depth`` iterations),
    each (V,) uint64.

    l_0(v) hashes v's feature row; l_t(v) hashes (l_{t-1}(v), the multiset
    {(l_{t-1}(u), bond label of uv) : u ∈ N(v)}), the multiset by a sum of
    mixed 64-bit hashes (order-free). Equal labels mean equal rooted subtrees
    of depth t, up to 64-bit hash collisions.
    """
    atom = _row_hash(graph.atom_features)
    bond = np.concatenate([_row_hash(graph.bond_features), np.zeros(1, dtype=np.uint64)])
    nbrs, bonds = graph.atom_nbrs.cpu().numpy(), graph.bond_nbrs.cpu().numpy()
    mask = graph.nbr_mask.cpu().numpy().astype(np.uint64)
    labels = [_splitmix64(atom)]
    with np.errstate(over="ignore"):
        for t in range(1, depth + 1):
            prev = np.concatenate([labels[-1], np.zeros(1, dtype=np.uint64)])
            pair = _splitmix64(prev[nbrs] * np.uint64(0x9E3779B97F4A7C15) + bond[bonds])  # (V, D)
            multiset = (pair * mask).sum(axis=1, dtype=np.uint64)
            labels.append(_splitmix64(labels[-1] ^ _splitmix64(multiset + np.uint64(t))))
    return labels


@dataclass
class WLSubtreeConfig:
    name: str = "wl_kernel"
    depth: int = 3           # WL iterations, "degree" in Table 3: features from iterations 0..3
    alpha: float = 10.0      # ridge penalty (best of 0.1, 1, 10, 100 on the CEP validation split)
    max_iter: int = 1000     # conjugate-gradient iterations
    tol: float = 1e-6        # stop when ||residual|| <= tol · ||b||


class WLSubtreeRidge(nn.Module):
    """ŷ = Σ_k w_k φ_k(G) + b, φ_k(G) = how often WL label k (iterations 0..T, T = ``depth``)
    occurs in G.

    :meth:`fit` builds the vocabulary of labels seen in training and solves
    ridge regression min ||Xw + b - y||² + α||w||² (b unpenalised) by
    conjugate gradients on sparse X; labels never seen in training are
    ignored. Buffers (``vocab``, ``weight``, ``bias``) make it checkpointable.
    """

    def __init__(self, cfg: WLSubtreeConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg or WLSubtreeConfig()
        self.register_buffer("vocab", torch.zeros(0, dtype=torch.int64))  # sorted labels (uint64 bits)
        self.register_buffer("weight", torch.zeros(0, dtype=torch.float64))
        self.register_buffer("bias", torch.zeros((), dtype=torch.float64))
        self.cg_iterations = 0  # used by the last fit

    @property
    def num_features(self) -> int:
        return int(self.vocab.numel())

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # The vocabulary's size is only known after fit: take the checkpoint's.
        for name in ("vocab", "weight"):
            if prefix + name in state_dict:
                setattr(self, name, torch.empty_like(state_dict[prefix + name]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _labels(self, graph: BatchMolGraph) -> tuple[np.ndarray, np.ndarray]:
        """(graph index, label) of every (atom, iteration)."""
        labels = wl_labels(graph, self.cfg.depth)
        g = np.tile(graph.atom_graph.cpu().numpy(), len(labels))
        return g, np.concatenate(labels).view(np.int64)

    def _features(self, rows: np.ndarray, labels: np.ndarray, num_graphs: int) -> Tensor:
        """Sparse COO (G, K) float64 counts over the vocabulary."""
        vocab = self.vocab.cpu().numpy()
        col = np.searchsorted(vocab, labels).clip(max=max(len(vocab) - 1, 0))
        hit = vocab[col] == labels if len(vocab) else np.zeros(len(labels), dtype=bool)
        idx = torch.from_numpy(np.stack([rows[hit], col[hit]]).astype(np.int64))
        values = torch.ones(idx.shape[1], dtype=torch.float64)
        X = torch.sparse_coo_tensor(idx, values, (num_graphs, len(vocab)), check_invariants=False)
        return X.coalesce()

    @torch.no_grad()
    def fit(self, graphs: Sequence[MolGraph], targets: Tensor | Sequence[float], chunk: int = 1024) -> WLSubtreeRidge:
        y = torch.as_tensor(targets, dtype=torch.float64)
        row_chunks, label_chunks = [], []
        for start in range(0, len(graphs), chunk):
            g, l = self._labels(BatchMolGraph.from_graphs(list(graphs[start : start + chunk])))
            row_chunks.append(g + start)
            label_chunks.append(l)
        rows, labels = np.concatenate(row_chunks), np.concatenate(label_chunks)
        self.vocab = torch.from_numpy(np.unique(labels))
        X = self._features(rows, labels, len(graphs))  # (N, K)
        with warnings.catch_warnings():  # "sparse CSR support is in beta"
            warnings.simplefilter("ignore", UserWarning)
            X_csr, Xt_csr = X.to_sparse_csr(), X.t().coalesce().to_sparse_csr()
        counts = np.bincount(np.searchsorted(self.vocab.numpy(), labels), minlength=self.num_features)
        mu = torch.from_numpy(counts / len(graphs))  # (K,) column means of X
        sq = torch.from_numpy(np.bincount(X.indices()[1].numpy(), weights=X.values().numpy() ** 2,
                                          minlength=self.num_features))
        y_mean = y.mean()

        # Centred design X_c = X - 1 μᵀ (b unpenalised); solve (X_cᵀ X_c + α I) w = X_cᵀ (y - ȳ)
        # by conjugate gradients, preconditioned by the diagonal Σ_i (x_ik - μ_k)² + α.
        def A(v: Tensor) -> Tensor:
            Xv = X_csr @ v - mu @ v
            return Xt_csr @ Xv - mu * Xv.sum() + self.cfg.alpha * v

        b = Xt_csr @ (y - y_mean) - mu * (y - y_mean).sum()
        M_inv = 1.0 / (sq - len(graphs) * mu**2 + self.cfg.alpha)
        w = torch.zeros_like(b)
        r = b.clone()
        z = M_inv * r
        p = z.clone()
        rz = r @ z
        stop = self.cfg.tol**2 * (b @ b)
        self.cg_iterations = 0
        for iteration in range(1, self.cfg.max_iter + 1):
            self.cg_iterations = iteration
            Ap = A(p)
            step = rz / (p @ Ap)
            w += step * p
            r -= step * Ap
            if r @ r <= stop:
                break
            z = M_inv * r
            rz_new = r @ z
            p = z + (rz_new / rz) * p
            rz = rz_new
        self.weight = w
        self.bias = y_mean - mu @ w
        return self

    def forward(self, graph: BatchMolGraph) -> Tensor:
        rows, labels = self._labels(graph)
        X = self._features(rows, labels, graph.num_graphs)
        out = torch.sparse.mm(X, self.weight.cpu().unsqueeze(1)).squeeze(1) + self.bias.cpu()
        return out.to(device=graph.atom_features.device, dtype=graph.atom_features.dtype)
