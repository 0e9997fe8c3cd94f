"""What every chapter uses: profiles, seeding and runtime facts, claims, the plotting theme,
input checks, prose and source display, and Lightning helpers. ``core`` imports no paper package."""

from . import (
    _quiet,  # noqa: F401  (first: it silences a warning raised by later imports)
    checks,
)
from .chapters import EVIDENCE, VERDICT_LABELS, VERDICTS, Chapter, Claim, find_chapters, get_chapter
from .checkpoints import atomic_torch_save, checkpoint_path, checkpoints_dir, load_or_train
from .checks import InputError
from .claims import Run, begin, load_records, load_results, load_values, start
from .display import md, show_source
from .numerics import Failures, jitter, linprog_chain, tie_groups
from .packages import lazy_submodules
from .paths import atomic_write_text, book_root, results_dir, results_file
from .plotting import method_colors, set_theme
from .profiles import PROFILE_NAMES, ProfileError, resolve, resolve_notebook, runs_full_path
from .resources import (
    Input,
    MissingInputs,
    Resources,
    input_present,
    load_hf_dataset,
    locate,
    missing_inputs,
    read_resources,
)
from .rng import as_generator
from .runtime import (
    parallel_map,
    parallel_stages,
    quiet_lightning,
    runtime_facts,
    seed_everything,
    side_by_side,
    side_by_side_stages,
)
from .stats import (
    Interval,
    WorstGroup,
    bca_from_replicates,
    bonferroni_level,
    bootstrap_interval,
    paired_interval,
    proportion_interval,
    replicate_interval,
    smallest_proportion_interval,
    t_interval,
    welch_interval,
    worst_group_interval,
)
from .training import fit, make_trainer, to_accelerator, unfilled_allocations

__all__ = [
    "lazy_submodules",
    "PROFILE_NAMES",
    "runs_full_path",
    "locate",
    "load_hf_dataset",
    "Failures",
    "jitter",
    "linprog_chain",
    "tie_groups",
    "atomic_torch_save",
    "checkpoint_path",
    "checkpoints_dir",
    "parallel_map",
    "parallel_stages",
    "side_by_side",
    "side_by_side_stages",
    "load_or_train",
    "as_generator",
    "resolve_notebook",
    "EVIDENCE",
    "VERDICTS",
    "VERDICT_LABELS",
    "Chapter",
    "Claim",
    "ProfileError",
    "Run",
    "atomic_write_text",
    "book_root",
    "find_chapters",
    "get_chapter",
    "load_records",
    "load_results",
    "load_values",
    "make_trainer",
    "unfilled_allocations",
    "method_colors",
    "quiet_lightning",
    "resolve",
    "results_dir",
    "results_file",
    "runtime_facts",
    "seed_everything",
    "set_theme",
    "start",
    "begin",
    "fit",
    "bca_from_replicates",
    "bonferroni_level",
    "paired_interval",
    "replicate_interval",
    "smallest_proportion_interval",
    "welch_interval",
    "t_interval",
    "to_accelerator",
    "Input",
    "MissingInputs",
    "Resources",
    "input_present",
    "missing_inputs",
    "read_resources",
    "Interval",
    "bootstrap_interval",
    "proportion_interval",
    "md",
    "checks",
    "InputError",
    "show_source",
    "WorstGroup",
    "worst_group_interval",
]
