"""Synthetic tactile digits: a NumPy stand-in for the Tactile MNIST task (spec item 3).

Paper: "Tactile MNIST: Benchmarking Active Tactile Perception", arXiv 2506.06361. Its
TactileMNIST-v0 task touches 3D-printable MNIST digits (10 x 10 cm) with a simulated GelSight
Mini in a 12 x 12 cm cell, rendered with pyrender; the meshes come from the Hugging Face hub,
which is not reachable here. This module rebuilds the task's interface on digits we can make:

* :func:`height_map`: an 8x8 scikit-learn digit as a smoothed height field (ASSUMED 5 mm relief)
  over a 10 x 10 cm footprint, zero at the border;
* :func:`height_map_volume` (the integral of the field, trapezoidal rule) and
  :func:`triangulated_volume` (the volume of the closed triangulated solid under the
  piecewise-linear surface, by the divergence theorem), two independent computations of one
  volume; :func:`height_map_mesh` and :func:`mesh_volume` are their parts;
* :func:`project_to_unit_ball` and :func:`max_step_length_cm`: the suite's action rule;
* :class:`TactileDigitEnv`: an ``ap_gym.ActiveClassificationEnv`` with the suite's spaces,
  reward, start and termination, and a depth-like "gel indentation" image instead of the
  rendered GelSight image.

Units: lengths in cm, heights in mm, volumes in cm^3.
Everything marked ASSUMED is our choice, not the suite's.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
from ap_gym import ActiveClassificationEnv, ImageSpace
from numpy.typing import ArrayLike
from scipy import ndimage
from scipy.integrate import trapezoid

from reprobook.core import checks

from .envs import DigitsDataset

__all__ = [
    "CELL_CM",
    "FOOTPRINT_CM",
    "GEL_CM",
    "PRESS_MM",
    "RELIEF_MM",
    "LINEAR_VELOCITY_M_S",
    "LINEAR_ACCELERATION_M_S2",
    "TRANSFER_TIME_S",
    "ACTION_REGULARIZATION",
    "max_step_length_cm",
    "project_to_unit_ball",
    "height_map",
    "height_map_volume",
    "height_map_mesh",
    "mesh_volume",
    "triangulated_volume",
    "TactileDigitEnv",
]

CELL_CM = 12.0  # the suite's cell: 12 x 12 cm
FOOTPRINT_CM = 10.0  # MNIST 3D digits are scaled to a 10 x 10 cm square
GEL_CM = 2.0  # ASSUMED square gel, 2 x 2 cm (the GelSight Mini's surface is about 1.9 x 1.4 cm)
PRESS_MM = 1.0  # ASSUMED: the gel is pressed 1 mm into the highest point under it
RELIEF_MM = 5.0  # ASSUMED relief of the synthetic digits
SMOOTH_CM = 0.3  # ASSUMED Gaussian smoothing (standard deviation, cm) of the height field
LINEAR_VELOCITY_M_S = 0.2  # the suite's sensor speed limit
LINEAR_ACCELERATION_M_S2 = 4.0  # the suite's acceleration limit
TRANSFER_TIME_S = 0.2  # the suite's time per step
ACTION_REGULARIZATION = 1e-3  # base reward -1e-3 ||a||


def max_step_length_cm(
    velocity_m_s: float = LINEAR_VELOCITY_M_S,
    acceleration_m_s2: float = LINEAR_ACCELERATION_M_S2,
    dt_s: float = TRANSFER_TIME_S,
) -> float:
    """The longest move in one step, from rest to rest, under speed and acceleration limits.

    A trapezoidal speed profile: accelerate at a to v, cruise, brake at a to a stop within dt.
    If dt >= 2 v / a the distance is v dt - v^2 / a; otherwise the speed limit is never reached
    and it is a dt^2 / 4. The suite's 0.2 m/s, 4 m/s^2 and dt = 0.2 s give
    0.04 - 0.01 = 0.03 m = 3 cm (ASSUMED: that the move starts and ends at rest). Implements
    s_max of eq. `tac-move` of notebooks/10_tactile_mnist/index.md.
    """
    v = checks.real(velocity_m_s, "velocity_m_s", above=0)
    a = checks.real(acceleration_m_s2, "acceleration_m_s2", above=0)
    dt = checks.real(dt_s, "dt_s", above=0)
    metres = v * dt - v * v / a if dt >= 2 * v / a else a * dt * dt / 4
    return 100.0 * metres


def project_to_unit_ball(a: ArrayLike) -> np.ndarray:
    """a / max(1, ||a||) along the last axis: vectors with norm > 1 are rescaled onto the unit
    sphere, the others are returned unchanged (the suite's action rule, before scaling): the
    projection of eq. `tac-move` of notebooks/10_tactile_mnist/index.md."""
    a = np.asarray(a, dtype=np.float64)
    norm = np.linalg.norm(a, axis=-1, keepdims=True)
    return a / np.maximum(norm, 1.0)


# ----------------------------------------------------------------------------------------------
# Height maps and their volumes
# ----------------------------------------------------------------------------------------------


def _check_height_field(h: ArrayLike, name: str = "h") -> np.ndarray:
    h = np.asarray(h, dtype=np.float64)
    if h.ndim != 2 or min(h.shape) < 2:
        raise ValueError(
            f"{name} must be a 2-D array of heights with at least 2 x 2 nodes, got shape {h.shape}"
        )
    if not np.all(np.isfinite(h)) or np.any(h < 0):
        raise ValueError(f"{name} must hold finite, non-negative heights (mm)")
    return h


def _check_footprint(footprint_cm: float) -> float:
    """The footprint's side: a positive length in cm."""
    return checks.real(footprint_cm, "footprint_cm (cm)", above=0)


def height_map(
    image8x8: ArrayLike,
    size: int = 64,
    relief_mm: float = RELIEF_MM,
    smooth: float = SMOOTH_CM,
    footprint_cm: float = FOOTPRINT_CM,
) -> np.ndarray:
    """A digit image as a (size, size) height field in mm over a footprint x footprint square.

    Node (i, j) sits at x_j = -F/2 + j F / (size - 1), y_i = F/2 - i F / (size - 1) (row 0 at the
    top, as in the image). The image (values in [0, 1], any shape; 8x8 for the digits) is padded
    with one pixel of zeros, so that its pixels tile the footprint, sampled bilinearly at the
    nodes, smoothed with a Gaussian of standard deviation ``smooth`` cm (``scipy.ndimage``), and
    scaled: h = relief_mm * value. The border nodes are then set to 0 exactly.

    ASSUMED: the 3D MNIST digits are extruded strokes with steep walls; a smoothed relief of
    5 mm is our stand-in.
    """
    img = np.asarray(image8x8, dtype=np.float64)
    if img.ndim != 2 or min(img.shape) < 2:
        raise ValueError(
            f"image8x8 must be a 2-D image (8 x 8 for the digits), got shape {img.shape}"
        )
    if not np.all(np.isfinite(img)) or img.min() < 0 or img.max() > 1 + 1e-9:
        raise ValueError("image8x8 must hold values in [0, 1] (divide load_digits images by 16)")
    checks.integer(size, "size", minimum=8)
    checks.real(relief_mm, "relief_mm", above=0)
    checks.real(smooth, "smooth (a standard deviation in cm)", minimum=0)
    f = _check_footprint(footprint_cm)
    padded = np.pad(img, 1)  # (r + 2, c + 2): pixel k covers [k, k + 1) in padded pixel units
    rows, cols = padded.shape
    t = np.linspace(0.0, 1.0, size)  # node positions as fractions of the footprint
    # pixel-centre coordinates: the node at fraction t lies at t * n_pixels - 0.5
    rr, cc = np.meshgrid(t * rows - 0.5, t * cols - 0.5, indexing="ij")
    field = ndimage.map_coordinates(padded, [rr, cc], order=1, mode="nearest")
    if smooth > 0:
        sigma_px = smooth * (size - 1) / f
        field = ndimage.gaussian_filter(field, sigma_px, mode="constant", cval=0.0)
    h = float(relief_mm) * np.clip(field, 0.0, None)
    h[0, :] = h[-1, :] = 0.0
    h[:, 0] = h[:, -1] = 0.0
    return h


def height_map_volume(h: ArrayLike, footprint_cm: float = FOOTPRINT_CM) -> float:
    """V = integral of h over the footprint, in cm^3, by the trapezoidal rule on the node grid.

    h is in mm (divided by 10), node spacing F / (n - 1) cm along each axis. Implements the
    integral of eq. `tac-volume` of notebooks/10_tactile_mnist/index.md.
    """
    h = _check_height_field(h)
    f = _check_footprint(footprint_cm)
    dy, dx = f / (h.shape[0] - 1), f / (h.shape[1] - 1)
    return float(trapezoid(trapezoid(h / 10.0, dx=dx, axis=1), dx=dy))


def _boundary_ring(n_rows: int, n_cols: int) -> np.ndarray:
    """Node indices (row-major) around the grid's border, counter-clockwise seen from above
    (rows run towards -y): down the left column, along the bottom row, up the right column,
    back along the top row."""
    left = [(i, 0) for i in range(n_rows - 1)]
    bottom = [(n_rows - 1, j) for j in range(n_cols - 1)]
    right = [(i, n_cols - 1) for i in range(n_rows - 1, 0, -1)]
    top = [(0, j) for j in range(n_cols - 1, 0, -1)]
    return np.array([i * n_cols + j for i, j in left + bottom + right + top], dtype=np.int64)


def height_map_mesh(
    h: ArrayLike, footprint_cm: float = FOOTPRINT_CM
) -> tuple[np.ndarray, np.ndarray]:
    """The closed solid under a height field, as a triangle mesh (vertices in cm, faces).

    Top: the node grid at z = h / 10 cm, each cell split into two triangles along its
    top-left/bottom-right diagonal. Bottom: a fan from a vertex at the footprint's centre (z = 0)
    to the border ring. When the border is not at height 0, vertical walls join the top's
    border to a copy of it at z = 0. Faces are oriented outwards (counter-clockwise seen from
    outside) and every edge is shared by exactly two faces in opposite directions, so the mesh is
    closed and consistently oriented (watertight). Returns (vertices (V, 3) float64, faces (F, 3)
    int64).
    """
    h = _check_height_field(h)
    f = _check_footprint(footprint_cm)
    n, m = h.shape
    x = np.linspace(-f / 2, f / 2, m)
    y = np.linspace(f / 2, -f / 2, n)
    xx, yy = np.meshgrid(x, y)  # (n, m): row i at y_i, column j at x_j
    top = np.stack([xx.ravel(), yy.ravel(), h.ravel() / 10.0], axis=1)
    idx = np.arange(n * m).reshape(n, m)
    a, b = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel()  # (i, j), (i, j + 1)
    c, d = idx[1:, 1:].ravel(), idx[1:, :-1].ravel()  # (i + 1, j + 1), (i + 1, j)
    faces = [np.stack([a, d, c], 1), np.stack([a, c, b], 1)]  # counter-clockwise from above
    ring = _boundary_ring(n, m)
    vertices = [top]
    if np.any(h[ring // m, ring % m] != 0):
        base = top[ring].copy()
        base[:, 2] = 0.0
        base_ring = n * m + np.arange(len(ring))
        u, v = ring, np.roll(ring, -1)
        bu, bv = base_ring, np.roll(base_ring, -1)
        faces += [np.stack([v, u, bu], 1), np.stack([v, bu, bv], 1)]
        vertices.append(base)
        bottom_ring = base_ring
    else:
        bottom_ring = ring
    centre = sum(len(v) for v in vertices)
    vertices.append(np.array([[0.0, 0.0, 0.0]]))
    faces.append(
        np.stack([np.full(len(bottom_ring), centre), np.roll(bottom_ring, -1), bottom_ring], 1)
    )
    return np.concatenate(vertices), np.concatenate(faces).astype(np.int64)


def mesh_volume(vertices: ArrayLike, faces: ArrayLike) -> float:
    """Volume of a closed, outward-oriented triangle mesh: V = sum_f v0 . (v1 x v2) / 6.

    Each face with the origin spans a tetrahedron of signed volume det[v0, v1, v2] / 6; over a
    closed surface the signs cancel outside the solid (divergence theorem with F = r / 3).
    Implements the sum of eq. `tac-volume` of notebooks/10_tactile_mnist/index.md.
    """
    v = np.asarray(vertices, dtype=np.float64)
    fc = np.asarray(faces)
    if v.ndim != 2 or v.shape[1] != 3:
        raise ValueError(f"vertices must have shape (V, 3), got {v.shape}")
    if fc.ndim != 2 or fc.shape[1] != 3 or not np.issubdtype(fc.dtype, np.integer):
        raise ValueError(
            f"faces must be an integer array of shape (F, 3), got {fc.shape} {fc.dtype}"
        )
    if fc.size and (fc.min() < 0 or fc.max() >= len(v)):
        raise ValueError(f"faces index vertices outside [0, {len(v) - 1}]")
    p0, p1, p2 = v[fc[:, 0]], v[fc[:, 1]], v[fc[:, 2]]
    return float(np.einsum("ij,ij->", p0, np.cross(p1, p2)) / 6.0)


def triangulated_volume(h: ArrayLike, footprint_cm: float = FOOTPRINT_CM) -> float:
    """Volume in cm^3 of the closed triangulated solid of :func:`height_map_mesh`.

    Independent of :func:`height_map_volume`: on each grid cell the two triangles give
    A (2 h00 + 2 h11 + h01 + h10) / 6 where the trapezoidal rule gives
    A (h00 + h01 + h10 + h11) / 4; the two agree exactly on planes and closely on smooth fields.
    """
    return mesh_volume(*height_map_mesh(h, footprint_cm))


# ----------------------------------------------------------------------------------------------
# The environment
# ----------------------------------------------------------------------------------------------

_RESET_OPTIONS = ("index", "sensor_xy")


class TactileDigitEnv(ActiveClassificationEnv):
    """Touching a synthetic relief digit with a square gel (ASSUMED stand-in for TactileMNIST-v0).

    Cell and object (cm, origin at the cell's centre). The digit's height field
    (:func:`height_map`, 10 x 10 cm) is placed at the centre of the 12 x 12 cm cell, rotated by
    theta ~ U[-pi/8, pi/8] (the suite's TactileMNIST bound) and shifted by o ~ U[-0.5, 0.5]^2 cm
    (ASSUMED) at reset. Every step the object is perturbed: theta += N(0, 0.05^2) rad and
    o += N(0, 0.1^2) cm per axis (ASSUMED Gaussian; the magnitudes are the defaults of
    tactile-mnist 0.13.0's ``rotation_perturbation_scale`` = 5e-2 and
    ``translation_perturbation_scale`` = 1e-3 m). Outside the footprint the platform is at 0.

    Sensor. Its centre s = p * R with p in [-1, 1]^2 the normalised position and R = 6 - 1 = 5 cm
    (ASSUMED: the whole 2 x 2 cm gel stays inside the cell). Its image samples the surface at
    S x S points of the gel (pixel centres, row 0 towards +y) with
    ``scipy.ndimage.map_coordinates`` (bilinear) and presses the gel ``press_mm`` into the
    highest point under it: indentation d = clip(z - (max z - press), 0, press) and
    ``sensor_img`` = 2 d / press - 1 in [-1, 1] (ASSUMED; a flat patch of platform gives +1
    everywhere, an edge of a stroke gives +1 on the stroke and -1 beside it).

    Spaces. Inner action Box(-1, 1, (3,)) float32; observation Dict(``sensor_img``
    ImageSpace (S, S, 1) in [-1, 1] float32 (S = 32 by default; the suite's is 64 x 64 x 3),
    ``sensor_pos`` Box(-1, 1, (3,)), ``time_step`` Box(-1, 1, ())); prediction LogitSpace(10).

    Dynamics (the suite's rules). a is projected onto the unit ball
    (:func:`project_to_unit_ball`) and scaled by the largest step, 3 cm
    (:func:`max_step_length_cm`), i.e. p_xy <- clip(p_xy + (3 / R) a_xy, -1, 1); the z component
    is ignored, as the sensor is lowered until it touches. ``sensor_pos`` z reports where it
    stopped: 2 max z / relief - 1 (ASSUMED; -1 on the platform, +1 on the highest relief). The
    start is p ~ U([-1, 1]^2) x {0}.

    Reward and loss. Base reward -1e-3 ||proj(a)|| (of the projected 3-D action, ASSUMED);
    the loss is ``ActiveClassificationEnv``'s own (ap_gym's cross-entropy normalised by
    log 10), applied by ``ActivePerceptionEnv.step``: r = base - loss. ``info["prediction"]
    ["target"]`` is the digit's true class.

    Time. After t steps ``time_step`` = 2 t / T - 1 (-1 at reset, +1 at the last step), and
    step T (``step_limit``, 16) returns ``terminated=True, truncated=False`` -- as measured on
    ap_gym's CircleSquare-v0. A step after that raises (call ``reset``). Flags are Python
    booleans.

    Resets are seeded through ``self.np_random``: ``reset(seed=s)`` draws the digit, pose and
    start, so the same seed gives the same first observation. ``options`` may fix ``"index"``
    (the digit's index in the split) and ``"sensor_xy"`` (the normalised start).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        split: str = "train",
        *,
        step_limit: int = 16,
        sensor_resolution: int = 32,
        dataset: DigitsDataset | None = None,
        height_map_size: int = 64,
        relief_mm: float = RELIEF_MM,
        smooth_cm: float = SMOOTH_CM,
        press_mm: float = PRESS_MM,
        gel_cm: float = GEL_CM,
        cell_cm: float = CELL_CM,
        footprint_cm: float = FOOTPRINT_CM,
        max_rotation: float = math.pi / 8,
        max_offset_cm: float = 0.5,
        jitter_rad: float = 0.05,
        jitter_cm: float = 0.1,
        render_mode: str | None = "rgb_array",
    ):
        checks.integer(step_limit, "step_limit", minimum=1)
        checks.integer(sensor_resolution, "sensor_resolution", minimum=2)
        checks.integer(height_map_size, "height_map_size", minimum=8)
        positive = dict(
            relief_mm=relief_mm,
            press_mm=press_mm,
            gel_cm=gel_cm,
            cell_cm=cell_cm,
            footprint_cm=footprint_cm,
        )
        for name, value in positive.items():
            checks.real(value, name, above=0)
        non_negative = dict(
            smooth_cm=smooth_cm,
            max_rotation=max_rotation,
            max_offset_cm=max_offset_cm,
            jitter_rad=jitter_rad,
            jitter_cm=jitter_cm,
        )
        for name, value in non_negative.items():
            checks.real(value, name, minimum=0)
        if gel_cm >= cell_cm:
            raise ValueError(f"gel_cm ({gel_cm}) must be smaller than cell_cm ({cell_cm})")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        if dataset is None:
            dataset = DigitsDataset(split)
        elif not isinstance(dataset, DigitsDataset):
            raise TypeError(f"dataset must be a DigitsDataset, got {type(dataset).__name__}")

        super().__init__(
            num_classes=10, inner_action_space=gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        )
        self.dataset = dataset
        self.step_limit = int(step_limit)
        self.sensor_resolution = int(sensor_resolution)
        self.height_map_size = int(height_map_size)
        self.relief_mm, self.smooth_cm, self.press_mm = (
            float(relief_mm),
            float(smooth_cm),
            float(press_mm),
        )
        self.gel_cm, self.cell_cm, self.footprint_cm = (
            float(gel_cm),
            float(cell_cm),
            float(footprint_cm),
        )
        self.max_rotation, self.max_offset_cm = float(max_rotation), float(max_offset_cm)
        self.jitter_rad, self.jitter_cm = float(jitter_rad), float(jitter_cm)
        self.render_mode = render_mode
        # R: |s| <= R keeps the gel in the cell
        self.sensor_range_cm = self.cell_cm / 2 - self.gel_cm / 2
        self.max_step_cm = max_step_length_cm()
        self.max_step_norm = self.max_step_cm / self.sensor_range_cm  # 3 / 5 = 0.6 by default
        s = self.sensor_resolution
        self.observation_space = gym.spaces.Dict(
            {
                "sensor_img": ImageSpace(s, s, 1, dtype=np.float32, low=-1.0, high=1.0),
                "sensor_pos": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
                "time_step": gym.spaces.Box(-1.0, 1.0, (), np.float32),
            }
        )
        # gel sample offsets (cm) of the pixel centres, row 0 towards +y
        k = (np.arange(s) + 0.5) / s * 2.0 - 1.0
        self._gel_dx, self._gel_dy = np.meshgrid(
            (self.gel_cm / 2) * k, -(self.gel_cm / 2) * k
        )  # (S, S) each
        self._t: int | None = None
        self._done = False
        self._index = self._label = None
        self._h: np.ndarray | None = None
        self._theta = 0.0
        self._offset = np.zeros(2)
        self._pos = np.zeros(3)
        self._trail: list[np.ndarray] = []

    # -- geometry -------------------------------------------------------------------------------

    def digit_height_map(self, index: int) -> np.ndarray:
        """The height field (mm) of digit ``index`` of the split (:func:`height_map`)."""
        return height_map(
            self.dataset.images8[index],
            self.height_map_size,
            self.relief_mm,
            self.smooth_cm,
            self.footprint_cm,
        )

    def surface(self, x_cm: np.ndarray, y_cm: np.ndarray) -> np.ndarray:
        """Height (mm) of the current scene at cell points (cm): the placed digit, 0 elsewhere.

        A point w maps to the object's frame as u = R(-theta)(w - o); node (i, j) of the field
        sits at u = (-F/2 + j dx, F/2 - i dx), dx = F / (n - 1).
        """
        if self._h is None:
            raise RuntimeError("call reset() first: no digit is placed yet")
        cos, sin = math.cos(self._theta), math.sin(self._theta)
        wx, wy = np.asarray(x_cm) - self._offset[0], np.asarray(y_cm) - self._offset[1]
        ux, uy = cos * wx + sin * wy, -sin * wx + cos * wy
        n = self._h.shape[0]
        spacing = self.footprint_cm / (n - 1)
        cols = (ux + self.footprint_cm / 2) / spacing
        rows = (self.footprint_cm / 2 - uy) / spacing
        return ndimage.map_coordinates(self._h, [rows, cols], order=1, mode="constant", cval=0.0)

    def _observe(self) -> dict[str, np.ndarray]:
        """The observation at the sensor's position: the gel's indentation image, where the
        sensor stopped, and the time. Implements eq. `tac-indent` of
        notebooks/10_tactile_mnist/index.md."""
        cx, cy = self._pos[:2] * self.sensor_range_cm  # the sensor's centre in the cell, cm
        z = self.surface(cx + self._gel_dx, cy + self._gel_dy)  # (S, S) surface under the gel, mm
        top = float(z.max())  # the gel is lowered until it touches the highest point
        # eq. tac-indent: pressed delta = press_mm into it, d = clip(z - (max z - delta), 0, delta)
        indentation = np.clip(z - (top - self.press_mm), 0.0, self.press_mm)
        # eq. tac-indent: the image 2 d / delta - 1 in [-1, 1], one channel
        img = (2.0 * indentation / self.press_mm - 1.0).astype(np.float32)[..., None]
        self._pos[2] = min(1.0, 2.0 * top / self.relief_mm - 1.0)  # where it stopped, in [-1, 1]
        return {
            "sensor_img": img,
            "sensor_pos": self._pos.astype(np.float32),
            # 2 t / T - 1: -1 at reset, +1 after the last step
            "time_step": np.array(2.0 * self._t / self.step_limit - 1.0, dtype=np.float32),
        }

    # -- gymnasium API --------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = {} if options is None else dict(options)
        unknown = sorted(set(options) - set(_RESET_OPTIONS))
        if unknown:
            raise ValueError(f"unknown reset options {unknown}; allowed: {list(_RESET_OPTIONS)}")
        rng = self.np_random
        index = int(rng.integers(len(self.dataset)))
        theta = rng.uniform(-self.max_rotation, self.max_rotation)
        offset = rng.uniform(-self.max_offset_cm, self.max_offset_cm, size=2)
        xy = rng.uniform(-1.0, 1.0, size=2)
        if "index" in options:
            index = int(options["index"])
            if not 0 <= index < len(self.dataset):
                raise ValueError(
                    f"options['index'] must be in [0, {len(self.dataset) - 1}], "
                    f"got {options['index']!r}"
                )
        if "sensor_xy" in options:
            xy = np.asarray(options["sensor_xy"], dtype=np.float64)
            if xy.shape != (2,) or not np.all(np.abs(xy) <= 1):
                raise ValueError(
                    f"options['sensor_xy'] must be 2 numbers in [-1, 1], "
                    f"got {options['sensor_xy']!r}"
                )
        self._index, self._label = index, int(self.dataset.labels[index])
        self._h = self.digit_height_map(index)
        self._theta, self._offset = float(theta), offset.astype(np.float64)
        self._pos = np.array([xy[0], xy[1], 0.0])
        self._t, self._done = 0, False
        obs = self._observe()
        self._trail = [self._pos[:2].copy()]
        info = {"index": index, "source_index": int(self.dataset.indices[index])}
        return obs, info

    def _step(self, action: np.ndarray, prediction: np.ndarray):
        """One move: eq. `tac-move` for the sensor and the base reward of eq. `tac-reward`
        (notebooks/10_tactile_mnist/index.md); ap_gym's ``step`` subtracts the loss."""
        if self._t is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError(
                f"the episode ended at the step limit ({self.step_limit}); call reset()"
            )
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (3,) or not np.all(np.isfinite(a)):
            raise ValueError(f"the inner action must be 3 finite numbers, got shape {a.shape}")
        pred = np.asarray(prediction, dtype=np.float64)
        if pred.shape != (10,) or not np.all(np.isfinite(pred)):
            raise ValueError(f"the prediction must be 10 finite logits, got shape {pred.shape}")
        a_proj = project_to_unit_ball(a)
        self._pos[:2] = np.clip(self._pos[:2] + self.max_step_norm * a_proj[:2], -1.0, 1.0)
        rng = self.np_random
        self._theta += float(rng.normal(0.0, self.jitter_rad)) if self.jitter_rad > 0 else 0.0
        if self.jitter_cm > 0:
            self._offset = self._offset + rng.normal(0.0, self.jitter_cm, size=2)
        self._t += 1
        obs = self._observe()
        self._trail.append(self._pos[:2].copy())
        base_reward = -ACTION_REGULARIZATION * float(np.linalg.norm(a_proj))
        terminated = self._t >= self.step_limit
        self._done = terminated
        return obs, base_reward, bool(terminated), False, {}, np.array(self._label, dtype=np.int64)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, float(reward), terminated, truncated, info

    # -- inspection and rendering ---------------------------------------------------------------

    @property
    def current_index(self) -> int | None:
        """Index in the split of the digit on the platform (None before the first reset)."""
        return self._index

    @property
    def current_label(self) -> int | None:
        """True class of the digit on the platform."""
        return self._label

    @property
    def current_height_map(self) -> np.ndarray | None:
        """Height field (mm) of the digit on the platform, in its own frame (a copy)."""
        return None if self._h is None else self._h.copy()

    @property
    def trail(self) -> np.ndarray:
        """Normalised sensor positions visited this episode, (t + 1, 2)."""
        return np.array(self._trail).reshape(-1, 2)

    def render(self, pixels_per_cm: int = 20) -> np.ndarray | None:
        """An RGB image (H, W, 3) uint8 of the cell seen from above: the relief in grey levels
        (dark = high), the trail of sensor centres in blue and the gel's square in red."""
        if self.render_mode is None:
            return None
        if self._h is None:
            raise RuntimeError("call reset() before render()")
        from PIL import Image, ImageDraw

        n_px = int(round(self.cell_cm * pixels_per_cm))
        centres = (np.arange(n_px) + 0.5) / pixels_per_cm - self.cell_cm / 2
        xs, ys = np.meshgrid(centres, -centres)  # row 0 at the top (+y)
        relief = self.surface(xs, ys) / self.relief_mm
        grey = (235 - 175 * np.clip(relief, 0, 1)).astype(np.uint8)
        img = Image.fromarray(np.stack([grey] * 3, axis=-1))
        draw = ImageDraw.Draw(img)

        def to_px(p_norm):
            x, y = p_norm[0] * self.sensor_range_cm, p_norm[1] * self.sensor_range_cm
            return ((x + self.cell_cm / 2) * pixels_per_cm, (self.cell_cm / 2 - y) * pixels_per_cm)

        pts = [to_px(p) for p in self._trail]
        if len(pts) > 1:
            draw.line(pts, fill=(40, 90, 220), width=2)
        for p in pts:
            draw.ellipse([p[0] - 2, p[1] - 2, p[0] + 2, p[1] + 2], fill=(40, 90, 220))
        cx, cy = pts[-1]
        half = self.gel_cm / 2 * pixels_per_cm
        draw.rectangle([cx - half, cy - half, cx + half, cy + half], outline=(220, 40, 40), width=2)
        return np.asarray(img)
