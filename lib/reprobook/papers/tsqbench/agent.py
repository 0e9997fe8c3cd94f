"""TSQAgent's roles at the reduced profile: the no-tool judge, the Inspector's rules, the
Adjudicator, and the Perceiver with its two rewards and a GRPO loop.

Paper: "TSQAgent: Rating Time Series Data Quality via Dedicated Agentic Reasoning"
(arXiv 2606.03629). The paper's roles are LLM prompts; here each is a small stand-in that keeps
the role's inputs and outputs: the judge sees only the no-tool view (eq. `tsqbench-view`), the
Inspector compares tool statistics (eq. `tsqbench-margin`), the Adjudicator votes
(eq. `tsqbench-adjudicate`), the Perceiver is a policy over dimension sets trained with
group-relative advantages and a KL penalty (eqs. `tsqbench-reward-f1`,
`tsqbench-reward-precision`, `tsqbench-grpo`).
"""

from __future__ import annotations

import json
import re

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn

from reprobook.core import checks

from .bench import DIMENSIONS, Pair, view_statistics

__all__ = [
    "view_features",
    "pair_features",
    "NoToolJudge",
    "inspector_margins",
    "adjudicate",
    "reward_f1",
    "reward_precision",
    "parse_answer",
    "answer_format",
    "parse_dimensions",
    "group_advantages",
    "Perceiver",
    "train_grpo",
    "train_supervised",
    "selection_metrics",
]


# --------------------------------------------------------------------------- the no-tool view
def view_features(x) -> np.ndarray:
    """8 unit-free features of one series' 9 statistics: missing ratio, log std, log IQR, log
    range over std, upper and lower tail over the IQR, slope x length / std, and the mean's
    offset from the mid-quartile over std."""
    n, miss, mean, sd, lo, hi, p25, p75, slope = view_statistics(x)
    sd = sd if sd > 0 else 1e-12
    iqr = p75 - p25 if p75 > p25 else 1e-12
    return np.array(
        [
            miss,
            np.log(sd),
            np.log(iqr),
            np.log((hi - lo) / sd + 1e-12),
            (hi - p75) / iqr,
            (p25 - lo) / iqr,
            slope * n / sd,
            (mean - (p25 + p75) / 2) / sd,
        ]
    )


def _preview_extras(x) -> np.ndarray:
    """6 features an eye would take from the preview: difference roughness, lag-1
    autocorrelation (the biased estimate), the share of repeated values, the largest jump,
    and the first and second halves' std ratio and level gap (all unit-free)."""
    v = np.asarray(x, float)
    v = v[np.isfinite(v)]
    if v.size < 8:
        return np.zeros(6)
    sd = np.std(v) or 1e-12
    d = np.diff(v)
    c = v - v.mean()
    r1 = float(c[:-1] @ c[1:] / (c @ c)) if c @ c > 0 else 0.0  # lag-1 autocorrelation
    h = v.size // 2
    return np.array(
        [
            np.std(d) / sd,
            r1,
            np.mean(d == 0),
            np.max(np.abs(d)) / sd,
            np.log((np.std(v[:h]) + 1e-12) / (np.std(v[h:]) + 1e-12)),
            (np.mean(v[h:]) - np.mean(v[:h])) / sd,
        ]
    )


def pair_features(a, b) -> np.ndarray:
    """The Perceiver's input (36 numbers): the view features of A and of B, their difference,
    and the preview extras of A and of B."""
    fa, fb = view_features(a), view_features(b)
    return np.concatenate([fa, fb, fa - fb, _preview_extras(a), _preview_extras(b)])


class NoToolJudge:
    """The judge without tools: per dimension, a logistic regression on the difference of the
    two sides' no-tool features (view features and preview extras), fitted on training pairs
    to say which side received that dimension's defect. ``predict`` gives P(A is worse)."""

    def __init__(self, c: float = 1.0):
        self.c = checks.real(c, "c", above=0)
        self.models: dict[str, object] = {}

    @staticmethod
    def _x(a, b) -> np.ndarray:
        fa = np.concatenate([view_features(a), _preview_extras(a)])
        fb = np.concatenate([view_features(b), _preview_extras(b)])
        return fa - fb

    def fit(self, pairs: list[Pair]) -> NoToolJudge:
        rows: dict[str, list] = {d: [] for d in DIMENSIONS}
        for p in pairs:
            x = self._x(p.a, p.b)
            for d in p.target_dimensions:
                rows[d].append((x, p.worse[d] == "A"))
                rows[d].append((-x, p.worse[d] == "B"))  # the swapped pair, so no side bias
        for d, r in rows.items():
            if len(r) < 4:
                raise ValueError(f"the judge needs training pairs with {d}; got {len(r) // 2}")
            X = np.array([x for x, _ in r])
            y = np.array([t for _, t in r], dtype=int)
            model = make_pipeline(StandardScaler(), LogisticRegression(C=self.c, max_iter=500))
            self.models[d] = model.fit(X, y)
        return self

    def predict(self, a, b, dimension: str) -> float:
        """P(A is worse on ``dimension``) for one pair."""
        return float(self.predict_features(self._x(a, b)[None, :], dimension)[0])

    def predict_features(self, X, dimension: str) -> np.ndarray:
        """P(A is worse) for many pairs at once, from rows of :meth:`features`."""
        checks.choice(dimension, "dimension", DIMENSIONS)
        if dimension not in self.models:
            raise RuntimeError("fit the judge before asking it")
        return self.models[dimension].predict_proba(np.atleast_2d(X))[:, 1]

    features = staticmethod(lambda a, b: NoToolJudge._x(a, b))


# --------------------------------------------------------------------------- Inspector
def inspector_margins(tools_a: dict, tools_b: dict, dimensions) -> dict[str, float]:
    """Per dimension, the signed margin m = (t_A - t_B) / (|t_A| + |t_B|) of the two sides'
    defect statistics, in [-1, 1]; m > 0 says A is worse (B wins on that dimension).

    Implements eq. `tsqbench-margin` of notebooks/12_tsqbench/index.md."""
    out = {}
    for d in dimensions:
        checks.choice(d, "dimension", DIMENSIONS)
        ta, tb = float(tools_a[d]), float(tools_b[d])  # the tool statistic of each side
        den = abs(ta) + abs(tb)  # eq. tsqbench-margin: the scale of the comparison
        out[d] = (ta - tb) / den if den > 0 else 0.0  # eq. tsqbench-margin: signed margin
    return out


TIE_TOL = 1e-12  # |S| / sum |m_d| at or below this is a tie (rounding, not evidence)

RECHECK = {  # auxiliary tool per dimension for the Adjudicator's recheck (higher is worse)
    "rare_pattern": lambda t: t["n_changepoints"],
    "trend": lambda t: t["adf_p"] - t["kpss_p"],
    "frequency": lambda t: -t["acf_peak"],
    "amplitude": lambda t: -t["seasonal_strength"],
    "pattern_consistency": lambda t: t["n_changepoints"],
}


def adjudicate(
    margins: dict[str, float],
    *,
    recheck: dict[str, float] | None = None,
    epsilon: float = 0.02,
) -> dict:
    """The Adjudicator: a margin-weighted vote over dimensions. S = sum_d m_d; the winner is B
    when S > 0, A when S < 0, a tie when S = 0; the confidence is |S| / sum_d |m_d|. Dimensions
    with |m_d| < epsilon are replaced by their recheck margin when one is given (one pass).

    Margins that cancel exactly can leave a sum of a few ulps of either sign, so S counts as 0
    when |S| <= ``TIE_TOL`` sum_d |m_d| (a tie, confidence 0): a tie must not become a win for
    A or for B by the rounding of the machine.

    Implements eq. `tsqbench-adjudicate` of notebooks/12_tsqbench/index.md."""
    epsilon = checks.real(epsilon, "epsilon", minimum=0)
    m = dict(margins)
    rechecked = []
    for d, v in m.items():
        if abs(v) < epsilon and recheck and d in recheck:  # weak evidence: look again
            m[d] = recheck[d]
            rechecked.append(d)
    total = sum(m.values())  # eq. tsqbench-adjudicate: S = sum_d m_d
    weight = sum(abs(v) for v in m.values())
    if abs(total) <= TIE_TOL * weight:  # S = 0 up to rounding
        total = 0.0
    winner = "tie" if total == 0 else ("B" if total > 0 else "A")
    conf = abs(total) / weight if weight > 0 else 0.0  # eq. tsqbench-adjudicate: |S| / sum |m_d|
    return {"winner": winner, "confidence": float(conf), "rechecked": rechecked}


def recheck_margins(tools_a: dict, tools_b: dict, dimensions) -> dict[str, float]:
    """Margins of the auxiliary tools (change points, ADF/KPSS, ACF peak, STL seasonal
    strength), in the form of eq. `tsqbench-margin`."""
    out = {}
    for d in dimensions:
        if d in RECHECK:
            ta, tb = RECHECK[d](tools_a), RECHECK[d](tools_b)
            den = abs(ta) + abs(tb)
            out[d] = (ta - tb) / den if den > 0 else 0.0
    return out


# --------------------------------------------------------------------------- Perceiver reward
_THINK = re.compile(r"<think>.*?</think>", flags=re.DOTALL)
_FENCE = re.compile(r"```(?:json)?")


def parse_answer(text: str) -> dict | None:
    """The JSON object of a Perceiver's answer, read as the released parser
    (training/rl/reward.py, ``parse_perceiver_output``) reads it: ``<think>...</think>``
    blocks and code-fence marks are removed, then the text from the first ``{`` to the last
    ``}`` is decoded. None when there is no such span or it does not decode."""
    if not isinstance(text, str):
        return None
    body = _FENCE.sub("", _THINK.sub("", text).strip()).strip()
    start, end = body.find("{"), body.rfind("}") + 1
    if start < 0 or end <= start:
        return None
    try:
        obj = json.loads(body[start:end])
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def answer_format(text: str) -> tuple[float, list[str] | None]:
    """(format score, planned dimensions) of an answer, as the released
    ``compute_format_reward`` (training/rl/reward.py) scores it: -1 and None when it does not
    parse, 0 and None when ``planned_dimensions`` is not a list (a schema error), else 1 and
    the listed names that are among the seven dimensions (others, and non-strings, dropped;
    repeats kept once)."""
    obj = parse_answer(text)
    if obj is None:
        return -1.0, None
    dims = obj.get("planned_dimensions")
    if not isinstance(dims, list):
        return 0.0, None
    names = [d for d in dims if isinstance(d, str) and d in DIMENSIONS]
    return 1.0, list(dict.fromkeys(names))


def parse_dimensions(text: str) -> list[str] | None:
    """The ``planned_dimensions`` of a Perceiver's answer (:func:`answer_format`); None when it
    does not parse or does not follow the schema."""
    return answer_format(text)[1]


def _precision(pred: set, target: set) -> float:
    if not pred:
        return 1.0 if not target else 0.0  # empty/empty counts as exact
    return len(pred & target) / len(pred)  # eq. tsqbench-reward-precision: |P & T| / |P|


def _f1(pred: set, target: set) -> float:
    if not pred and not target:
        return 1.0
    return 2 * len(pred & target) / (len(pred) + len(target))  # eq. tsqbench-reward-f1


def _reward(prediction, target, term, training: bool) -> float:
    """0.1 format + 0.9 term(P, T). ``prediction`` is the answer's text or a parsed list (then
    well-formed). Evaluation (the released ``compute_reward``): -1 for an answer that does not
    parse or breaks the schema. Training (the released ``grpo_reward_format`` plus
    ``grpo_reward_dim``, which the trainer sums): 0.1 x format score + 0.9 x term, the term 0
    without a parsed answer, so -0.1 unparsable and 0 for a schema error."""
    checks.boolean(training, "training")
    if isinstance(prediction, str):
        fmt, pred = answer_format(prediction)  # format score -1, 0 or 1, and the set
    else:
        fmt, pred = 1.0, list(prediction)  # a parsed answer is well-formed
    if pred is None:  # unparsable or a schema error
        return 0.1 * fmt if training else -1.0  # training: 0.1 x format; evaluation: -1
    return 0.1 * fmt + 0.9 * term(set(pred), set(target))  # 0.1 format + 0.9 set score


def reward_precision(prediction, target, *, training: bool = False) -> float:
    """The released code's reward, 0.1 format + 0.9 precision of the predicted set (precision 1
    when both sets are empty, 0 when only the prediction is). ``training=False`` is the
    released scalar ``compute_reward`` (training/rl/reward.py): -1 when the answer does not
    parse or breaks the schema. ``training=True`` is what the released GRPO script hands the
    trainer (``grpo_reward_format`` + ``grpo_reward_dim``): -0.1 unparsable, 0 for a schema
    error. ``prediction`` is the answer's text or an already parsed list.

    Implements eq. `tsqbench-reward-precision` of notebooks/12_tsqbench/index.md."""
    return _reward(prediction, target, _precision, training)  # eq. tsqbench-reward-precision


def reward_f1(prediction, target, *, training: bool = False) -> float:
    """The design's reward (its tool-decision term left out: the stand-in has no tool choice):
    0.1 format + 0.9 F1 of the predicted set (F1 = 1 for two empty sets), with the released
    code's format scores (``training`` as in :func:`reward_precision`).

    Implements eq. `tsqbench-reward-f1` of notebooks/12_tsqbench/index.md."""
    return _reward(prediction, target, _f1, training)  # eq. tsqbench-reward-f1


def group_advantages(rewards, scale: str = "group") -> np.ndarray:
    """Group-relative advantages over the G samples of each prompt, as trl's GRPOTrainer
    (trl/trainer/grpo_trainer.py, ``scale_rewards``; release 1.16.0) computes them:
    A_ij = (r_ij - mean_j r_ij) / (s + 1e-4), with s the sample std (Bessel's correction,
    divisor G - 1) of the prompt's group (``scale="group"``, trl's default), of the whole batch
    (``"batch"``), or no division (``"none"``). With G = 1 the std is undefined and trl zeroes
    the advantages; so does this. ``rewards`` has shape (prompts, G).

    Implements eq. `tsqbench-grpo` of notebooks/12_tsqbench/index.md."""
    r = checks.array(rewards, "rewards", ndim=2)  # (prompts, G)
    checks.choice(scale, "scale", ("group", "batch", "none"))
    mean = r.mean(axis=1, keepdims=True)  # eq. tsqbench-grpo: group mean
    if scale == "none":  # trl's scale_rewards="none": centred only
        return r - mean
    if (r.shape[1] if scale == "group" else r.size) < 2:  # no sample std of one value
        return np.zeros_like(r)  # one sample: no spread, no signal (trl: NaN, then 0)
    if scale == "group":
        std = r.std(axis=1, ddof=1, keepdims=True)  # eq. tsqbench-grpo: sample std of the group
    else:
        std = np.full_like(mean, r.std(ddof=1))  # the batch's sample std
    return (r - mean) / (std + 1e-4)  # eq. tsqbench-grpo: A_ij


class Perceiver(nn.Module):
    """The stand-in policy: an MLP from the 36 pair features to 7 independent Bernoulli logits,
    one per dimension (a sampled set of dimensions is one 'answer'). Inputs are standardised
    with the training set's mean and std, kept as buffers."""

    def __init__(self, n_in: int = 36, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_in, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
            nn.Linear(hidden, len(DIMENSIONS)),
        )
        self.register_buffer("mu", torch.zeros(n_in))
        self.register_buffer("sd", torch.ones(n_in))
        self.register_buffer("curve", torch.zeros(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (batch, 36) -> (batch, 7) logits
        return self.net((x - self.mu) / self.sd)

    def select(self, x) -> np.ndarray:
        """Greedy answer: dimensions whose probability exceeds one half, (batch, 7) booleans."""
        with torch.no_grad():
            return (self(torch.as_tensor(x, dtype=torch.float32)) > 0).numpy()


def _set_scaler(policy: Perceiver, X: np.ndarray) -> None:
    policy.mu.copy_(torch.as_tensor(X.mean(0), dtype=torch.float32))
    policy.sd.copy_(torch.as_tensor(X.std(0) + 1e-6, dtype=torch.float32))


def train_grpo(
    policy: Perceiver,
    X: np.ndarray,
    Y: np.ndarray,
    *,
    reward: str = "precision",
    updates: int = 300,
    prompts: int = 16,
    group: int = 8,
    beta: float = 0.04,
    lr: float = 3e-3,
    seed: int = 0,
) -> Perceiver:
    """GRPO on the Perceiver: each update draws ``prompts`` training pairs, samples ``group``
    dimension sets per pair, scores them with the reward in its training form
    (``training=True``, as the released script's reward functions), takes trl's default
    group-relative advantages (:func:`group_advantages`) and ascends
    mean_ij A_ij log pi(S_ij | x_i) - beta KL(pi || pi_ref), pi_ref the policy at the start.
    The mean reward per update is kept in ``policy.curve``.

    Implements eq. `tsqbench-grpo` of notebooks/12_tsqbench/index.md."""
    checks.choice(reward, "reward", ("precision", "f1"))
    X = checks.array(X, "X", ndim=2)
    Y = checks.array(Y, "Y", ndim=2, shape=(X.shape[0], len(DIMENSIONS)))
    score = reward_precision if reward == "precision" else reward_f1  # training=True below
    names = np.array(DIMENSIONS)
    _set_scaler(policy, X)
    ref = Perceiver(X.shape[1], policy.net[0].out_features)
    ref.load_state_dict(policy.state_dict())
    opt = torch.optim.Adam(policy.net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    Xt = torch.as_tensor(X, dtype=torch.float32)
    curve = []
    for _ in range(updates):
        idx = rng.choice(len(X), size=prompts, replace=False)
        logits = policy(Xt[idx])  # (prompts, 7)
        probs = torch.sigmoid(logits)
        draws = torch.bernoulli(probs.detach().unsqueeze(1).expand(-1, group, -1), generator=gen)
        r = np.array(
            [
                [
                    score(list(names[s.numpy() > 0]), names[Y[i] > 0], training=True)
                    for s in draws[k]
                ]
                for k, i in enumerate(idx)
            ]
        )  # (prompts, group)
        adv = torch.as_tensor(group_advantages(r), dtype=torch.float32)
        logp = (
            draws * torch.log(probs.unsqueeze(1) + 1e-8)
            + (1 - draws) * torch.log(1 - probs.unsqueeze(1) + 1e-8)
        ).sum(-1)
        with torch.no_grad():
            q = torch.sigmoid(ref(Xt[idx]))
        kl = (
            probs * torch.log((probs + 1e-8) / (q + 1e-8))
            + (1 - probs) * torch.log((1 - probs + 1e-8) / (1 - q + 1e-8))
        ).sum(-1)
        loss = -(adv * logp).mean() + beta * kl.mean()  # eq. tsqbench-grpo
        opt.zero_grad()
        loss.backward()
        opt.step()
        curve.append(float(r.mean()))
    policy.curve = torch.tensor(curve)
    return policy


def train_supervised(policy: Perceiver, X, Y, *, epochs: int = 200, lr: float = 3e-3) -> Perceiver:
    """The upper reference: the same network fitted to the target sets by full-batch binary
    cross-entropy (it sees the labels that GRPO only sees through rewards)."""
    X = checks.array(X, "X", ndim=2)
    Y = checks.array(Y, "Y", ndim=2, shape=(X.shape[0], len(DIMENSIONS)))
    _set_scaler(policy, X)
    opt = torch.optim.Adam(policy.net.parameters(), lr=lr)
    Xt, Yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(Y, dtype=torch.float32)
    for _ in range(epochs):
        loss = nn.functional.binary_cross_entropy_with_logits(policy(Xt), Yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return policy


def selection_metrics(pred, target) -> dict[str, float]:
    """Mean precision, recall, F1 and exact-set match of predicted dimension sets (rows of
    booleans), and the mean number selected. Empty/empty counts 1 everywhere; an empty
    prediction of a non-empty set has precision 0."""
    P = checks.array(pred, "pred", ndim=2, dtype=bool)
    T = checks.array(target, "target", ndim=2, dtype=bool, shape=P.shape)
    inter = (P & T).sum(1)
    npred, ntrue = P.sum(1), T.sum(1)
    both_empty = (npred == 0) & (ntrue == 0)
    prec = np.where(npred > 0, inter / np.maximum(npred, 1), both_empty * 1.0)
    rec = np.where(ntrue > 0, inter / np.maximum(ntrue, 1), 1.0)
    f1 = np.where(npred + ntrue > 0, 2 * inter / np.maximum(npred + ntrue, 1), 1.0)
    return {
        "precision": float(prec.mean()),
        "recall": float(rec.mean()),
        "f1": float(f1.mean()),
        "exact": float((P == T).all(1).mean()),
        "n_selected": float(npred.mean()),
    }
