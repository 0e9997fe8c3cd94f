"""Masked diffusion: noise schedules, the continuous-time ELBO, complementary masks and an
iterative-unmasking sampler, after "The Design Space of Tri-Modal Masked Diffusion Models"
(arXiv 2602.21472) and the masked-diffusion objective it builds on.

Every function works on integer token tensors ``x`` of shape (batch, length) and a ``denoiser``
that maps a partly masked batch to logits of shape (batch, length, vocab).
"""

from __future__ import annotations

import math

import torch

from reprobook.core import checks

SCHEDULES = ("linear", "cosine", "poly2")


def alpha(t: torch.Tensor, schedule: str = "linear") -> torch.Tensor:
    """The probability that a token is still clean at time t: 1 - t (linear),
    cos(pi t / 2) (cosine) or 1 - t^2 (poly2). Implements eq. `trimodal-mdm-schedules` of
    notebooks/03_trimodal_mdm/index.md."""
    checks.choice(schedule, "schedule", SCHEDULES)
    if schedule == "linear":
        return 1.0 - t  # eq. trimodal-mdm-schedules: alpha_t = 1 - t
    if schedule == "cosine":
        return torch.cos(0.5 * math.pi * t)  # alpha_t = cos(pi t / 2)
    return 1.0 - t**2  # alpha_t = 1 - t^2


def alpha_prime(t: torch.Tensor, schedule: str = "linear") -> torch.Tensor:
    """d alpha_t / dt of :func:`alpha`. Implements eq. `trimodal-mdm-schedules`."""
    checks.choice(schedule, "schedule", SCHEDULES)
    if schedule == "linear":
        return -torch.ones_like(t)
    if schedule == "cosine":
        return -0.5 * math.pi * torch.sin(0.5 * math.pi * t)
    return -2.0 * t


def elbo_weight(t: torch.Tensor, schedule: str = "linear") -> torch.Tensor:
    """w(t) = -alpha'_t / (1 - alpha_t), the weight of a masked token's cross-entropy at time t
    (1/t for the linear schedule). Implements eq. `trimodal-mdm-elbo`."""
    return -alpha_prime(t, schedule) / (1.0 - alpha(t, schedule))  # eq. trimodal-mdm-elbo


def complement_weight(t: torch.Tensor, schedule: str = "linear") -> torch.Tensor:
    """-alpha'_t / alpha_t: the weight of the complementary mask's term, so that the pair stays
    an unbiased estimate of the ELBO. Implements eq. `trimodal-mdm-antithetic`."""
    return -alpha_prime(t, schedule) / alpha(t, schedule)  # eq. trimodal-mdm-antithetic


T_MIN = 1e-3  # training times are drawn on [T_MIN, 1 - T_MIN]


def sample_times(n: int, generator: torch.Generator, t_min: float = T_MIN) -> torch.Tensor:
    """n times drawn uniformly on [t_min, 1 - t_min] (the ends are cut so that both weights stay
    finite)."""
    n = checks.integer(n, "n", minimum=1)
    t_min = checks.real(t_min, "t_min", minimum=0.0, below=0.5)
    u = torch.rand(n, generator=generator)
    return t_min + (1.0 - 2.0 * t_min) * u


def sample_mask(
    shape: tuple[int, int], t: torch.Tensor, generator: torch.Generator, schedule: str = "linear"
) -> torch.Tensor:
    """A boolean mask of ``shape``: position i of sequence b is masked with probability
    1 - alpha(t_b), independently (the forward process)."""
    u = torch.rand(shape, generator=generator)
    return u < (1.0 - alpha(t, schedule))[:, None]  # masked with probability 1 - alpha_t


def apply_mask(x: torch.Tensor, mask: torch.Tensor, mask_id: int) -> torch.Tensor:
    """x with the masked positions replaced by ``mask_id``."""
    return torch.where(mask, torch.full_like(x, mask_id), x)


def masked_nll(denoiser, x: torch.Tensor, mask: torch.Tensor, mask_id: int) -> torch.Tensor:
    """Per sequence: the sum over masked positions of -log p(x_i | masked x), shape (batch,)."""
    logits = denoiser(apply_mask(x, mask, mask_id))  # (batch, length, vocab)
    logp = torch.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, x[..., None]).squeeze(-1)  # (batch, length)
    return (nll * mask).sum(dim=1)


def mdm_loss(
    denoiser,
    x: torch.Tensor,
    mask_id: int,
    generator: torch.Generator,
    schedule: str = "linear",
    antithetic: bool = False,
) -> torch.Tensor:
    """The per-token negative ELBO of the batch ``x`` (a scalar), one Monte Carlo draw of t and
    of the masks. With ``antithetic`` every sequence is used twice, with a mask M and with its
    complement, and the two terms are weighted by eqs. `trimodal-mdm-elbo` and
    `trimodal-mdm-antithetic` and averaged. Implements eq. `trimodal-mdm-elbo` (and
    eq. `trimodal-mdm-antithetic`)."""
    checks.boolean(antithetic, "antithetic")
    checks.choice(schedule, "schedule", SCHEDULES)
    b, length = x.shape
    t = sample_times(b, generator)
    mask = sample_mask((b, length), t, generator, schedule)
    term = elbo_weight(t, schedule) * masked_nll(denoiser, x, mask, mask_id)  # w(t) sum_M
    if antithetic:
        other = complement_weight(t, schedule) * masked_nll(denoiser, x, ~mask, mask_id)
        term = 0.5 * (term + other)  # eq. trimodal-mdm-antithetic: the pair's mean
    return term.mean() / length  # per token


def complementary_masks(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(M, not M): the two masks of an antithetic pair. Every position is masked in exactly one
    of them."""
    mask = mask.bool()
    return mask, ~mask


@torch.no_grad()
def eval_nelbo(
    denoiser, x: torch.Tensor, mask_id: int, n_draws: int = 4, seed: int = 12345
) -> torch.Tensor:
    """Held-out negative ELBO per token of each sequence in ``x`` (shape (batch,)), with the
    linear schedule's estimator (the continuous-time ELBO does not depend on the schedule) and
    a fixed seed, so that every model is scored on the same draws of t and masks."""
    n_draws = checks.integer(n_draws, "n_draws", minimum=1)
    g = torch.Generator().manual_seed(seed)
    b, length = x.shape
    total = torch.zeros(b)
    for _ in range(n_draws):
        t = sample_times(b, g)
        mask = sample_mask((b, length), t, g, "linear")
        total += elbo_weight(t, "linear") * masked_nll(denoiser, x, mask, mask_id)
    return total / (n_draws * length)


@torch.no_grad()
def unmask_sample(
    denoiser,
    prompt: torch.Tensor,
    target: torch.Tensor,
    mask_id: int,
    n_steps: int,
    allowed: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Fill the positions of ``target`` (boolean, (batch, length)) by iterative unmasking: start
    with them all masked, and at each of ``n_steps`` steps draw a token at every masked
    position, keep the most confident ones (an equal share of the remaining positions per step)
    and leave the rest masked. The other positions (the conditioning span) are never changed.
    ``allowed`` (boolean, (vocab,)) limits the tokens that may be drawn. Implements
    eq. `trimodal-mdm-sampler`."""
    n_steps = checks.integer(n_steps, "n_steps", minimum=1)
    x = apply_mask(prompt, target.bool(), mask_id)
    for step in range(n_steps):
        masked = x == mask_id
        masked &= target.bool()
        if not masked.any():
            break
        logits = denoiser(x).float()
        if allowed is not None:
            logits = logits.masked_fill(~allowed.bool(), float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        draw = torch.multinomial(probs.flatten(0, 1), 1, generator=generator).view(x.shape)
        conf = probs.gather(-1, draw[..., None]).squeeze(-1).masked_fill(~masked, -1.0)
        left = masked.sum(dim=1)  # masked positions still to fill, per sequence
        k = torch.ceil(left / (n_steps - step)).long()  # share unmasked now
        rank = conf.argsort(dim=1, descending=True).argsort(dim=1)
        keep = (rank < k[:, None]) & masked
        x = torch.where(keep, draw, x)
    return x
