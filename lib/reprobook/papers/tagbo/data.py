"""The two reaction-yield lookup tables of chapter 09 and their pools of conditions.

The tables are copies of the CSV files shipped in GAUCHE 0.1.6 (MIT), gzip-compressed under
``data/tagbo/`` at the book's root (see its ``NOTICE``); they are read with pandas and nothing
here imports GAUCHE or downloads anything.

A *pool* is one substrate's table of conditions: every row is a combination of categorical
levels (ligand, base, solvent; or ligand, additive, base) and its measured yield, scaled to
[0, 1]. BO runs on a pool by looking yields up, never re-evaluating a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from reprobook.core import book_root, checks

__all__ = ["Pool", "data_dir", "read_table", "suzuki_pool", "buchwald_pool", "SUBSTRATES"]

NONE_LEVEL = "(none)"  # the name of an empty cell: "no ligand" or "no base"
FILES = {"suzuki": "SuzukiMiyaura.csv.gz", "buchwald": "DreherDoyle.csv.gz"}
SUBSTRATES = {"suzuki": 15, "buchwald": 15}  # pools per table


@dataclass(frozen=True)
class Pool:
    """One lookup pool: ``X[i, j]`` is the level index of variable ``j`` in row ``i``,
    ``levels[j]`` the SMILES (or ``NONE_LEVEL``) of variable ``j``'s levels, ``y`` the yields
    in [0, 1]."""

    name: str  # "suzuki" or "buchwald"
    substrate: str  # the reactant pair or the aryl halide that fixes the pool
    variables: tuple[str, ...]  # the categorical variables, in the columns' order
    levels: tuple[tuple[str, ...], ...]  # levels[j][l]: SMILES of level l of variable j
    X: np.ndarray  # (n, m) integer level indices
    y: np.ndarray  # (n,) yields in [0, 1]

    @property
    def sizes(self) -> tuple[int, ...]:
        """Number of levels of each variable."""
        return tuple(len(v) for v in self.levels)


def data_dir(root: Path | None = None) -> Path:
    """``<book root>/data/tagbo``; a clear error when it is missing."""
    path = (root or book_root()) / "data" / "tagbo"
    if not path.is_dir():
        raise FileNotFoundError(
            f"the reaction tables are not at {path}: they are part of the repository "
            "(data/tagbo); check out the whole book, not only lib/"
        )
    return path


def read_table(name: str) -> pd.DataFrame:
    """The whole table ``name`` ("suzuki": 5,760 rows; "buchwald": 3,955 rows)."""
    checks.choice(name, "name", FILES)
    path = data_dir() / FILES[name]
    if not path.is_file():
        raise FileNotFoundError(f"missing reaction table {path}")
    return pd.read_csv(path)


def _pool(name, substrate, frame, columns, variables, scale) -> Pool:
    levels, codes = [], []
    for col in columns:
        values = frame[col].fillna(NONE_LEVEL).astype(str)
        names = tuple(sorted(values.unique()))
        levels.append(names)
        codes.append(values.map({v: i for i, v in enumerate(names)}).to_numpy())
    X = np.stack(codes, axis=1).astype(np.int64)  # (n, m)
    y = frame["yield"].to_numpy(dtype=float) / scale  # (n,)
    return Pool(name, substrate, tuple(variables), tuple(levels), X, y)


def suzuki_pool(index: int = 0) -> Pool:
    """Reactant pair ``index`` (0..14, in sorted order) of the Suzuki-Miyaura table: 384
    conditions, 12 ligands x 8 bases x 4 solvents (empty cells are the level "(none)")."""
    index = checks.integer(index, "index", minimum=0, maximum=SUBSTRATES["suzuki"] - 1)
    t = read_table("suzuki")
    pair = t.reactant_1_smiles + " + " + t.reactant_2_smiles
    key = sorted(pair.unique())[index]
    frame = t[pair == key]
    cols = ["ligand_smiles", "reagent_1_smiles", "solvent_1_smiles"]
    return _pool("suzuki", key, frame, cols, ("ligand", "base", "solvent"), 1.0)


def buchwald_pool(index: int = 0) -> Pool:
    """Aryl halide ``index`` (0..14, in sorted order) of the Buchwald-Hartwig table: up to 264
    conditions, 4 ligands x 22 additives x 3 bases; yields divided by 100."""
    index = checks.integer(index, "index", minimum=0, maximum=SUBSTRATES["buchwald"] - 1)
    t = read_table("buchwald")
    key = sorted(t["aryl halide"].unique())[index]
    frame = t[t["aryl halide"] == key]
    cols = ["ligand", "additive", "base"]
    return _pool("buchwald", key, frame, cols, ("ligand", "additive", "base"), 100.0)
