"""The review loop: fit, choose a batch, reveal its labels, refit; and the study over seeds.

Paper: "ACORN: Active Continuous-Score Occupancy Modeling" (abstract only; the loop is our
reconstruction). Each round the policy (:mod:`.acquisition`) picks ``batch`` unreviewed
units, the expert (in simulation: the true unit labels ``survey.y``) reveals them, and the CSOM
is refitted by MAP + Laplace (:mod:`.fit`), warm-started from the previous round.

The reference is the *full-label* analysis, the CSOM with every unit reviewed (a standard
occupancy model with "visits" = units, times the score densities), as the abstract compares
against "fully human-labeled data". Errors are measured against it and, separately, against the
simulation's truth, which answers a different question (the full-label fit still has sampling
error and imperfect detection). The combined error is in units of our tolerances (eq.
`acorn-error` of notebooks/07_acorn_occupancy/index.md),

    err = max(|beta1_B - beta1_full| / delta_beta, |psi_bar_B - psi_bar_full| / delta_psi),

with delta_beta = 0.1 (logit scale) and delta_psi = 0.02 (ASSUMED: the paper gives none), so
err <= 1 means "the same ecological conclusion as the full labels".
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from reprobook import core
from reprobook.core import checks
from reprobook.core.stats import Interval

from .acquisition import POLICIES, USES_DRAWS, ReviewState, policy
from .baselines import fit_binary_occupancy, threshold_detections
from .fit import Fit, FitError, fit_map
from .simulate import Preset, Survey, simulate

__all__ = [
    "DELTA_BETA",
    "DELTA_PSI",
    "refit",
    "full_label_fit",
    "review_loop",
    "run_study",
    "failed_surveys",
    "threshold_study",
    "threshold_summary",
    "csom_wins",
    "csom_win_fraction",
    "reviews_to_tolerance",
    "needs_no_more_reviews",
    "beats_at_every_budget",
    "gain_shrinks",
    "error_area",
    "gain_by_half",
    "beats_on_area",
    "smallest_proportion",
    "against_truth",
]

DELTA_BETA = 0.1  # tolerance on beta1 (logit scale)
DELTA_PSI = 0.02  # tolerance on psi_bar


def refit(survey: Survey, reviewed, labels, init=None) -> Fit | None:
    """fit_map from the warm start ``init`` and the default start (the highest mode of the
    two, through the fallback chain of :func:`.fit.map_with_laplace`); None when no attempt
    reaches a mode (the caller records the round as failed)."""
    try:
        return fit_map(survey, reviewed, labels, init=init)
    except FitError:
        return None


def full_label_fit(survey: Survey) -> Fit:
    """The reference: every unit reviewed, labels = the truth."""
    return fit_map(survey, np.ones(survey.s.shape, dtype=bool), survey.y)


def review_loop(
    survey: Survey,
    policy_name: str,
    *,
    budget: int,
    batch: int,
    rng: np.random.Generator,
    n_draws: int = 512,
    first_fit: Fit | None = None,
) -> pd.DataFrame:
    """Run one policy from zero reviews to ``budget`` reviews in rounds of ``batch``; ``n_draws``
    is the number of Laplace draws of the policies that use them (ACORN's). ``first_fit`` is
    the fit with no reviews when the caller has it (it is the same for every policy); otherwise
    it is made here. Raises FitError when that fit fails: every policy needs it, so the survey
    cannot be run (:func:`run_study` records it as failed).

    One row per round (round 0 = no reviews): n_reviewed, beta1, beta1_se, psi_bar, psi_bar_se,
    fit_ok, positives (reviewed units found present), seconds (selection + refit).
    """
    choose = policy(policy_name)
    rng = checks.generator(rng)
    kwargs = {"n_draws": n_draws} if policy_name in USES_DRAWS else {}
    budget = checks.integer(budget, "budget", minimum=0, maximum=survey.s.size)  # units
    batch = checks.integer(batch, "batch", minimum=1)
    reviewed = np.zeros(survey.s.shape, dtype=bool)
    labels = np.zeros(survey.s.shape, dtype=np.int64)
    t0 = time.perf_counter()
    fit = refit(survey, reviewed, labels) if first_fit is None else first_fit
    if fit is None:
        raise FitError(
            f"the CSOM fit with no reviews failed for this survey ({survey.n_sites} sites); "
            "the policies need a starting fit"
        )
    seconds = time.perf_counter() - t0 if first_fit is None else fit.seconds
    rows = [_row(0, fit, True, 0, seconds)]
    last = fit
    while reviewed.sum() < budget:
        t0 = time.perf_counter()
        b = min(int(batch), int(budget - reviewed.sum()))
        picks = choose(ReviewState(survey, reviewed, labels, last), b, rng, **kwargs)
        idx = tuple(np.array(picks).T)
        if len(picks) != b or len(set(picks)) != b or reviewed[idx].any():
            raise RuntimeError(
                f"policy {policy_name!r} returned an invalid batch (duplicates, reviewed units "
                "or wrong size)"
            )
        reviewed[idx] = True
        labels[idx] = survey.y[idx]  # the expert
        fit = refit(survey, reviewed, labels, init=last.params)
        if fit is not None:
            last = fit
        rows.append(
            _row(
                int(reviewed.sum()),
                fit,
                fit is not None,
                int(labels[reviewed].sum()),
                time.perf_counter() - t0,
            )
        )
    return pd.DataFrame(rows)


def _row(n: int, fit: Fit | None, ok: bool, positives: int, seconds: float) -> dict:
    nan = float("nan")
    return dict(
        n_reviewed=n,
        beta1=fit.beta1 if ok else nan,
        beta1_se=fit.beta1_se if ok else nan,
        psi_bar=fit.psi_bar if ok else nan,
        psi_bar_se=fit.psi_bar_se if ok else nan,
        fit_ok=ok,
        positives=positives,
        seconds=seconds,
    )


def run_study(
    preset: Preset,
    policies,
    *,
    reps: int,
    budget_frac: float,
    batch_frac: float,
    seed: int,
    n_draws: int = 512,
    budget_fracs: dict[str, float] | None = None,
) -> pd.DataFrame:
    """Every policy on ``reps`` simulated surveys (the same surveys for every policy: a paired
    comparison). Survey j is drawn with ``default_rng([seed, j])``; policy p's choices on it
    with ``default_rng([seed, j, 1 + index of p in POLICIES])``. Budgets and rounds are fractions
    of the survey's units (a round reviews at least one unit). ``budget_fracs`` gives some
    policies a smaller budget than ``budget_frac`` (their rows stop there).

    Long table: rep, policy, the :func:`review_loop` columns, frac_reviewed, the references
    (beta1_full, psi_bar_full, beta1_true, psi_bar_true) and errors err_beta1, err_psi, err
    (combined, in tolerance units: eq. `acorn-error` of notebooks/07_acorn_occupancy/index.md).

    A survey whose full-label fit or fit with no reviews fails (after every fallback of
    :func:`.fit.fit_map`) cannot be compared: it is left out of the table for every policy, so
    the comparison stays paired, and :func:`failed_surveys` reads {rep: reason} back from the
    table (``attrs["failed_surveys"]``). One failed survey never stops a study.
    """
    with threadpool_limits(limits=1):  # the same floating-point sums (and picks) on any machine
        return _run_study(
            preset, policies, reps, budget_frac, batch_frac, seed, n_draws, budget_fracs or {}
        )


def _run_study(
    preset, policies, reps, budget_frac, batch_frac, seed, n_draws, budget_fracs
) -> pd.DataFrame:
    names = list(POLICIES)
    for p in policies:
        policy(p)  # validates the name
    _check_reps(reps)
    budget_frac = checks.real(budget_frac, "budget_frac", above=0, maximum=1)
    checks.real(batch_frac, "batch_frac", above=0, maximum=1)
    for p, v in budget_fracs.items():
        if p not in policies:
            raise checks.InputError(
                f"budget_fracs names {p!r}, which is not among the policies {list(policies)}"
            )
        checks.real(v, f"budget_fracs[{p!r}]", above=0, maximum=budget_frac)
    frames, failed = [], {}
    for j in range(int(reps)):
        survey = simulate(preset, np.random.default_rng([seed, j]))
        none = np.zeros(survey.s.shape, dtype=bool)
        try:
            ref = full_label_fit(survey)
        except FitError as err:
            failed[j] = f"the full-label fit failed: {err}"
            continue
        try:
            first = fit_map(survey, none, np.zeros(survey.s.shape, dtype=np.int64))
        except FitError as err:
            failed[j] = f"the fit with no reviews failed: {err}"
            continue
        batch = max(1, int(round(batch_frac * survey.s.size)))
        for p in policies:
            budget = int(round(budget_fracs.get(p, budget_frac) * survey.s.size))
            df = review_loop(
                survey,
                p,
                budget=budget,
                batch=batch,
                rng=np.random.default_rng([seed, j, 1 + names.index(p)]),
                n_draws=n_draws,
                first_fit=first,
            )
            df.insert(0, "policy", p)
            df.insert(0, "rep", j)
            df["frac_reviewed"] = df["n_reviewed"] / survey.s.size
            df["beta1_full"], df["psi_bar_full"] = ref.beta1, ref.psi_bar
            df["beta1_true"], df["psi_bar_true"] = preset.beta[1], float(survey.psi.mean())
            frames.append(df)
    if not frames:
        if not policies:
            raise checks.InputError("policies is empty: name at least one of " + str(names))
        raise FitError(
            f"every one of the {int(reps)} surveys failed to fit; the first: {failed[0]}"
        )
    out = pd.concat(frames, ignore_index=True)
    out["err_beta1"] = (out["beta1"] - out["beta1_full"]).abs()
    out["err_psi"] = (out["psi_bar"] - out["psi_bar_full"]).abs()
    out["err"] = np.maximum(out["err_beta1"] / DELTA_BETA, out["err_psi"] / DELTA_PSI)
    out.attrs["failed_surveys"] = failed
    return out


def failed_surveys(study: pd.DataFrame) -> dict[int, str]:
    """{rep: reason} of the surveys :func:`run_study` left out because a fit failed after every
    fallback (empty when none did)."""
    return dict(study.attrs.get("failed_surveys", {}))


def threshold_study(preset: Preset, *, reps: int, thresholds, seed: int) -> pd.DataFrame:
    """C2: on ``reps`` surveys (survey j from ``default_rng([seed, j])``, as in :func:`run_study`),
    the CSOM with no reviews against the standard and Royle-Link occupancy models fitted to the
    scores thresholded at each probability in ``thresholds``.

    Long table: rep, model ("CSOM", "standard", "Royle-Link"), threshold (NaN for the CSOM),
    psi_bar, beta1, ok (the fit converged; a failed fit leaves NaN estimates), label_switched,
    detections (fraction of units above the threshold), and the truth psi_bar_true (mean of the
    simulated psi_i) and beta1_true.
    """
    with threadpool_limits(limits=1):
        return _threshold_study(preset, reps, thresholds, seed)


def _threshold_study(preset, reps, thresholds, seed) -> pd.DataFrame:
    _check_reps(reps)
    rows = []
    for j in range(int(reps)):
        survey = simulate(preset, np.random.default_rng([seed, j]))
        truth = dict(rep=j, psi_bar_true=float(survey.psi.mean()), beta1_true=float(preset.beta[1]))
        fit = refit(
            survey, np.zeros(survey.s.shape, dtype=bool), np.zeros(survey.s.shape, dtype=np.int64)
        )
        rows.append(
            dict(truth, model="CSOM", threshold=np.nan, **_estimates(fit), detections=np.nan)
        )
        for t in thresholds:
            d = threshold_detections(survey, t)
            for model, fp in (("standard", False), ("Royle-Link", True)):
                try:
                    bf = fit_binary_occupancy(d, survey.x, survey.w, false_positive=fp)
                except FitError:
                    bf = None
                rows.append(
                    dict(
                        truth,
                        model=model,
                        threshold=float(t),
                        **_estimates(bf),
                        detections=float(d.mean()),
                    )
                )
    return pd.DataFrame(rows)


def _check_reps(reps) -> None:
    checks.integer(reps, "reps (simulated surveys)", minimum=1)


def threshold_summary(fits: pd.DataFrame) -> pd.DataFrame:
    """Per (model, threshold) and preset if present: bias and RMSE of psi_bar and beta1 against
    the truth, and the mean fraction of units detected. Failed fits (NaN) are left out."""
    fits = fits.assign(
        err_psi=fits["psi_bar"] - fits["psi_bar_true"], err_beta1=fits["beta1"] - fits["beta1_true"]
    )

    def rmse(e):
        return float(np.sqrt(np.nanmean(np.square(e))))

    keys = [k for k in ("preset", "model", "threshold") if k in fits]
    return (
        fits.groupby(keys, dropna=False)
        .agg(
            bias_psi=("err_psi", "mean"),
            rmse_psi=("err_psi", rmse),
            bias_beta1=("err_beta1", "mean"),
            rmse_beta1=("err_beta1", rmse),
            detections=("detections", "mean"),
            failed=("ok", lambda ok: int((~ok.astype(bool)).sum())),
        )
        .reset_index()
    )


def csom_wins(summary: pd.DataFrame) -> pd.DataFrame:
    """C2's cells: every thresholded (model, threshold) row of :func:`threshold_summary`, with
    ``csom_wins`` True when the CSOM of the same preset has the lower RMSE for both psi_bar and
    beta1 (strictly)."""
    by = ["preset"] if "preset" in summary else []
    csom = (
        summary[summary["model"] == "CSOM"].set_index(by)
        if by
        else summary[summary["model"] == "CSOM"]
    )
    cells = summary[summary["model"] != "CSOM"].copy()
    ref = csom.loc[cells["preset"]] if by else csom.iloc[[0] * len(cells)]
    cells["csom_wins"] = (ref["rmse_psi"].to_numpy() < cells["rmse_psi"].to_numpy()) & (
        ref["rmse_beta1"].to_numpy() < cells["rmse_beta1"].to_numpy()
    )
    return cells


def csom_win_fraction(
    fits: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[Interval, dict[str, float]]:
    """C2: the fraction of thresholded cells (preset, model, threshold) that the CSOM wins
    (:func:`csom_wins` on :func:`threshold_summary` of ``fits``), with a percentile bootstrap
    interval over surveys, and the fraction per preset.

    Each bootstrap resample draws every preset's surveys (``rep``) with replacement, recomputes
    each cell's RMSE of psi_bar and beta1 from the resampled surveys (failed fits left out, as
    in :func:`threshold_summary`) and the fraction of cells won; the interval is the
    ((1 - level) / 2, (1 + level) / 2) quantiles of the ``n_boot`` fractions (seeded by ``seed``),
    widened to hold the estimate where it falls outside them (the fraction is discrete). The
    estimate is the fraction on the surveys themselves. ``fits`` is the long table of
    :func:`threshold_study` with a ``preset`` column.
    """
    n_boot = checks.integer(n_boot, "n_boot", minimum=100)
    level = checks.real(level, "level", above=0, below=1)
    if "preset" not in fits:
        raise ValueError(
            "fits needs a 'preset' column (one threshold_study per preset, concatenated)"
        )
    cells = csom_wins(threshold_summary(fits))
    per_preset = cells.groupby("preset")["csom_wins"].mean().astype(float).to_dict()
    rng = np.random.default_rng(seed)
    wins = np.zeros(int(n_boot))
    for _, part in fits.groupby("preset", sort=True):
        sq_psi, sq_beta, keys = _squared_errors(part)
        n = sq_psi.shape[1]
        idx = rng.integers(0, n, size=(int(n_boot), n))  # (B, n) resampled surveys
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter(
                "ignore", RuntimeWarning
            )  # a resample with only failed fits: NaN, a loss
            rmse_psi = np.sqrt(np.nanmean(sq_psi[:, idx], axis=2))  # (cells + 1, B)
            rmse_beta = np.sqrt(np.nanmean(sq_beta[:, idx], axis=2))
        csom = keys.index("CSOM")
        others = [j for j in range(len(keys)) if j != csom]
        won = (rmse_psi[csom] < rmse_psi[others]) & (
            rmse_beta[csom] < rmse_beta[others]
        )  # (cells, B)
        wins += won.sum(axis=0)
    frac = wins / len(cells)
    alpha = (1 - level) / 2
    low, high = np.quantile(frac, [alpha, 1 - alpha])
    n_surveys = int(fits.groupby("preset")["rep"].nunique().sum())
    est = float(cells["csom_wins"].mean())
    interval = Interval(
        est,
        float(min(low, est)),
        float(max(high, est)),
        f"percentile bootstrap {level:.0%} over {n_surveys} surveys ({int(n_boot)} resamples)",
        n_surveys,
    )
    return interval, per_preset


def _squared_errors(part: pd.DataFrame):
    """(models, reps) squared errors of psi_bar and beta1 against the truth, one row per
    model and threshold ("CSOM" for the CSOM, "standard 0.8" and so on for the others), and
    the row names."""
    cell = [m if m == "CSOM" else f"{m} {t:g}" for m, t in zip(part["model"], part["threshold"])]
    part = part.assign(
        cell=cell,
        e_psi=(part["psi_bar"] - part["psi_bar_true"]) ** 2,
        e_beta=(part["beta1"] - part["beta1_true"]) ** 2,
    )
    wide_psi = part.pivot(index="cell", columns="rep", values="e_psi")
    wide_beta = part.pivot(index="cell", columns="rep", values="e_beta").loc[
        wide_psi.index, wide_psi.columns
    ]
    return wide_psi.to_numpy(dtype=float), wide_beta.to_numpy(dtype=float), list(wide_psi.index)


def _estimates(fit) -> dict:
    if fit is None:
        return dict(psi_bar=np.nan, beta1=np.nan, ok=False, label_switched=False)
    return dict(
        psi_bar=fit.psi_bar,
        beta1=fit.beta1,
        ok=True,
        label_switched=bool(getattr(fit, "label_switched", False)),
    )


# --- summaries of a study (the claims' metrics) ------------------------------------------------


def reviews_to_tolerance(
    study: pd.DataFrame, column: str = "err", tol: float = 1.0
) -> pd.DataFrame:
    """Per (rep, policy): the smallest number of reviews from which ``column`` stays <= tol for
    every later round (NaN when it never does within the budget). A failed fit counts as out of
    tolerance."""

    def first(df: pd.DataFrame) -> float:
        ok = (df[column] <= tol).to_numpy()  # NaN compares False
        if not ok[-1]:
            return float("nan")
        bad = np.flatnonzero(~ok)
        return float(df["n_reviewed"].iloc[0 if bad.size == 0 else bad[-1] + 1])

    return (
        study.sort_values("n_reviewed")
        .groupby(["rep", "policy"])[["n_reviewed", column]]
        .apply(first)
        .rename("reviews")
        .reset_index()
    )


def needs_no_more_reviews(
    study: pd.DataFrame, challenger: str, rivals, column: str = "err"
) -> pd.Series:
    """Per rep: True when ``challenger`` reaches the tolerance for good
    (:func:`reviews_to_tolerance`) with no more reviews than the best of ``rivals`` (a rival that
    never reaches it needs more than any number); False when the challenger never reaches it
    (C5)."""
    need = reviews_to_tolerance(study, column).pivot(
        index="rep", columns="policy", values="reviews"
    )
    missing = [p for p in [challenger, *rivals] if p not in need]
    if missing:
        raise ValueError(f"policies {missing} are not in this study; it has {sorted(need.columns)}")
    best = need[list(rivals)].fillna(np.inf).min(axis=1)
    return need[challenger].notna() & (need[challenger] <= best)


def _wide(
    study: pd.DataFrame,
    column: str,
    max_frac: float | None = None,
    min_frac: float = 0.0,
    policies=(),
) -> pd.DataFrame:
    missing = [p for p in policies if p not in set(study["policy"])]
    if missing:
        raise ValueError(
            f"policies {missing} are not in this study; it has {sorted(set(study['policy']))}"
        )
    sel = study[(study["frac_reviewed"] > min_frac)]
    if max_frac is not None:
        sel = sel[sel["frac_reviewed"] <= max_frac + 1e-12]
    if sel.empty:
        raise ValueError(f"no round of the study has a budget in ({min_frac}, {max_frac}]")
    return sel.pivot(index=["rep", "frac_reviewed"], columns="policy", values=column)


def beats_at_every_budget(
    study: pd.DataFrame, challenger: str, rivals, *, max_frac: float, column: str = "err"
) -> pd.Series:
    """Per rep: True when ``challenger``'s error is below every rival's at every budget in
    (0, max_frac] (C1, C5). A NaN error (failed fit) never beats anything."""
    wide = _wide(study, column, max_frac, policies=[challenger, *rivals])
    ok = np.ones(len(wide), dtype=bool)
    for r in rivals:
        ok &= (wide[challenger] < wide[r]).to_numpy()
    return pd.Series(ok, index=wide.index).groupby(level="rep").all()


def gain_shrinks(
    study: pd.DataFrame, challenger: str, rival: str, *, small_frac: float, column: str = "err"
) -> pd.DataFrame:
    """Per rep, the advantage g(B) = err_rival(B) - err_challenger(B): its peak over budgets in
    (0, small_frac], its value at the largest budget, and ``shrinks`` = peak > 0 and
    g(B_max) < peak / 2 (C4)."""
    wide = _wide(study, column, policies=[challenger, rival])
    g = (wide[rival] - wide[challenger]).rename("gain").reset_index()
    rows = []
    for rep, part in g.groupby("rep"):
        part = part.sort_values("frac_reviewed")
        small = part.loc[part["frac_reviewed"] <= small_frac + 1e-12, "gain"]
        peak = float(small.max()) if len(small) else float("nan")
        last = float(part["gain"].iloc[-1])
        rows.append(
            dict(
                rep=rep,
                peak_small=peak,
                at_max_budget=last,
                shrinks=bool(peak > 0 and last < peak / 2),
            )
        )
    return pd.DataFrame(rows)


def error_area(study: pd.DataFrame, *, max_frac: float, column: str = "err") -> pd.DataFrame:
    """Per (rep, policy): the mean of ``column`` over the rounds with 0 < budget <= max_frac (the
    area under the error-against-budget curve when the rounds are equally spaced, as in
    :func:`run_study` unless the budget is not a multiple of the round)."""
    wide = _wide(study, column, max_frac)
    return wide.groupby(level="rep").mean()


def gain_by_half(
    study: pd.DataFrame,
    challenger: str,
    rival: str,
    *,
    split_frac: float,
    max_frac: float,
    column: str = "err",
) -> pd.DataFrame:
    """C4: per rep, the advantage g(B) = err_rival(B) - err_challenger(B), its mean over the
    budgets in (0, split_frac] (``early``) and over those in (split_frac, max_frac] (``late``),
    and ``early_larger`` = early > late (False when either is NaN, a failed fit). When the
    advantage does not depend on the budget the two halves are exchangeable."""
    if not 0 < split_frac < max_frac:
        raise ValueError(
            f"need 0 < split_frac < max_frac, got split_frac={split_frac!r}, max_frac={max_frac!r}"
        )
    wide = _wide(study, column, max_frac, policies=[challenger, rival])
    g = (wide[rival] - wide[challenger]).rename("gain").reset_index()
    early_rows = g["frac_reviewed"] <= split_frac + 1e-12
    if early_rows.all() or not early_rows.any():
        raise ValueError(
            f"the study needs budgets on both sides of {split_frac} up to {max_frac}; it has "
            f"{sorted(g['frac_reviewed'].unique())}"
        )
    early = (
        g[early_rows].groupby("rep")["gain"].agg(lambda v: float(np.mean(v.to_numpy())))
    )  # NaN stays NaN
    late = g[~early_rows].groupby("rep")["gain"].agg(lambda v: float(np.mean(v.to_numpy())))
    out = pd.DataFrame({"early": early, "late": late}).reset_index()
    out["early_larger"] = (out["early"] > out["late"]).to_numpy()  # NaN compares False
    return out


def beats_on_area(
    study: pd.DataFrame, challenger: str, rivals, *, max_frac: float, column: str = "err"
) -> pd.Series:
    """C5: per rep, True when ``challenger``'s mean ``column`` over the budgets in (0, max_frac]
    (:func:`error_area`) is strictly below every rival's. A NaN (a failed fit in the range) on
    either side counts as a loss for the challenger."""
    missing = [p for p in [challenger, *rivals] if p not in set(study["policy"])]
    if missing:
        raise ValueError(
            f"policies {missing} are not in this study; it has {sorted(set(study['policy']))}"
        )
    wide = _wide(study, column, max_frac)
    area = (
        wide.groupby(level="rep").mean().where(~wide.isna().groupby(level="rep").any())
    )  # a failed fit: NaN
    ok = np.ones(len(area), dtype=bool)
    for r in rivals:
        ok &= (area[challenger] < area[r]).to_numpy()  # NaN compares False
    return pd.Series(ok, index=area.index)


def smallest_proportion(counts: dict[str, tuple[int, int]], level: float = 0.95) -> Interval:
    """The smaller of several proportions k / n with a simultaneous interval (C5):
    :func:`reprobook.core.smallest_proportion_interval` (each proportion's Clopper-Pearson
    interval at level 1 - (1 - level) / m for m proportions, Bonferroni; the minimum is
    increasing in every argument, so the true smallest proportion lies in [min of the lower
    ends, min of the upper ends], around the smallest estimate), labelled with the regimes'
    names and with every survey of every regime counted in ``n``. ``counts`` maps a name to
    (k, n).
    """
    if not counts:
        raise ValueError("counts is empty: give at least one name -> (successes, n)")
    level = checks.real(level, "level", above=0, below=1)
    counts = {name: (int(k), int(n)) for name, (k, n) in counts.items()}
    each = 1 - (1 - level) / len(counts)
    names = ", ".join(counts)
    return core.smallest_proportion_interval(counts, level)._replace(
        method=f"smallest of {len(counts)} ({names}); Clopper-Pearson {each:.1%} each (Bonferroni)",
        n=sum(n for _, n in counts.values()),
    )


def against_truth(study: pd.DataFrame) -> pd.DataFrame:
    """Each policy's mean absolute error against the simulation's truth (not the full-label
    fit) at the largest budget it ran to: columns frac_reviewed, abs_beta1_vs_truth and
    abs_psi_vs_truth, one row per policy, and a last row "(full labels)" with the full-label
    fit's own errors (frac_reviewed 1)."""
    last = study.groupby("policy")["frac_reviewed"].transform("max")
    end = study[study.frac_reviewed == last].copy()
    end["abs_beta1_vs_truth"] = (end["beta1"] - end["beta1_true"]).abs()
    end["abs_psi_vs_truth"] = (end["psi_bar"] - end["psi_bar_true"]).abs()
    columns = ["frac_reviewed", "abs_beta1_vs_truth", "abs_psi_vs_truth"]
    table = end.groupby("policy")[columns].mean()
    full = end.drop_duplicates("rep")
    table.loc["(full labels)"] = [
        1.0,
        (full["beta1_full"] - full["beta1_true"]).abs().mean(),
        (full["psi_bar_full"] - full["psi_bar_true"]).abs().mean(),
    ]
    return table
