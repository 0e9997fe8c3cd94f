"""Adversarial attacks for chapter 04: PGD for adversarial fine-tuning, PGD/APGD for evaluation.

Paper: "Text as Partial Constraint: Core-Residual Alignment for Robust Vision-Language Learning",
arXiv 2607.03143.

The paper reports zero-shot robust accuracy under AutoAttack (l_inf, eps = 2/255 in the Table 1
caption, 4/255 as the Appendix B.3 default). Its objective (Sections 4.1-4.5) has no adversarial
term; the chapter therefore also trains an "adversarial fine-tuning" arm in the style of TeCoA,
which needs an in-loop attack. This module holds:

* :func:`pgd_perturb` - a plain l_inf projected gradient ascent on an arbitrary scalar loss of the
  images (Madry et al. 2018). It differentiates with respect to the input only, so the model's
  parameter gradients are untouched; the training loop calls it before its own backward pass.
* :func:`robust_accuracy` - evaluation of any image classifier (an ``nn.Module`` mapping images in
  [0, 1] to logits) under PGD or APGD-CE, delegated to the Adversarial Robustness Toolbox (ART):
  ``ProjectedGradientDescentPyTorch`` and ``AutoProjectedGradientDescent`` on a
  ``PyTorchClassifier`` with clip values (0, 1).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from reprobook.core import checks

__all__ = ["ATTACKS", "pgd_perturb", "robust_accuracy"]

#: The attack names :func:`robust_accuracy` accepts.
ATTACKS = ("pgd", "apgd")


def _check_radius(eps: float, alpha: float | None, steps: int) -> None:
    """Validate an attack's radius, step size and number of steps."""
    checks.real(eps, "eps", minimum=0)
    if alpha is not None:
        checks.real(alpha, "alpha", above=0)
    checks.integer(steps, "steps", minimum=0)


def _check_images(x: torch.Tensor) -> None:
    """Images must be a floating (B, C, H, W) tensor with values in [0, 1]."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.ndim != 4:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"images must be a float tensor of shape (B, C, H, W), got {shape}")
    if x.numel() and (float(x.min()) < 0.0 or float(x.max()) > 1.0):
        raise ValueError(
            f"images must lie in [0, 1], got values in [{float(x.min()):.4g}, {float(x.max()):.4g}]"
        )


def pgd_perturb(
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    *,
    eps: float,
    alpha: float,
    steps: int,
    random_start: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """l_inf projected gradient ascent on ``loss_fn`` around the images ``x``.

    Implements PGD (Madry et al. 2018), used for TeCoA-style adversarial fine-tuning:

        x^0     = clip_[0,1](x + U[-eps, eps])            (random start; x^0 = x without it)
        x^{s+1} = clip_[0,1]( x + clip_[-eps,eps]( x^s + alpha sign(grad_x loss_fn(x^s)) - x ) )

    for s = 0..steps-1, and returns x^steps (detached). The gradient is taken with
    ``torch.autograd.grad`` with respect to the input only, so no ``.grad`` is accumulated on model
    parameters; gradients are enabled inside even when the caller runs under ``torch.no_grad``.

    Args:
        loss_fn: maps images (B, C, H, W) to a scalar loss to be *maximised* (e.g. the
            core-alignment InfoNCE of the current batch).
        x: clean images, float (B, C, H, W) in [0, 1].
        eps: l_inf radius (>= 0). eps = 0 or steps = 0 returns a copy of ``x``.
        alpha: step size (> 0).
        steps: number of ascent steps (>= 0).
        random_start: start from a uniform point of the eps-ball (drawn with ``generator``).
        generator: a ``torch.Generator`` on the device of ``x`` for the random start (None: the
            global generator).

    Returns:
        x_adv, same shape, dtype and device as ``x``, with ||x_adv - x||_inf <= eps and values
        in [0, 1].
    """
    _check_radius(eps, alpha, steps)
    _check_images(x)
    x0 = x.detach()
    if steps == 0 or eps == 0:
        return x0.clone()
    if random_start:
        noise = torch.rand(x0.shape, generator=generator, device=x0.device, dtype=x0.dtype)
        x_adv = (x0 + (2.0 * noise - 1.0) * eps).clamp_(0.0, 1.0)
    else:
        x_adv = x0.clone()
    with torch.enable_grad():
        for _ in range(steps):
            x_adv.requires_grad_(True)
            loss = loss_fn(x_adv)
            if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
                raise ValueError(f"loss_fn must return a scalar tensor, got {shape}")
            (grad,) = torch.autograd.grad(loss.reshape(()), x_adv)
            with torch.no_grad():
                step = x_adv + alpha * grad.sign()
                x_adv = torch.min(torch.max(step, x0 - eps), x0 + eps).clamp_(0.0, 1.0)
    return x_adv.detach()


def _module_device(module: nn.Module) -> torch.device:
    """The device of a module's first parameter or buffer (CPU for a module holding neither)."""
    for tensor in (*module.parameters(), *module.buffers()):
        return tensor.device
    return torch.device("cpu")


@torch.no_grad()
def _predict(classifier: nn.Module, x: torch.Tensor, batch_size: int) -> torch.Tensor:
    """argmax_c logits(x)_c, batched, for x (N, C, H, W) -> LongTensor (N,) on the CPU."""
    device = _module_device(classifier)
    out = [
        classifier(x[i : i + batch_size].to(device)).argmax(dim=1).cpu()
        for i in range(0, len(x), batch_size)
    ]
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.long)


def _attack(
    classifier: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    attack: str,
    eps: float,
    steps: int,
    batch_size: int,
    seed: int,
    restarts: int,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The body of :func:`robust_accuracy`: (clean_ok (N,) bool, x_adv (N, C, H, W)) on the CPU."""
    import warnings

    with (
        warnings.catch_warnings()
    ):  # ART imports tqdm.auto, which warns in a kernel without ipywidgets
        warnings.simplefilter("ignore")
        from art.attacks.evasion import (
            AutoProjectedGradientDescent,
            ProjectedGradientDescentPyTorch,
        )
        from art.estimators.classification import PyTorchClassifier

    classifier.eval()
    with torch.no_grad():
        n_classes = int(classifier(x[:1].to(device)).shape[1])
    if int(y.min()) < 0 or int(y.max()) >= n_classes:
        raise ValueError(
            f"labels must lie in [0, {n_classes - 1}] (the classifier's {n_classes} classes)"
        )
    clean_ok = _predict(classifier, x, batch_size) == y
    x_adv = x.clone()
    # Only clean-correct images can count as robust, so only they are attacked (the rest keep x).
    attacked = clean_ok.nonzero().squeeze(1)
    if eps == 0 or len(attacked) == 0:
        return clean_ok, x_adv
    estimator = PyTorchClassifier(
        model=classifier,
        loss=nn.CrossEntropyLoss(),
        input_shape=tuple(x.shape[1:]),
        nb_classes=n_classes,
        clip_values=(0.0, 1.0),
        device_type="gpu" if device.type == "cuda" else "cpu",
    )
    if attack == "pgd":
        attacker = ProjectedGradientDescentPyTorch(
            estimator,
            norm=np.inf,
            eps=float(eps),
            eps_step=2.5 * float(eps) / steps,
            max_iter=int(steps),
            num_random_init=restarts,
            batch_size=batch_size,
            verbose=False,
        )
    else:
        attacker = AutoProjectedGradientDescent(
            estimator,
            norm=np.inf,
            eps=float(eps),
            eps_step=2.0 * float(eps),
            max_iter=int(steps),
            nb_random_init=restarts,
            batch_size=batch_size,
            loss_type="cross_entropy",
            verbose=False,
        )
    state = np.random.get_state()
    try:
        np.random.seed(seed)
        adv = attacker.generate(x=x[attacked].numpy(), y=y[attacked].numpy())
    finally:
        np.random.set_state(state)
    x_adv[attacked] = torch.from_numpy(np.asarray(adv, dtype=np.float32)).reshape(
        len(attacked), *x.shape[1:]
    )
    return clean_ok, x_adv


def robust_accuracy(
    classifier: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    attack: str,
    eps: float,
    steps: int,
    batch_size: int = 250,
    seed: int,
    restarts: int = 1,
) -> dict[str, float]:
    """Clean and l_inf robust accuracy of an image classifier under PGD or APGD-CE (ART).

    The classifier maps images in [0, 1] (B, C, H, W) to logits (B, n_classes); it is attacked
    untargeted with the true labels, l_inf radius ``eps``, within the box [0, 1]:

    * ``"pgd"``: ART ``ProjectedGradientDescentPyTorch`` (Madry et al.), ``steps`` iterations of
      step eps_step = 2.5 eps / steps from ``restarts`` uniform random starts in the eps-ball;
    * ``"apgd"``: ART ``AutoProjectedGradientDescent`` with ``loss_type="cross_entropy"``
      (APGD-CE of Croce & Hein 2020, the first attack of AutoAttack), ``steps`` iterations,
      initial step 2 eps, ``restarts`` random restarts.

    Robust accuracy = (1/N) sum_n 1[f(x_n) = y_n] 1[f(x_adv_n) = y_n]: an image counts only when its
    clean and its adversarial prediction are both right, so robust_acc <= clean_acc, with equality
    at eps = 0 (no attack is run then). Only the clean-correct images are attacked, since the others
    count as wrong whatever happens (AutoAttack does the same). ART draws its random starts from
    NumPy's global generator; it is seeded with ``seed`` for the call and restored afterwards, so a
    call is reproducible and leaves the caller's NumPy stream untouched. The classifier's train/eval
    mode is restored on return.

    Args:
        classifier: any ``nn.Module`` (put in eval mode by ART; keep BatchNorm out or frozen).
        images: float (N, C, H, W) in [0, 1].
        labels: integer (N,) class indices.
        attack: ``"pgd"`` or ``"apgd"``.
        eps: l_inf radius >= 0 (e.g. 4/255).
        steps: attack iterations >= 1.
        batch_size: attack and prediction batch size.
        seed: seed of the random starts.
        restarts: random starts (>= 1).

    Returns:
        dict with ``clean_acc``, ``robust_acc`` (floats in [0, 1]), ``max_linf`` (largest
        ||x_adv - x||_inf, checked <= eps + 1e-6), ``n_images``.
    """
    if attack not in ATTACKS:
        raise ValueError(f"unknown attack {attack!r}; allowed: {ATTACKS}")
    _check_radius(eps, None, steps)
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    checks.integer(batch_size, "batch_size", minimum=1)
    checks.integer(restarts, "restarts", minimum=1)
    checks.integer(seed, "seed", minimum=0, maximum=2**32 - 1)
    if not isinstance(classifier, nn.Module):
        raise ValueError(f"classifier must be a torch.nn.Module, got {type(classifier).__name__}")
    _check_images(images)
    labels = torch.as_tensor(labels)
    if labels.ndim != 1 or labels.shape[0] != images.shape[0] or labels.is_floating_point():
        raise ValueError(
            f"labels must be an integer tensor of shape ({images.shape[0]},), got "
            f"{labels.dtype} {tuple(labels.shape)}"
        )
    if len(images) == 0:
        raise ValueError("images is empty; robust accuracy needs at least one image")

    x = images.detach().float().cpu()
    y = labels.long().cpu()
    device = _module_device(classifier)
    was_training = classifier.training
    try:
        with torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext():
            clean_ok, x_adv = _attack(
                classifier, x, y, attack, eps, steps, batch_size, seed, restarts, device
            )
            adv_ok = _predict(classifier, x_adv, batch_size) == y  # still in eval mode
    finally:
        classifier.train(was_training)

    max_linf = float((x_adv - x).abs().max()) if x.numel() else 0.0
    if max_linf > eps + 1e-6:
        raise RuntimeError(
            f"the {attack} attack left the eps-ball: max |x_adv - x| = {max_linf} > eps = {eps}"
        )
    if float(x_adv.min()) < -1e-6 or float(x_adv.max()) > 1 + 1e-6:
        raise RuntimeError(f"the {attack} attack left the box [0, 1]")
    return {
        "clean_acc": float(clean_ok.float().mean()),
        "robust_acc": float((clean_ok & adv_ok).float().mean()),
        "max_linf": max_linf,
        "n_images": int(len(x)),
    }
