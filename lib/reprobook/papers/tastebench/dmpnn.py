"""A directed message-passing neural network (D-MPNN) for molecular taste, written in torch.

*TasteBench: a multimodal benchmark for sensory prediction of plant-based foods* trains a
chemprop-style D-MPNN on the FART splits over a grid of 12 configurations (depth 3 or 5,
dropout 0 or 0.2, class weighting none, square-root inverse frequency or inverse frequency) and
keeps the one with the best validation macro-F1. chemprop is not part of this book's lock, so
the network is written here from its published description: hidden states live on directed
bonds, each step sums the messages arriving at a bond's source atom except the one coming back
along the bond, and the atom states are averaged into a molecule vector for a feed-forward
classifier. The atom and bond features and the learning-rate schedule follow chemprop's
defaults in spirit but are our own choices (see the chapter's index page).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from reprobook.core import checks

__all__ = [
    "ATOM_DIM",
    "BOND_DIM",
    "WEIGHTINGS",
    "MolGraph",
    "featurize",
    "collate",
    "DMPNN",
    "class_weights",
    "TrainSettings",
    "train_dmpnn",
    "predict_proba",
    "grid_settings",
    "run_grid",
]

_ELEMENTS = ("B", "C", "N", "O", "F", "Si", "P", "S", "Cl", "Se", "Br", "I", "Na", "K", "Ca")
_HYBRID = ("SP", "SP2", "SP3", "SP3D", "SP3D2")
_BONDS = ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC")
_STEREO = ("STEREONONE", "STEREOANY", "STEREOZ", "STEREOE", "STEREOCIS", "STEREOTRANS")
_CHIRAL = ("CHI_UNSPECIFIED", "CHI_TETRAHEDRAL_CW", "CHI_TETRAHEDRAL_CCW")


def _one_hot(value, choices) -> list[float]:
    out = [0.0] * (len(choices) + 1)  # the last slot: anything else
    out[choices.index(value) if value in choices else len(choices)] = 1.0
    return out


def _atom_features(atom) -> list[float]:
    return (
        _one_hot(atom.GetSymbol(), _ELEMENTS)
        + _one_hot(atom.GetTotalDegree(), (0, 1, 2, 3, 4, 5))
        + _one_hot(atom.GetFormalCharge(), (-2, -1, 0, 1, 2))
        + _one_hot(atom.GetTotalNumHs(), (0, 1, 2, 3, 4))
        + _one_hot(str(atom.GetHybridization()), _HYBRID)
        + _one_hot(str(atom.GetChiralTag()), _CHIRAL)
        + [float(atom.GetIsAromatic()), float(atom.IsInRing()), 0.01 * atom.GetMass()]
    )


def _bond_features(bond) -> list[float]:
    return (
        _one_hot(str(bond.GetBondType()), _BONDS)
        + [float(bond.GetIsConjugated()), float(bond.IsInRing())]
        + _one_hot(str(bond.GetStereo()), _STEREO)
    )


ATOM_DIM = len(_ELEMENTS) + 1 + 7 + 6 + 6 + len(_HYBRID) + 1 + len(_CHIRAL) + 1 + 3
BOND_DIM = len(_BONDS) + 1 + 2 + len(_STEREO) + 1


@dataclass(frozen=True)
class MolGraph:
    """One molecule: atom features (atoms, ATOM_DIM), directed-bond features (2 bonds,
    BOND_DIM), each directed bond's source and target atom, and the index of its reverse."""

    atoms: np.ndarray
    bonds: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    rev: np.ndarray


def featurize(smiles: str) -> MolGraph:
    """The graph of one SMILES (RDKit); every bond becomes two directed bonds."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        raise checks.InputError(f"RDKit cannot parse SMILES {smiles!r}")
    atoms = np.array([_atom_features(a) for a in mol.GetAtoms()], dtype=np.float32)
    src, dst, feats = [], [], []
    for b in mol.GetBonds():
        u, v, f = b.GetBeginAtomIdx(), b.GetEndAtomIdx(), _bond_features(b)
        src += [u, v]
        dst += [v, u]
        feats += [f, f]
    n = len(src)
    rev = np.arange(n) ^ 1  # directed bonds come in pairs (2i, 2i + 1)
    bonds = np.array(feats, dtype=np.float32).reshape(n, BOND_DIM)
    return MolGraph(atoms, bonds, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), rev)


def collate(graphs: list[MolGraph], labels=None) -> dict[str, torch.Tensor]:
    """One batch: the graphs' atoms and directed bonds concatenated, indices shifted, and the
    molecule each atom belongs to."""
    atom_off = np.cumsum([0] + [g.atoms.shape[0] for g in graphs[:-1]])
    bond_off = np.cumsum([0] + [g.src.size for g in graphs[:-1]])
    batch = {
        "atoms": torch.from_numpy(np.concatenate([g.atoms for g in graphs])),
        "bonds": torch.from_numpy(np.concatenate([g.bonds for g in graphs])),
        "src": torch.from_numpy(np.concatenate([g.src + o for g, o in zip(graphs, atom_off)])),
        "dst": torch.from_numpy(np.concatenate([g.dst + o for g, o in zip(graphs, atom_off)])),
        "rev": torch.from_numpy(np.concatenate([g.rev + o for g, o in zip(graphs, bond_off)])),
        "mol": torch.from_numpy(
            np.repeat(np.arange(len(graphs)), [g.atoms.shape[0] for g in graphs])
        ),
    }
    if labels is not None:
        batch["y"] = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    return batch


class DMPNN(nn.Module):
    """Directed message passing on bonds, mean over atoms, and a two-layer classifier.

    Implements eq. `tastebench-dmpnn` of notebooks/06_tastebench/index.md.
    """

    def __init__(self, hidden: int = 300, depth: int = 3, dropout: float = 0.0, n_classes: int = 5):
        super().__init__()
        self.depth = checks.integer(depth, "depth", minimum=1)
        hidden = checks.integer(hidden, "hidden", minimum=1)
        self.w_in = nn.Linear(ATOM_DIM + BOND_DIM, hidden, bias=False)
        self.w_msg = nn.Linear(hidden, hidden, bias=False)
        self.w_out = nn.Linear(ATOM_DIM + hidden, hidden)
        self.drop = nn.Dropout(checks.probability(dropout, "dropout"))
        self.head = nn.Sequential(
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, n_classes)
        )

    def embed(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        """The molecule vectors (molecules, hidden) of a batch."""
        atoms, src, dst = b["atoms"], b["src"], b["dst"]
        h0 = torch.relu(self.w_in(torch.cat([atoms[src], b["bonds"]], 1)))  # eq. dmpnn: h0_uv
        h = self.drop(h0)
        for _ in range(self.depth - 1):
            into = torch.zeros(atoms.shape[0], h.shape[1], dtype=h.dtype, device=h.device)
            into = into.index_add(0, dst, h)  # sum of the bond states arriving at each atom
            m = into[src] - h[b["rev"]]  # eq. dmpnn: m_uv, all arrivals at u but from v
            h = self.drop(torch.relu(h0 + self.w_msg(m)))  # eq. dmpnn: h_uv update
        into = torch.zeros(atoms.shape[0], h.shape[1], dtype=h.dtype, device=h.device)
        into = into.index_add(0, dst, h)
        atom_h = self.drop(torch.relu(self.w_out(torch.cat([atoms, into], 1))))  # eq. dmpnn
        n_mol = int(b["mol"].max()) + 1
        total = torch.zeros(n_mol, atom_h.shape[1], dtype=atom_h.dtype, device=atom_h.device)
        total = total.index_add(0, b["mol"], atom_h)
        count = torch.bincount(b["mol"], minlength=n_mol).clamp(min=1).to(atom_h.dtype)
        return total / count[:, None]  # eq. dmpnn: mean over the molecule's atoms

    def forward(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        """Class logits (molecules, n_classes)."""
        return self.head(self.embed(b))


WEIGHTINGS = ("none", "sqrt_inverse", "inverse")


def class_weights(labels, n_classes: int, weighting: str) -> np.ndarray:
    """Cross-entropy weights per class: 1, (N / n_c)^(1/2) or N / n_c, scaled so that the mean
    weight over the training molecules is 1. A class with no training molecule (a small
    subset may miss umami) gets the weight of the rarest class present.

    Implements eq. `tastebench-class-weights` of notebooks/06_tastebench/index.md.
    """
    checks.choice(weighting, "weighting", WEIGHTINGS)
    y = checks.array(labels, "labels", ndim=1, dtype=int)
    if y.size == 0 or y.min() < 0 or y.max() >= n_classes:
        raise checks.InputError(f"labels must be class indices 0..{n_classes - 1}, at least one")
    counts = np.bincount(y, minlength=n_classes).astype(float)
    power = {"none": 0.0, "sqrt_inverse": 0.5, "inverse": 1.0}[weighting]
    present = counts > 0
    w = np.empty(n_classes)
    w[present] = (y.size / counts[present]) ** power  # eq. class-weights
    w[~present] = w[present].max()
    return w / (w @ counts / y.size)  # mean weight over molecules = 1


@dataclass(frozen=True)
class TrainSettings:
    """One training run: the grid's three knobs and the fixed settings."""

    depth: int = 3
    dropout: float = 0.0
    weighting: str = "none"
    hidden: int = 300
    batch_size: int = 50
    max_epochs: int = 50
    patience: int = 10
    init_lr: float = 1e-4
    max_lr: float = 1e-3
    final_lr: float = 1e-4
    warmup_epochs: int = 2
    seed: int = 42


def _collate_of(graphs, labels):
    """The batch of a list of molecule indices into ``graphs`` and ``labels``."""
    return lambda ids: collate([graphs[i] for i in ids], np.asarray(labels)[ids])


def _lr_factor(step: int, s: TrainSettings, steps_per_epoch: int) -> float:
    """chemprop-style: linear warm-up from init_lr to max_lr, then exponential decay to
    final_lr at the last epoch (as a multiple of max_lr)."""
    warm = max(1, s.warmup_epochs * steps_per_epoch)
    total = max(warm + 1, s.max_epochs * steps_per_epoch)
    if step < warm:
        return (s.init_lr + (s.max_lr - s.init_lr) * step / warm) / s.max_lr
    gamma = (s.final_lr / s.max_lr) ** (1 / (total - warm))
    return gamma ** (step - warm)


def _lightning_module(model: DMPNN, weights: np.ndarray, s: TrainSettings, steps: int):
    import lightning as L

    class TasteGNN(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = model
            self.register_buffer("weights", torch.as_tensor(weights, dtype=torch.float32))
            self.best_loss, self.best_state, self.history = math.inf, None, []
            self._val = []

        def training_step(self, batch, _):
            logits = self.model(batch)
            return nn.functional.cross_entropy(logits, batch["y"], weight=self.weights)

        def validation_step(self, batch, _):
            self._val.append((self.model(batch).float(), batch["y"]))

        def on_validation_epoch_end(self):
            logits = torch.cat([v[0] for v in self._val])
            y = torch.cat([v[1] for v in self._val])
            self._val = []
            loss = nn.functional.cross_entropy(logits, y, weight=self.weights)
            self.log("val_loss", loss)
            self.history.append(float(loss))
            if float(loss) < self.best_loss:  # keep the weights of the best epoch
                self.best_loss = float(loss)
                self.best_state = copy.deepcopy(self.model.state_dict())

        def configure_optimizers(self):
            opt = torch.optim.Adam(self.model.parameters(), lr=s.max_lr)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: _lr_factor(step, s, steps))
            return [opt], [{"scheduler": sched, "interval": "step"}]

    return TasteGNN()


def train_dmpnn(train, val, settings: TrainSettings, n_classes: int = 5) -> tuple[DMPNN, dict]:
    """Train one configuration on ``train = (graphs, labels)``, stopping early on the
    validation loss (``patience`` epochs), and return the model at its best validation epoch
    (on the CPU) with its history."""
    from lightning.pytorch.callbacks import EarlyStopping

    from reprobook import core

    s = settings
    torch.manual_seed(s.seed)
    model = DMPNN(s.hidden, s.depth, s.dropout, n_classes)
    weights = class_weights(train[1], n_classes, s.weighting)
    # the validation batches in order; a seeded generator, so that starting them each epoch
    # draws nothing from torch's global generator (which dropout draws from)
    val_dl = torch.utils.data.DataLoader(
        np.arange(len(val[0])),
        batch_size=500,
        shuffle=False,
        collate_fn=_collate_of(*val),
        generator=torch.Generator().manual_seed(s.seed),
    )
    steps_per_epoch = math.ceil(len(train[0]) / s.batch_size)
    module = _lightning_module(model, weights, s, steps_per_epoch)
    core.fit(
        module,
        np.arange(len(train[0])),
        epochs=s.max_epochs,
        batch=s.batch_size,
        seed=s.seed,
        collate=_collate_of(*train),
        val=val_dl,
        precision="32-true",
        deterministic="warn",  # index_add has no deterministic CUDA kernel
        callbacks=[EarlyStopping("val_loss", patience=s.patience, mode="min")],
        num_sanity_val_steps=0,
    )
    model = module.model.cpu()
    if module.best_state is not None:
        model.load_state_dict(module.best_state)
    epochs = len(module.history)
    return model, {"epochs": epochs, "val_loss": module.history, "best_val_loss": module.best_loss}


@torch.no_grad()
def predict_proba(model: DMPNN, graphs: list[MolGraph], batch_size: int = 500) -> np.ndarray:
    """Class probabilities (molecules, n_classes) of ``model`` in evaluation mode."""
    model.eval()
    device = next(model.parameters()).device
    out = []
    for i in range(0, len(graphs), batch_size):
        b = {k: v.to(device) for k, v in collate(graphs[i : i + batch_size]).items()}
        out.append(torch.softmax(model(b), 1).cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, model.head[-1].out_features))


def grid_settings(depths, dropouts, weightings, **fixed) -> list[TrainSettings]:
    """The grid's configurations: every (depth, dropout, weighting), the rest ``fixed``."""
    return [
        TrainSettings(depth=d, dropout=p, weighting=w, **fixed)
        for d in depths
        for p in dropouts
        for w in weightings
    ]


def run_grid(train, val, settings: list[TrainSettings]):
    """Train every configuration and score it by its validation macro-F1; returns the table
    (best first) and the trained models in the table's order. The test split is not used."""
    import pandas as pd

    from .molecules import macro_f1

    rows, models = [], []
    for s in settings:
        model, hist = train_dmpnn(train, val, s)
        f1 = macro_f1(val[1], predict_proba(model, val[0]).argmax(1))
        rows.append(
            {
                "depth": s.depth,
                "dropout": s.dropout,
                "weighting": s.weighting,
                "epochs": hist["epochs"],
                "val_macro_f1": f1,
            }
        )
        models.append((model, s))
    order = np.argsort([-r["val_macro_f1"] for r in rows], kind="stable")
    table = pd.DataFrame([rows[i] for i in order]).reset_index(drop=True)
    return table, [models[i] for i in order]
