"""Plücker ray tokens (chapter 11, notebooks/11_test_time_baking).

Paper: "TTB: Test-Time Baking for Large View Synthesis Models" (NeurIPS 2026, no arXiv id).
Every pixel carries its ray as Plücker coordinates (d, o x d); a view is cut into p x p patches
and each patch's [RGB, d, o x d] values become one token. Context **ground-truth tokens** keep
the colour; **rendering tokens** (target views, and TTB's context rendering tokens) have the
colour channels zeroed, so they carry the camera only.
"""

from __future__ import annotations

import torch
from einops import rearrange

from reprobook.core import checks

from .scenes import camera_rays

__all__ = ["plucker", "plucker_maps", "patchify", "unpatchify", "view_tokens"]


def plucker(o: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Plücker coordinates (..., 6) = [d / |d|, o x d / |d|] of rays o + t d (eq.
    `test-time-baking-plucker` of notebooks/11_test_time_baking/index.md). The moment does not
    change when o slides along d."""
    d = d / d.norm(dim=-1, keepdim=True)  # eq. test-time-baking-plucker: unit direction
    return torch.cat([d, torch.linalg.cross(o, d, dim=-1)], dim=-1)  # ... and moment o x d


def plucker_maps(c2w: torch.Tensor, size: int) -> torch.Tensor:
    """Plücker maps (..., V, 6, size, size) of cameras (..., V, 4, 4)."""
    return plucker(*camera_rays(c2w, size)).movedim(-1, -3)


def patchify(x: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, V, C, H, W) -> (B, V, T, p*p*C) with T = (H/p)(W/p) tokens per view."""
    checks.integer(patch, "patch", minimum=1)
    if x.shape[-1] % patch or x.shape[-2] % patch:
        raise checks.InputError(
            f"image size {tuple(x.shape[-2:])} must be a multiple of patch={patch}"
        )
    return rearrange(x, "b v c (h p) (w q) -> b v (h w) (p q c)", p=patch, q=patch)


def unpatchify(t: torch.Tensor, patch: int, size: int) -> torch.Tensor:
    """The inverse of :func:`patchify` for 3 channels: (B, V, T, p*p*3) -> (B, V, 3, H, W)."""
    return rearrange(
        t, "b v (h w) (p q c) -> b v c (h p) (w q)", h=size // patch, p=patch, q=patch, c=3
    )


def view_tokens(images: torch.Tensor, c2w: torch.Tensor, patch: int, with_colour: bool, rays=None):
    """Raw tokens (B, V, T, p*p*9) of views: [RGB - 0.5 (or zeros), Plücker] per pixel.
    ``rays``: the views' :func:`plucker_maps`, when already computed."""
    if rays is None:
        rays = plucker_maps(c2w, images.shape[-1])
    rgb = images - 0.5 if with_colour else torch.zeros_like(images)
    return patchify(torch.cat([rgb, rays], dim=2), patch)
