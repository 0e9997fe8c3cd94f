"""Procedural ray-cast scenes for chapter 11 (notebooks/11_test_time_baking).

Paper: "TTB: Test-Time Baking for Large View Synthesis Models" (NeurIPS 2026, no arXiv id).
The paper trains on RealEstate10K, DL3DV and Objaverse, none of which can be had offline; this
module generates small posed scenes instead: three diffuse spheres resting on a two-colour
checker plane, one directional light with hard shadows, cameras on a sphere of radius 3 looking
at the origin. Scene ``k`` (its spheres, colours, light and cameras) is drawn from seed ``k``,
so the data is unlimited and nothing is stored. The world is z-up; the plane is z = 0.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from reprobook.core import checks

__all__ = [
    "Scene",
    "make_scene",
    "look_at",
    "camera_rays",
    "ray_sphere_depth",
    "render",
    "scene_views",
    "scene_batch",
]

FOV_DEG = 50.0  # field of view of every camera
CAM_RADIUS = 3.0  # distance of the cameras from the origin
AMBIENT = 0.3  # ambient share of the shading
CHECKER = 1.0  # side of a checker cell (world units)
CHECKER_CONTRAST = 0.3  # dark squares are the light colour times (1 - this)
ELEVATIONS = (5.0, 20.0)  # range of the camera elevations, degrees
SPAN = 45.0  # azimuth arc of a scene's context cameras, degrees


class Scene(NamedTuple):
    centers: torch.Tensor  # (3, 3) sphere centres
    radii: torch.Tensor  # (3,) sphere radii
    albedo: torch.Tensor  # (3, 3) sphere colours
    checker: torch.Tensor  # (2, 3) the plane's two colours
    light: torch.Tensor  # (3,) unit direction towards the light
    azimuths: np.ndarray  # (V,) camera azimuths, degrees
    elevations: np.ndarray  # (V,) camera elevations, degrees


def make_scene(k: int, n_ctx: int = 2, n_tgt: int = 1, span: float = SPAN) -> Scene:
    """Scene ``k`` with ``n_ctx`` context cameras spread evenly over an azimuth arc of ``span``
    degrees and ``n_tgt`` target cameras at uniform azimuths inside that arc (so a target is
    always seen from between its context views); elevations uniform in :data:`ELEVATIONS`."""
    k = checks.integer(k, "k", minimum=0)
    n_ctx = checks.integer(n_ctx, "n_ctx", minimum=1)
    n_tgt = checks.integer(n_tgt, "n_tgt", minimum=0)
    span = checks.real(span, "span", minimum=0, maximum=360)
    rng = np.random.default_rng(k)
    radii = rng.uniform(0.3, 0.6, 3)
    xy = rng.uniform(-1.0, 1.0, (3, 2))
    centers = np.concatenate([xy, radii[:, None]], axis=1)  # resting on the plane
    albedo = rng.uniform(0.15, 1.0, (3, 3))
    light_sq = rng.uniform(0.35, 0.95, 3)  # the plane's colour; dark squares are darker
    checker = np.stack([(1 - CHECKER_CONTRAST) * light_sq, light_sq])
    az_l, el_l = rng.uniform(0, 2 * math.pi), rng.uniform(math.radians(35), math.radians(70))
    light = np.array([math.cos(el_l) * math.cos(az_l), math.cos(el_l) * math.sin(az_l)])
    light = np.append(light, math.sin(el_l))
    a0 = rng.uniform(0, 360)
    steps = np.linspace(0, span, n_ctx) if n_ctx > 1 else np.zeros(1)
    az = np.concatenate([a0 + steps, a0 + rng.uniform(0, span, n_tgt)])
    el = rng.uniform(*ELEVATIONS, n_ctx + n_tgt)
    t = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    return Scene(t(centers), t(radii), t(albedo), t(checker), t(light), az, el)


def look_at(azimuth: float, elevation: float, radius: float = CAM_RADIUS) -> torch.Tensor:
    """The (4, 4) camera-to-world matrix of a camera at (azimuth, elevation) degrees on a sphere
    of ``radius``, looking at the origin; columns: right, up, forward (OpenCV-like, +z forward,
    +y down in the image), camera centre."""
    a, e = math.radians(azimuth), math.radians(elevation)
    o = radius * torch.tensor([math.cos(e) * math.cos(a), math.cos(e) * math.sin(a), math.sin(e)])
    fwd = -o / o.norm()
    right = torch.linalg.cross(fwd, torch.tensor([0.0, 0.0, 1.0]))
    right = right / right.norm()
    down = torch.linalg.cross(fwd, right)
    c2w = torch.eye(4)
    c2w[:3, 0], c2w[:3, 1], c2w[:3, 2], c2w[:3, 3] = right, down, fwd, o
    return c2w


def camera_rays(c2w: torch.Tensor, size: int, fov_deg: float = FOV_DEG):
    """Per-pixel ray origins and unit directions, each (..., size, size, 3), through pixel
    centres of pinhole cameras ``c2w`` (..., 4, 4) with the given field of view."""
    size = checks.integer(size, "size", minimum=1)
    f = 0.5 * size / math.tan(math.radians(fov_deg) / 2)
    px = (torch.arange(size, dtype=c2w.dtype) + 0.5 - size / 2) / f
    yy, xx = torch.meshgrid(px, px, indexing="ij")
    d_cam = torch.stack([xx, yy, torch.ones_like(xx)], dim=-1)  # (H, W, 3)
    rot = c2w[..., None, None, :3, :3]  # (..., 1, 1, 3, 3)
    d = (rot @ d_cam[..., None]).squeeze(-1)
    d = d / d.norm(dim=-1, keepdim=True)
    return c2w[..., None, None, :3, 3].expand_as(d), d


def ray_sphere_depth(o, d, center, radius) -> torch.Tensor:
    """Distance t > 0 along unit rays o + t d to the first hit of the sphere |x - c| = r (inf
    on a miss): t = -b - sqrt(b^2 - (|o - c|^2 - r^2)), b = d . (o - c)."""
    oc = o - center
    b = (d * oc).sum(-1)
    disc = b**2 - ((oc * oc).sum(-1) - radius**2)
    t = -b - torch.sqrt(disc.clamp_min(0))
    return torch.where((disc >= 0) & (t > 1e-4), t, torch.full_like(t, math.inf))


def _first_hit(o, d, scene: Scene):
    """Depth of the nearest sphere and its index (-1 for none), and the plane's depth. Scene
    tensors broadcast against the rays' leading dimensions (a batch of scenes)."""
    ts = torch.stack(
        [ray_sphere_depth(o, d, scene.centers[..., j, :], scene.radii[..., j]) for j in range(3)]
    )
    t_sph, idx = ts.min(0)
    idx = torch.where(torch.isfinite(t_sph), idx, torch.full_like(idx, -1))
    dz = d[..., 2]
    t_pl = torch.where(dz < -1e-6, -o[..., 2] / dz.clamp(max=-1e-6), torch.full_like(dz, math.inf))
    return t_sph, idx, t_pl


def _pick(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """table (..., K, C) broadcast to idx's shape, indexed by idx: (idx.shape, C)."""
    table = table.expand(*idx.shape, *table.shape[-2:])
    return torch.gather(table, -2, idx[..., None, None].expand(*idx.shape, 1, 3)).squeeze(-2)


def render(scene: Scene, o: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Colours (..., 3) of the rays: Lambertian spheres and checker plane lit by ambient plus a
    directional light (hard shadows from the spheres), a sky gradient where nothing is hit. The
    scene's tensors may carry leading batch dimensions that broadcast against the rays'."""
    t_sph, idx, t_pl = _first_hit(o, d, scene)
    hit_sph = t_sph < t_pl
    t = torch.where(hit_sph, t_sph, t_pl)
    p = o + t.nan_to_num(posinf=0.0)[..., None] * d
    i0 = idx.clamp_min(0)
    c = _pick(scene.centers, i0)
    r = _pick(scene.radii[..., None].expand(*scene.radii.shape, 3), i0)
    normal = torch.where(hit_sph[..., None], (p - c) / r, torch.tensor([0.0, 0.0, 1.0]))
    cell = (torch.floor(p[..., 0] / CHECKER) + torch.floor(p[..., 1] / CHECKER)).remainder(2).long()
    base = torch.where(hit_sph[..., None], _pick(scene.albedo, i0), _pick(scene.checker, cell))
    light = scene.light.expand_as(p)
    t_sh, _, _ = _first_hit(p + 1e-3 * normal, light, scene)
    lit = (normal * light).sum(-1).clamp_min(0) * (~torch.isfinite(t_sh)).float()
    rgb = base * (AMBIENT + (1 - AMBIENT) * lit)[..., None]
    sky = torch.tensor([0.55, 0.7, 0.9]) * (0.6 + 0.4 * d[..., 2:3].clamp(0, 1))
    return torch.where(torch.isfinite(t)[..., None], rgb, sky).clamp(0, 1)


def scene_views(k: int, n_ctx: int, n_tgt: int, size: int):
    """Scene ``k`` seen from its ``n_ctx + n_tgt`` cameras: images (V, 3, size, size) in [0, 1]
    and camera-to-world matrices (V, 4, 4), context views first."""
    images, c2w = scene_batch([k], n_ctx, n_tgt, size)
    return images[0], c2w[0]


def scene_batch(ids, n_ctx: int, n_tgt: int, size: int):
    """The views of scenes ``ids``, all rendered at once: images (B, V, 3, H, W) in [0, 1] and
    camera-to-world matrices (B, V, 4, 4), context views first."""
    size = checks.integer(size, "size", minimum=1)
    ss = [make_scene(int(k), n_ctx, n_tgt) for k in ids]
    c2w = torch.stack(
        [
            torch.stack([look_at(float(a), float(e)) for a, e in zip(s.azimuths, s.elevations)])
            for s in ss
        ]
    )
    o, d = camera_rays(c2w, size)  # (B, V, H, W, 3)
    expand = lambda name: torch.stack([getattr(s, name) for s in ss])[:, None, None, None]  # noqa: E731
    batch = Scene(
        *(expand(n) for n in ("centers", "radii", "albedo", "checker", "light")), None, None
    )
    images = render(batch, o, d)
    return images.permute(0, 1, 4, 2, 3).contiguous(), c2w
