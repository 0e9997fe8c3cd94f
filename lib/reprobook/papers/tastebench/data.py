"""The TasteBench release files the chapter reads, and the paper's printed tables.

The files live in ``data/tastebench/`` at the book's root (found with
:func:`reprobook.core.book_root`, so a notebook run from any folder, or in Colab, finds them),
with the release's own paths. They are CC BY-NC 4.0 (TasteBench authors, NECTAR) and MIT (the
FART splits): see ``data/tastebench/NOTICE``. Nothing here downloads anything.

The paper's tables are read from the rendered LaTeX the release ships, so no printed number is
typed into the book: :func:`main_table`, :func:`feature_ablation`, :func:`llm_ablation`,
:func:`molecular_table`, :func:`molecular_per_class`, :func:`human_baseline_table`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from reprobook.core import book_root, checks

__all__ = [
    "CLASSES",
    "MAIN_ROWS",
    "SUPERVISED",
    "LLM_AND_ENSEMBLES",
    "FEATURE_MODELS",
    "SUBSETS",
    "LLM_INPUTS",
    "data_dir",
    "oof",
    "oof_names",
    "pairs",
    "block_alpha",
    "individual_accuracy",
    "summary",
    "group_size_medians",
    "molecular_predictions",
    "fart_split",
    "parse_tex_rows",
    "main_table",
    "feature_ablation",
    "llm_ablation",
    "molecular_table",
    "molecular_per_class",
    "mcnemar_printed",
    "human_baseline_table",
    "feature_ablation_file",
    "llm_ablation_file",
]

CLASSES = ("sweet", "bitter", "sour", "umami", "undefined")  # label order of the release

# The rows of the paper's main table: (name printed in the table, out-of-fold file). The
# supervised models' files are their SNCTI "bench" runs, which equal the rows of the NCTI subset
# of the feature ablation; the BT bench file is byte-identical to its log-concentration run.
MAIN_ROWS: dict[str, tuple[str, str]] = {
    "Gemini": ("Gemini 3.1 Pro", "llm_gemini_3_1_pro_preview_ingredients_image"),
    "Qwen": ("Qwen 3.5 397B", "llm_qwen3_5_397b_a17b_ingredients_image"),
    "MMRF cosine": ("MMRF (cosine)", "dist_pred_cosine_NCI"),
    "MMRF L2": ("MMRF (L2)", "dist_pred_l2_NCI"),
    "Ridge": ("Ridge", "ridge_SNCTI_bench"),
    "BT": ("Bradley--Terry", "bradley_terry_SNCTI_bench"),
    "HBT": ("Hierarchical BT", "hierarchical_bt_SNCTI_bench"),
    "KSVM": ("Kernel RankSVM", "kernel_ranksvm_SNCTI_bench"),
    "LGBM": ("LightGBM", "lightgbm_reg_SNCTI_bench"),
    "NNLS": ("NNLS (BT+Gemini)", "nested_bt_gemini_nnls"),
    "Rank avg": ("Rank avg.", "nested_bt_gemini_rank"),
    "Mean": ("Mean", "nested_bt_gemini_mean"),
}
SUPERVISED = ("Ridge", "BT", "HBT", "KSVM", "LGBM")
LLM_AND_ENSEMBLES = ("Gemini", "Qwen", "NNLS", "Rank avg", "Mean")

# The feature ablation: columns (model) and rows (input subset) as printed.
FEATURE_MODELS: dict[str, str] = {
    "Ridge": "ridge",
    "BT": "bradley_terry",
    "HBT": "hierarchical_bt",
    "KSVM": "kernel_ranksvm",
    "LGBM": "lightgbm_reg",
    "Cos": "dist_pred_cosine",
    "L2": "dist_pred_l2",
}
SUBSETS = ("N", "C", "T", "I", "NC", "NT", "NI", "CT", "CI", "TI", "NCT", "NCI", "NTI", "CTI",
           "NCTI")  # fmt: skip
# The LLM input ablation: printed row -> file suffix.
LLM_INPUTS: dict[str, str] = {
    "Ingr.": "ingredients",
    "Nutr.": "nutrition",
    "Img.": "image",
    "Ingr.+Nutr.": "ingredients_nutrition",
    "Ingr.+Img.": "ingredients_image",
    "Nutr.+Img.": "nutrition_image",
    "All": "ingredients_nutrition_image",
}
LLM_MODELS = {"Gemini": "llm_gemini_3_1_pro_preview", "Qwen": "llm_qwen3_5_397b_a17b"}


def data_dir(root: Path | None = None) -> Path:
    """``<book root>/data/tastebench``; a clear error when it is missing."""
    path = (root or book_root()) / "data" / "tastebench"
    if not path.is_dir():
        raise FileNotFoundError(
            f"the TasteBench data are not at {path}: they are part of the repository "
            "(data/tastebench); check out the whole book, not only lib/"
        )
    return path


def _file(*parts: str) -> Path:
    path = data_dir().joinpath(*parts)
    if not path.is_file():
        raise FileNotFoundError(f"missing TasteBench file {path}")
    return path


def oof_names() -> list[str]:
    """The stems of the released out-of-fold prediction files."""
    folder = data_dir() / "food_similarity" / "results" / "oof_predictions"
    return sorted(p.stem for p in folder.glob("*.csv"))


def oof(name: str) -> pd.DataFrame:
    """One out-of-fold file: ``category, product_code, true_score, predicted_score`` (one row
    per product; a product the model could not score has no score)."""
    names = oof_names()
    checks.choice(name, "name", names)
    frame = pd.read_csv(_file("food_similarity", "results", "oof_predictions", f"{name}.csv"))
    return frame.sort_values(["category", "product_code"]).reset_index(drop=True)


def feature_ablation_file(model: str, subset: str) -> str:
    """The out-of-fold file of one cell of the feature ablation (supervised models always get
    the category indicator S; the full NCTI subset is their bench run)."""
    checks.choice(model, "model", tuple(FEATURE_MODELS))
    checks.choice(subset, "subset", SUBSETS)
    stem = FEATURE_MODELS[model]
    if model in ("Cos", "L2"):
        return f"{stem}_{subset}"
    return f"{stem}_S{subset}" + ("_bench" if subset == "NCTI" else "")


def llm_ablation_file(model: str, inputs: str) -> str:
    """The out-of-fold file of one cell of the LLM input ablation."""
    checks.choice(model, "model", tuple(LLM_MODELS))
    checks.choice(inputs, "inputs", tuple(LLM_INPUTS))
    return f"{LLM_MODELS[model]}_{LLM_INPUTS[inputs]}"


def pairs() -> pd.DataFrame:
    """The released list of within-category pairs with a winner (pairs tied in the panel means
    are left out)."""
    return pd.read_csv(_file("food_similarity", "data", "pairs.csv"))


def block_alpha() -> pd.DataFrame:
    """Per-block agreement: ``category, block_id, n_respondents, n_products,
    krippendorff_alpha, kendall_w`` (49 blocks)."""
    return pd.read_csv(_file("human_baseline", "results", "inter_rater_reliability.csv"))


def individual_accuracy() -> pd.DataFrame:
    """Each panelist's leave-one-out pairwise accuracy in their block (4,664 rows)."""
    return pd.read_csv(_file("human_baseline", "results", "individual_loo_accuracy.csv"))


def summary() -> dict:
    """The release's panel summary (``summary.json``)."""
    return json.loads(_file("human_baseline", "results", "summary.json").read_text())


def group_size_medians() -> pd.Series:
    """The released median group-size curve: pairwise accuracy of a random panel of k, by k."""
    curve = summary()["group_size_curve"]["k_values_median"]
    return pd.Series({int(k): float(v) for k, v in curve.items()}).sort_index()


def molecular_predictions(model: str) -> pd.DataFrame:
    """The released test predictions of ``"gnn"`` (the selected D-MPNN) or ``"fart"``:
    ``smiles, y_true, y_pred`` and one probability column per class."""
    checks.choice(model, "model", ("gnn", "fart"))
    parts = {
        "gnn": ("molecular", "results", "grid", "run_3b6c4c9b82", "fart_test_eval"),
        "fart": ("molecular", "results", "fart_augmented_test"),
    }[model]
    return pd.read_parquet(_file(*parts, "predictions.parquet"))


def fart_split(split: str) -> pd.DataFrame:
    """A FART split: ``smiles`` and ``label`` (class index in :data:`CLASSES`). The test split's
    labels, withheld from the competition file, are joined from the released predictions, whose
    rows are the test molecules in the same order (checked)."""
    checks.choice(split, "split", ("train", "val", "test"))
    frame = pd.read_csv(_file("kaggle_molecular_taste", "dataset", f"{split}.csv"))
    out = pd.DataFrame({"smiles": frame["canonicalized_smiles"].astype(str)})
    if split == "test":
        pred = molecular_predictions("gnn")
        if len(pred) != len(out) or not np.array_equal(pred["smiles"].to_numpy(), out.smiles):
            raise ValueError("the test split and the released predictions are not row-aligned")
        out["label"] = pred["y_true"].to_numpy()
    else:
        index = {c: i for i, c in enumerate(CLASSES)}
        out["label"] = frame["taste"].map(index).to_numpy()
    return out


# --- the paper's tables ---------------------------------------------------------------------

_NUMBER = re.compile(r"-?\d*\.\d+")


def _clean_name(cell: str) -> str:
    cell = re.sub(r"\\(textbf|textit|emph)\{([^}]*)\}", r"\2", cell)
    return cell.replace("\\quad", "").strip()


def parse_tex_rows(name: str) -> list[tuple[str, str, list[list[float]]]]:
    """The body rows of one of the paper's tables (``paper/<name>.tex``): a list of (section,
    row name, numbers of each cell), the section being the last italic header line."""
    text = _file("paper", f"{name}.tex").read_text(encoding="utf-8")
    body = text.split("\\midrule", 1)[1].split("\\bottomrule", 1)[0]
    rows, section = [], ""
    for line in body.splitlines():
        line = line.strip()
        head = re.search(r"\\multicolumn\{\d+\}\{.*?\}\{\\textit\{([^}]*)\}", line)
        if head:
            section = head.group(1)
            continue
        if "&" not in line:
            continue
        cells = line.rstrip("\\").rstrip().rstrip("\\").split("&")
        numbers = []
        for cell in cells[1:]:
            cell = re.sub(r"\\textsuperscript\{[^}]*\}", "", cell).replace("$", "")
            numbers.append([float(x) for x in _NUMBER.findall(cell)])
        rows.append((section, _clean_name(cells[0]), numbers))
    return rows


def _as_frame(records: list[dict]) -> pd.DataFrame:
    return pd.DataFrame.from_records(records)


def main_table() -> pd.DataFrame:
    """The printed main table: one row per (row, metric) with ``point, low, high`` (no interval
    for the random row), rows named as in :data:`MAIN_ROWS` plus ``"Random"``."""
    from .metrics import METRICS

    printed = {v[0]: k for k, v in MAIN_ROWS.items()}
    printed["Random (analytical)"] = "Random"
    records = []
    for _, name, cells in parse_tex_rows("model_results_tables/table_results"):
        for metric, nums in zip(METRICS, cells):
            low, high = (nums[1], nums[2]) if len(nums) == 3 else (np.nan, np.nan)
            records.append(
                {
                    "row": printed[name],
                    "metric": metric,
                    "point": nums[0],
                    "low": low,
                    "high": high,
                }  # fmt: skip
            )
    return _as_frame(records)


def _ablation(table: str, column: str, models) -> pd.DataFrame:
    """A printed ablation table as rows ``column, model, point, low, high``."""
    records = [
        {column: label, "model": model, "point": nums[0], "low": nums[1], "high": nums[2]}
        for _, label, cells in parse_tex_rows(f"model_results_tables/{table}")
        for model, nums in zip(list(models), cells)
    ]
    return _as_frame(records)


def feature_ablation() -> pd.DataFrame:
    """The printed feature ablation: ``subset, model, point, low, high`` (105 cells)."""
    return _ablation("table_ablation_features", "subset", FEATURE_MODELS)


def llm_ablation() -> pd.DataFrame:
    """The printed LLM input ablation: ``inputs, model, point, low, high`` (14 cells)."""
    return _ablation("table_ablation_llm", "inputs", LLM_MODELS)


def molecular_table() -> pd.DataFrame:
    """The printed molecular table: ``model, metric, point`` (accuracy and the macro precision,
    recall, F1 and AUROC), for the reference rows and the GNN."""
    metrics = ("accuracy", "precision", "recall", "f1", "auroc")
    records = []
    for _, model, cells in parse_tex_rows("molecular_prediction/table_molecular_prediction"):
        for metric, nums in zip(metrics, cells):
            records.append({"model": model, "metric": metric, "point": nums[0]})
    return _as_frame(records)


def molecular_per_class() -> pd.DataFrame:
    """The printed per-class table: ``model, metric, class, point`` (FART and GNN)."""
    records = []
    for section, metric, cells in parse_tex_rows("molecular_prediction/table_molecular_per_class"):
        if not section:  # the support row
            continue
        for cls, nums in zip(CLASSES, cells):
            records.append(
                {"model": section, "metric": metric.lower(), "class": cls, "point": nums[0]}
            )
    return _as_frame(records)


def mcnemar_printed() -> tuple[float, float]:
    """McNemar's chi-squared and p-value as the molecular table's caption prints them."""
    text = _file("paper", "molecular_prediction", "table_molecular_prediction.tex").read_text()
    m = re.search(r"chi\^2\$\s*\$=\$\s*(\d+(?:\.\d+)?),\s*\$p\$\s*\$=\$\s*(\d+(?:\.\d+)?)", text)
    if not m:
        raise ValueError("no McNemar statistic found in the molecular table's caption")
    return float(m.group(1)), float(m.group(2))


def human_baseline_table() -> pd.DataFrame:
    """The printed human-baseline table: ``scope, row, point, low, high``."""
    records = []
    for section, name, cells in parse_tex_rows("human_baseline/human_baseline_table"):
        nums = cells[0]
        low, high = (nums[1], nums[2]) if len(nums) == 3 else (np.nan, np.nan)
        scope = "within-block" if "within-block" in section else "all pairs"
        records.append({"scope": scope, "row": name, "point": nums[0], "low": low, "high": high})
    return _as_frame(records)
