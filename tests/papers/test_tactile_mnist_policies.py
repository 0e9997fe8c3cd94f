"""Tests of reprobook.papers.tactile_mnist's policies, predictor and evaluation helpers.

On ap_gym's CircleSquare-v0 (offline) and on a small fake environment of ours with the tactile
keys (sensor_img, sensor_pos (3,), a 3-D inner action): actions stay in the box, the raster path
visits more cells than random, the gradient policy climbs towards the contact, roll-outs are
reproducible, the predictor's loss is the hand-computed mean cross-entropy (and ap_gym's
per-step loss), training is deterministic under a seed, a trained predictor beats chance, and
the accuracy and interval helpers match hand computations and scipy. Fixed seeds throughout.
"""

from __future__ import annotations

import copy
import dataclasses
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import log_softmax

ap_gym = pytest.importorskip("ap_gym")

from reprobook import core  # noqa: E402
from reprobook.papers.tactile_mnist import evaluate as V  # noqa: E402
from reprobook.papers.tactile_mnist import model as M  # noqa: E402
from reprobook.papers.tactile_mnist import policies as P  # noqa: E402

CS_STEP = 0.2  # CircleSquare-v0's max_step_length (normalised units per step)


# --- a fake tactile environment ----------------------------------------------------------------


class FakeTactileEnv(gym.Env):
    """A point sensor over a Gaussian bump, with the tactile env's keys.

    The bump (height 1, width ``sigma``) sits at CENTRES[label]; the sensor image (S, S, 1)
    samples the height on a window of half-width ``half`` around the sensor, rows along y and
    columns along x, mapped to [-1, 1] (2 h - 1). Inner action Box(-1, 1, (3,)): the planar
    part is projected onto the unit ball and scaled by ``max_step``, z is ignored. Reward =
    base reward (-1e-3 |a|) - cross-entropy of the logits; ``step_limit`` steps, then terminated.
    """

    CENTRES = np.array([[0.5, 0.5], [-0.5, -0.5]])

    def __init__(
        self,
        size: int = 8,
        step_limit: int = 16,
        max_step: float = 0.15,
        half: float = 0.2,
        sigma: float = 0.25,
        num_classes: int = 2,
    ):
        self.size, self.step_limit, self.max_step, self.half, self.sigma = (
            size,
            step_limit,
            max_step,
            half,
            sigma,
        )
        self.num_classes = num_classes
        self.observation_space = gym.spaces.Dict(
            {
                "sensor_img": gym.spaces.Box(-1, 1, (size, size, 1), np.float32),
                "sensor_pos": gym.spaces.Box(-1, 1, (3,), np.float32),
                "time_step": gym.spaces.Box(-1, 1, (), np.float32),
            }
        )
        self.action_space = gym.spaces.Dict(
            {
                "action": gym.spaces.Box(-1, 1, (3,), np.float32),
                "prediction": gym.spaces.Box(-np.inf, np.inf, (num_classes,), np.float32),
            }
        )

    def _obs(self):
        offs = np.linspace(-self.half, self.half, self.size)
        ys, xs = np.meshgrid(self.pos[1] + offs, self.pos[0] + offs, indexing="ij")  # rows along y
        c = self.CENTRES[self.label % len(self.CENTRES)]
        h = np.exp(-((xs - c[0]) ** 2 + (ys - c[1]) ** 2) / (2 * self.sigma**2))
        return {
            "sensor_img": (2 * h - 1)[..., None].astype(np.float32),
            "sensor_pos": np.array([*self.pos, 0.0], np.float32),
            "time_step": np.float32(2 * self.t / self.step_limit - 1),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.label = int(self.np_random.integers(self.num_classes))
        self.pos = self.np_random.uniform(-1, 1, 2)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        a = np.asarray(action["action"], dtype=np.float64)[:2]
        n = np.linalg.norm(a)
        if n > 1:
            a = a / n
        self.pos = np.clip(self.pos + self.max_step * a, -1, 1)
        self.t += 1
        loss = -log_softmax(np.asarray(action["prediction"], dtype=np.float64))[self.label]
        base = -1e-3 * float(np.linalg.norm(action["action"]))
        info = {"base_reward": base, "prediction": {"target": np.int64(self.label), "loss": loss}}
        return self._obs(), base - loss, self.t >= self.step_limit, False, info


@pytest.fixture(scope="module")
def circle_square():
    env = ap_gym.make("CircleSquare-v0")
    yield env
    env.close()


def all_policies(env, max_step, step_limit=16):
    return [
        P.make_policy(name, env, max_step=max_step, step_limit=step_limit) for name in P.POLICIES
    ]


# --- adapter -------------------------------------------------------------------------------------


def test_detect_keys_on_both_conventions_and_bad_input(circle_square):
    assert P.detect_keys(circle_square) == P.ObservationKeys("glimpse", "glimpse_pos", "time_step")
    assert P.detect_keys(FakeTactileEnv()) == P.ObservationKeys(
        "sensor_img", "sensor_pos", "time_step"
    )
    with pytest.raises(ValueError, match="image key"):
        P.detect_keys({"pixels": 0, "glimpse_pos": 0, "time_step": 0})
    with pytest.raises(ValueError, match="position key"):
        P.detect_keys({"glimpse": 0, "glimpse_pos": 0, "sensor_pos": 0, "time_step": 0})
    with pytest.raises(ValueError, match="time_step"):
        P.detect_keys({"glimpse": 0, "glimpse_pos": 0})
    with pytest.raises(TypeError):
        P.detect_keys(42)
    assert P.inner_action_space(circle_square).shape == (2,)
    assert P.inner_action_space(FakeTactileEnv()).shape == (3,)


# --- policies ------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["circle_square", "fake"])
def test_policies_stay_inside_the_action_box(which, circle_square):
    env = circle_square if which == "circle_square" else FakeTactileEnv()
    step = CS_STEP if which == "circle_square" else env.max_step
    space = P.inner_action_space(env)
    for pol in all_policies(env, step):
        tr = P.rollout(env, pol, 6, seed=3)
        a = tr.actions
        assert a.shape == (6, 16, space.shape[0])
        assert np.all(a >= space.low - 1e-7) and np.all(a <= space.high + 1e-7), pol.name
        assert np.all(np.linalg.norm(a[..., :2], axis=-1) <= math.sqrt(2) + 1e-6)
        if space.shape[0] == 3:
            assert np.all(a[..., 2] == 0.0), f"{pol.name}: the tactile z component must be 0"
        if pol.name != "random":  # raster and gradient never exceed the unit ball
            assert np.all(np.linalg.norm(a, axis=-1) <= 1 + 1e-5), pol.name


def distinct_cells(positions: np.ndarray, cells: int = 8) -> float:
    """Mean over episodes of the number of distinct cells (of a cells x cells grid on
    [-1, 1]^2) visited."""
    idx = np.clip(((positions[..., :2] + 1) / 2 * cells).astype(int), 0, cells - 1)
    return float(np.mean([len({tuple(c) for c in ep}) for ep in idx]))


def test_raster_visits_more_cells_than_random():
    env = FakeTactileEnv(max_step=0.25)
    raster = P.make_policy("raster", env, max_step=0.25)
    random = P.make_policy("random", env, max_step=0.25)
    n_raster = distinct_cells(P.rollout(env, raster, 30, seed=0).positions)
    n_random = distinct_cells(P.rollout(env, random, 30, seed=0).positions)
    assert n_raster > n_random + 2, (n_raster, n_random)


def test_raster_waypoints_fit_the_budget():
    for budget in (0.9, 3.0, 4.0, 7.5, 12.0):
        wp, n, a = P.raster_waypoints(budget)
        length = np.linalg.norm(np.diff(wp, axis=0), axis=1).sum()
        assert length == pytest.approx(a * (2 * n - 2 / n))
        assert length <= budget + 1e-9
        assert wp.shape == (2 * n, 2) and np.all(np.abs(wp) <= a + 1e-12)
        if a == 1.0:  # the largest n that fits: one more row would not
            assert 2 * (n + 1) - 2 / (n + 1) > budget
    assert P.raster_waypoints(3.0)[1:] == (
        2,
        1.0,
    )  # CircleSquare: 15 steps of 0.2 give a U over 2 rows
    assert P.raster_waypoints(7.5)[1] == 4
    with pytest.raises(ValueError, match="n_rows"):
        P.raster_waypoints(3.0, n_rows=1)
    with pytest.raises(ValueError, match="budget"):
        P.raster_waypoints(-1.0)


def test_raster_follows_its_path_from_the_nearest_corner():
    env = FakeTactileEnv(max_step=0.2)
    pol = P.make_policy("raster", env, max_step=0.2, step_limit=16)
    obs, _ = env.reset(seed=1)
    env.pos = np.array([0.45, 0.55])  # nearest turning point of the U: (0.5, 0.5)
    obs = env._obs()
    rng = np.random.default_rng(0)
    pol.reset(obs, rng)
    assert np.allclose(pol.waypoints[0], [0.5, 0.5])
    path = [env.pos.copy()]
    for _ in range(15):
        obs, *_ = env.step({"action": pol.act(obs, rng), "prediction": np.zeros(2)})
        path.append(env.pos.copy())
    # the U from the nearest turning point: (0.5, 0.5) -> (-0.5, 0.5) -> (-0.5, -0.5) -> (0.5, -0.5)
    corners = np.array([[0.5, 0.5], [-0.5, 0.5], [-0.5, -0.5], [0.5, -0.5]])

    def arc(p):  # arc length along the U of a point on it (None when off the path)
        done = 0.0
        for u, v in zip(corners[:-1], corners[1:]):
            seg = v - u
            s_ = float(np.dot(p - u, seg) / np.dot(seg, seg))
            if -1e-6 <= s_ <= 1 + 1e-6 and np.linalg.norm(u + s_ * seg - p) < 1e-6:
                return done + s_ * np.linalg.norm(seg)
            done += np.linalg.norm(seg)
        return None

    arcs = [arc(p) for p in path[1:]]
    assert all(x is not None for x in arcs), "every position after the first step lies on the U"
    to_start = np.linalg.norm(np.array([0.45, 0.55]) - corners[0])
    assert arcs[0] == pytest.approx(
        0.2 - to_start
    )  # the first step reaches the U and goes on along it
    assert np.allclose(
        np.diff(arcs), 0.2, atol=1e-6
    )  # then exactly one max_step of path per step, round the corners


def test_gradient_policy_climbs_to_the_contact():
    env = FakeTactileEnv(max_step=0.1, sigma=0.3)
    pol = P.make_policy("gradient", env, max_step=0.1)
    tr = P.rollout(env, pol, 10, seed=5)
    centres = FakeTactileEnv.CENTRES[tr.labels]
    d0 = np.linalg.norm(tr.positions[:, 0, :2] - centres, axis=-1)
    d1 = np.linalg.norm(tr.positions[:, -1, :2] - centres, axis=-1)
    assert np.mean(d1) < 0.5 * np.mean(d0), (d0, d1)
    # with the image axes swapped (rows along x) the policy moves the wrong way on this env
    swapped = P.GradientPolicy(P.inner_action_space(env), row_axis=0, max_step=0.1)
    tr2 = P.rollout(env, swapped, 10, seed=5)
    d2 = np.linalg.norm(tr2.positions[:, -1, :2] - centres, axis=-1)
    assert np.mean(d2) > np.mean(d1) + 0.1


def test_gradient_policy_centroid_and_exploration():
    space = gym.spaces.Box(-1, 1, (3,), np.float32)
    pol = P.GradientPolicy(space, explore="centre", max_step=0.2)
    img = np.zeros((5, 5, 1), np.float32)
    img[2, 4] = 1.0  # bright pixel right of the centre (column +2): move +x
    rng = np.random.default_rng(0)
    obs = {
        "sensor_img": img,
        "sensor_pos": np.array([0.3, 0.3, 0.0], np.float32),
        "time_step": np.float32(-1),
    }
    assert np.allclose(pol.act(obs, rng), [1, 0, 0])
    img = np.zeros((5, 5, 1), np.float32)
    img[0, 2] = 1.0  # above the centre (row -2): move -y
    assert np.allclose(pol.act({**obs, "sensor_img": img}, rng), [0, -1, 0])
    flat = {**obs, "sensor_img": np.full((5, 5, 1), 0.7, np.float32)}
    a = pol.act(flat, rng)  # nothing touched: head for the cell centre
    assert (
        np.allclose(a[:2], -np.array([0.3, 0.3]) / np.linalg.norm([0.3, 0.3]), atol=1e-6)
        and a[2] == 0
    )
    near = {**flat, "sensor_pos": np.array([0.1, 0.0, 0.0], np.float32)}
    assert np.allclose(
        pol.act(near, rng), [-0.5, 0, 0], atol=1e-6
    )  # within one step: land on the centre
    randomly = P.GradientPolicy(space, explore="random")
    dirs = np.array([randomly.act(flat, rng) for _ in range(50)])
    assert np.allclose(np.linalg.norm(dirs[:, :2], axis=1), 1, atol=1e-6) and dirs[:, 0].std() > 0.3
    with pytest.raises(ValueError, match="explore"):
        P.GradientPolicy(space, explore="spiral")
    with pytest.raises(ValueError, match="row_axis"):
        P.GradientPolicy(space, row_axis=2)
    with pytest.raises(ValueError, match="max_step"):
        P.RasterPolicy(space, max_step=0.0)
    with pytest.raises(ValueError, match="1-D gymnasium Box"):
        P.RandomPolicy(gym.spaces.Discrete(3))
    with pytest.raises(ValueError, match="unknown policy"):
        P.make_policy("spiral", FakeTactileEnv(), max_step=0.1)


# --- roll-outs -----------------------------------------------------------------------------------


def test_rollout_is_reproducible_and_well_formed(circle_square):
    pol = P.make_policy("gradient", circle_square, max_step=CS_STEP)
    a = P.rollout(circle_square, pol, 4, seed=11)
    b = P.rollout(circle_square, pol, 4, seed=11)
    c = P.rollout(circle_square, pol, 4, seed=12)
    for name in ("images", "positions", "time", "labels", "actions", "base_rewards", "rewards"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert not np.array_equal(a.images, c.images)
    # episode e resets the env with seed + e: the same first observations, shifted by one
    assert np.array_equal(a.images[1:, 0], c.images[:3, 0]) and np.array_equal(
        a.labels[1:], c.labels[:3]
    )
    assert (
        a.images.shape == (4, 16, 5, 5, 1)
        and a.positions.shape == (4, 16, 2)
        and a.labels.dtype == np.int64
    )
    assert np.allclose(
        a.time, np.linspace(-1, 1, 17)[:-1]
    )  # the observation before each of the 16 actions
    assert set(np.unique(a.labels)) <= {0, 1}
    # zero logits: reward = base reward - CE(uniform) in CircleSquare's units
    # (bits: ln 2 / ln 2 = 1)
    assert np.allclose(a.rewards, a.base_rewards - 1.0, atol=1e-6)
    sub = a.subset([2, 0])
    assert np.array_equal(sub.labels, a.labels[[2, 0]]) and len(sub) == 2
    with pytest.raises(ValueError, match="n_episodes"):
        P.rollout(circle_square, pol, 0, seed=0)
    with pytest.raises(TypeError, match="Policy"):
        P.rollout(circle_square, lambda obs, rng: None, 1, seed=0)


def test_rollout_on_a_vector_env_is_reproducible():
    venv = ap_gym.make_vec("CircleSquare-v0", num_envs=4)
    try:
        pol = P.make_policy("raster", venv, max_step=CS_STEP)
        a = P.rollout(venv, pol, 6, seed=2)
        b = P.rollout(venv, pol, 6, seed=2)
        assert a.images.shape == (6, 16, 5, 5, 1) and np.array_equal(a.images, b.images)
        assert np.array_equal(a.actions, b.actions) and np.allclose(
            a.time[0], np.linspace(-1, 1, 17)[:-1]
        )
    finally:
        venv.close()


FIELDS = ("images", "positions", "time", "labels", "actions", "base_rewards", "rewards")


def per_env(pol):
    """A copy of ``pol`` that acts in vector envs through Policy's fallback: a copy of the
    policy per env, each on its own observation (the reference for the batched forms)."""
    fallback = type("PerEnv", (type(pol),), {})
    fallback.reset_batch, fallback.act_batch = P.Policy.reset_batch, P.Policy.act_batch
    clone = copy.copy(pol)
    clone.__class__ = fallback
    return clone


@pytest.mark.parametrize("name", P.POLICIES)
def test_batched_policies_give_bitwise_the_per_env_episodes(name):
    # CircleSquare (2-D actions), and the fake tactile env (3-D actions, "centre" exploration)
    # in a SyncVectorEnv; 9 episodes on 5 and 4 envs leave part of the last batch unused
    fake = [lambda: FakeTactileEnv(max_step=0.15)] * 4
    cases = [
        (lambda: ap_gym.make_vec("CircleSquare-v0", num_envs=5), CS_STEP, {}),
        (lambda: gym.vector.SyncVectorEnv(fake), 0.15, {"explore": "centre"}),
    ]
    for make, step, kwargs in cases:
        venv = make()
        try:
            pol = P.make_policy(name, venv, max_step=step, **(kwargs if name == "gradient" else {}))
            batched = P.rollout(venv, pol, 9, seed=4)
            reference = P.rollout(venv, per_env(pol), 9, seed=4)
        finally:
            venv.close()
        assert batched.meta == reference.meta and len(batched) == 9
        for field in FIELDS:
            a, b = getattr(batched, field), getattr(reference, field)
            assert a.dtype == b.dtype and np.array_equal(a, b), field


def test_direction_batch_is_direction_image_by_image():
    rng = np.random.default_rng(0)
    space = gym.spaces.Box(-1, 1, (2,), np.float32)
    for shape in ((5, 5, 1), (16, 16, 1), (4, 6, 3)):
        images = rng.uniform(0, 1, (40, *shape)).astype(np.float32) ** 3
        images[:3] = 0.5  # flat: nothing to follow
        tent = [np.minimum(np.arange(k), np.arange(k)[::-1]) for k in shape[:2]]
        images[3] = np.outer(*tent)[..., None]  # symmetric about the centre: already centred
        for kwargs in ({}, {"invert": True, "row_axis": 0}):
            pol = P.GradientPolicy(space, **kwargs)
            v, found = pol.direction_batch(images)
            assert v.shape == (40, 2) and not found[:4].any() and found[4:].any()
            for i, image in enumerate(images):
                d = pol.direction(image)
                assert found[i] == (d is not None)
                assert np.array_equal(v[i], np.zeros(2) if d is None else d), (shape, i)


# --- the predictor -------------------------------------------------------------------------------


def tiny_batch(seed=0, e=3, t=4, c=3, image=(5, 5, 1), d=2):
    g = torch.Generator().manual_seed(seed)
    return {
        "images": torch.rand(e, t, *image, generator=g),
        "positions": torch.rand(e, t, d, generator=g) * 2 - 1,
        "time": torch.linspace(-1, 1, t).expand(e, t).clone(),
        "labels": torch.tensor([0, 2, 1][:e]),
    }


@pytest.mark.parametrize("image", [(5, 5, 1), (12, 12, 1)])  # the MLP encoder and the tiny CNN
def test_predictor_loss_is_the_mean_cross_entropy(image):
    model = M.GlimpsePredictor(image, 2, 3, seed=4)
    assert model.uses_cnn == (image[0] * image[1] > 64)
    batch = tiny_batch(image=image)
    logits = (
        model(batch["images"], batch["positions"], batch["time"])
        .detach()
        .numpy()
        .astype(np.float64)
    )
    assert logits.shape == (3, 4, 3)
    labels = batch["labels"].numpy()
    by_hand = []
    for ei in range(3):
        for ti in range(4):
            z = logits[ei, ti]
            by_hand.append(math.log(sum(math.exp(v) for v in z)) - z[labels[ei]])
    assert float(model.loss(batch).detach()) == pytest.approx(np.mean(by_hand), rel=1e-5)
    # per step, the env's loss: ap_gym's cross-entropy
    env_ce = ap_gym.CrossEntropyLossFn().numpy(logits, np.broadcast_to(labels[:, None], (3, 4)))
    steps = M.GlimpsePredictor.step_losses(torch.from_numpy(logits), batch["labels"]).numpy()
    assert np.allclose(steps, env_ce, atol=1e-10)
    # the logits at step t do not depend on later steps (a causal GRU)
    cut = {k: (v[:, :2] if k != "labels" else v) for k, v in batch.items()}
    early = model(cut["images"], cut["positions"], cut["time"]).detach().numpy()
    assert np.allclose(early, logits[:, :2], atol=1e-5)


def test_predictor_bad_inputs():
    with pytest.raises(ValueError, match="image_shape"):
        M.GlimpsePredictor((5, 5), 2, 2)
    with pytest.raises(ValueError, match="num_classes"):
        M.GlimpsePredictor((5, 5, 1), 2, 1)
    model = M.GlimpsePredictor((5, 5, 1), 2, 2)
    b = tiny_batch()
    with pytest.raises(ValueError, match="images must be"):
        model(b["images"][..., 0], b["positions"], b["time"])
    with pytest.raises(ValueError, match="positions must be"):
        model(b["images"], b["positions"][..., :1], b["time"])


def test_input_standardisation():
    model = M.GlimpsePredictor((4, 4, 2), 2, 2)
    rng = np.random.default_rng(0)
    imgs = np.stack([rng.normal(3, 2, (50, 4, 4)), np.full((50, 4, 4), 5.0)], axis=-1)
    model.set_input_stats(imgs)
    assert np.allclose(model.image_mean.numpy(), [imgs[..., 0].mean(), 5.0], atol=1e-5)
    assert np.allclose(
        model.image_std.numpy(), [imgs[..., 0].std(), 1.0], atol=1e-5
    )  # a constant channel keeps 1


@pytest.fixture(scope="module")
def fake_trajs():
    env = FakeTactileEnv(size=8, step_limit=6)
    return P.rollout(env, P.make_policy("random", env, max_step=0.15, step_limit=6), 40, seed=0)


def test_training_is_deterministic_under_a_seed(fake_trajs):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a = M.train_predictor(fake_trajs, 2, epochs=2, seed=3, batch_size=8)
        b = M.train_predictor(fake_trajs, 2, epochs=2, seed=3, batch_size=8)
        c = M.train_predictor(fake_trajs, 2, epochs=2, seed=4, batch_size=8)
    finally:
        torch.set_num_threads(threads)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]) or (
            torch.isnan(sa[k]).any() and torch.allclose(sa[k], sb[k], equal_nan=True)
        ), k
    assert not torch.equal(sa["head.weight"], sc["head.weight"])
    curve = a.training_curve()
    assert list(curve.columns) == ["epoch", *M.CURVE_COLUMNS] and len(curve) == 2
    assert np.all(np.isfinite(curve[["train_loss", "val_loss"]].to_numpy()))
    logits = M.predict_logits(a, fake_trajs)
    assert logits.shape == (40, 6, 2) and np.all(np.isfinite(logits))
    with pytest.raises(ValueError, match="the model expects"):
        M.fit_predictor(M.GlimpsePredictor((5, 5, 1), 3, 2), fake_trajs)
    bad = dataclasses.replace(fake_trajs, labels=fake_trajs.labels + 5)
    with pytest.raises(ValueError, match="labels must lie"):
        M.train_predictor(bad, 2, epochs=1)


def test_training_without_the_memory_fill_gives_the_same_weights(fake_trajs, monkeypatch):
    # fit_predictor skips torch's NaN fill of new tensors; with the fill kept (the context a
    # no-op) the weights and the logits are the same, bit for bit
    import contextlib

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a = M.train_predictor(fake_trajs, 2, epochs=2, seed=3, batch_size=8)
        monkeypatch.setattr(M.core, "unfilled_allocations", contextlib.nullcontext)
        b = M.train_predictor(fake_trajs, 2, epochs=2, seed=3, batch_size=8)
    finally:
        torch.set_num_threads(threads)
    sa, sb = a.state_dict(), b.state_dict()
    for k in sa:
        assert torch.equal(sa[k], sb[k]) or (
            torch.isnan(sa[k]).any() and torch.allclose(sa[k], sb[k], equal_nan=True)
        ), k
    assert np.array_equal(M.predict_logits(a, fake_trajs), M.predict_logits(b, fake_trajs))


def test_the_curve_keeps_the_mean_training_loss_of_each_epoch():
    model = M.GlimpsePredictor((2, 2, 1), 2, 2, epochs=3)
    losses = np.array([1.0, 2.0, 4.0, 0.5, 0.25, 0.75], dtype=np.float32)  # core.fit's steps
    model.record_training_loss(losses, 2)
    np.testing.assert_array_equal(model.curve[:, 0].numpy(), [1.5, 2.25, 0.5])
    with pytest.raises(ValueError, match="steps_per_epoch"):
        model.record_training_loss(losses, 0)


def test_trained_predictor_beats_chance_on_circle_square():
    """A predictor trained on 400 CircleSquare episodes of the gradient policy (vector env,
    10 epochs) is right at the final step on > 70% of 200 fresh episodes (chance 50%; the
    binomial tail of 140/200 under chance is about 1e-8). The random policy's trajectories are
    too uninformative for this at a test's budget (about 0.55 after 1,000 episodes x 30 epochs)."""
    venv = ap_gym.make_vec("CircleSquare-v0", num_envs=50)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pol = P.make_policy("gradient", venv, max_step=CS_STEP)
        train = P.rollout(venv, pol, 400, seed=0)
        test = P.rollout(venv, pol, 200, seed=1000)
        model = M.train_predictor(train, 2, epochs=10, seed=0)
    finally:
        torch.set_num_threads(threads)
        venv.close()
    acc = V.accuracy_by_step(M.predict_logits(model, test), test.labels)
    assert acc[-1] > 0.7, acc
    assert acc[-1] > acc[0]


# --- evaluation ----------------------------------------------------------------------------------


def test_accuracy_by_step_on_hand_made_logits():
    # 4 episodes, 3 steps, 3 classes; labels 0, 1, 2, 2
    logits = np.array(
        [
            [[5, 0, 0], [0, 5, 0], [5, 0, 0]],  # right, wrong, right
            [[0, 0, 5], [0, 5, 0], [0, 5, 0]],  # wrong, right, right
            [[1, 1, 1], [0, 0, 5], [0, 0, 5]],  # tie -> class 0: wrong, right, right
            [[0, 0, 5], [5, 0, 0], [0, 0, 5]],  # right, wrong, right
        ],
        dtype=float,
    )
    labels = np.array([0, 1, 2, 2])
    acc = V.accuracy_by_step(logits, labels)
    assert np.allclose(acc, [0.5, 0.5, 1.0])
    fm = V.final_and_mean_accuracy(logits, labels)
    assert fm.final == 1.0 and fm.mean == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="labels must lie"):
        V.accuracy_by_step(logits, np.array([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="labels must have shape"):
        V.accuracy_by_step(logits, labels[:3])
    with pytest.raises(ValueError, match=r"\(E, T, C\)"):
        V.accuracy_by_step(logits[0], labels)


def test_ordering_check_uses_the_core_t_interval():
    finals = {"gradient": [0.81, 0.86, 0.78, 0.9], "raster": [0.6, 0.7, 0.65, 0.62]}
    out = V.ordering_check(finals, order=("gradient", "raster"), level=0.9)
    iv = out["intervals"]["gradient"]
    assert iv == core.t_interval(finals["gradient"], level=0.9)
    values = np.array(finals["gradient"])
    lo, hi = stats.t.interval(0.9, df=3, loc=values.mean(), scale=stats.sem(values))
    assert (iv.low, iv.high) == (pytest.approx(lo), pytest.approx(hi))
    wider = V.ordering_check(finals, order=("gradient", "raster"), level=0.95)["intervals"]
    assert wider["gradient"].high - wider["gradient"].low > iv.high - iv.low
    with pytest.raises(ValueError, match="at least 2"):
        V.ordering_check({"gradient": [0.5], "raster": [0.4]}, order=("gradient", "raster"))


def test_c2_and_c3_helpers():
    finals = {
        "gradient": [0.95, 0.97, 0.96],
        "raster": [0.80, 0.83, 0.78],
        "random": [0.55, 0.58, 0.52],
    }
    out = V.ordering_check(finals)
    assert out["pairs_held"] == ["gradient > raster", "raster > random"]
    assert out["holds"] and out["ordered"] and out["separated"] and all(g > 0 for g in out["gaps"])
    overlapping = {**finals, "raster": [0.60, 0.83, 0.70]}
    out = V.ordering_check(overlapping)
    assert out["ordered"] and not out["separated"] and not out["holds"]
    assert not V.ordering_check({**finals, "random": [0.9, 0.99, 0.95]})["ordered"]
    with pytest.raises(ValueError, match="missing"):
        V.ordering_check({"gradient": [1, 1]})

    assert V.largest_step_drop([0.5, 0.6, 0.6, 0.9]) == 0.0
    assert V.largest_step_drop([0.5, 0.7, 0.6, 0.9, 0.85]) == pytest.approx(0.1)
    curves = {"a": [[0.5, 0.6, 0.8], [0.5, 0.7, 0.8]], "b": [0.5, 0.47, 0.6]}
    g = V.growth_check(curves)
    assert g["policies"]["a"]["mean_below_final"] and g["policies"]["a"]["largest_drop"] == 0.0
    assert g["policies"]["b"]["largest_drop"] == pytest.approx(0.03)
    assert g["all_below"] and g["largest_drop"] == pytest.approx(0.03)
    assert not V.growth_check({"flat": [0.6, 0.6, 0.6]})["all_below"]  # mean == final is not below
    with pytest.raises(ValueError, match="steps"):
        V.growth_check({"a": [0.5, 0.6], "b": [0.5, 0.6, 0.7]})


def test_paired_differences_and_the_worst_group_interval():
    """C2's per-seed differences, and the simultaneous interval of their smaller mean that
    decides the claim (the core's worst_group_interval, Bonferroni over the two differences)."""
    finals = {
        "gradient": [0.95, 0.97, 0.96],
        "raster": [0.80, 0.83, 0.78],
        "random": [0.55, 0.58, 0.52],
    }
    diffs = V.paired_differences(finals, [("gradient", "raster"), ("raster", "random")])
    assert list(diffs) == ["gradient - raster", "raster - random"]
    np.testing.assert_allclose(diffs["gradient - raster"], [0.15, 0.14, 0.18])
    np.testing.assert_allclose(diffs["raster - random"], [0.25, 0.25, 0.26])
    worst = core.worst_group_interval(diffs, worst="min", level=0.95)
    # each mean's interval at level 1 - 0.05/2, by hand with scipy
    for name, v in diffs.items():
        lo, hi = stats.t.interval(0.975, df=2, loc=np.mean(v), scale=stats.sem(v))
        per = worst.by_group[name]
        assert (per.low, per.high) == (pytest.approx(lo), pytest.approx(hi))
    smallest = worst.interval
    assert worst.group == "gradient - raster"
    assert smallest.estimate == pytest.approx(min(np.mean(v) for v in diffs.values()))
    assert smallest.low == pytest.approx(min(iv.low for iv in worst.by_group.values()))
    assert smallest.high == pytest.approx(min(iv.high for iv in worst.by_group.values()))
    # pairing matters: a raster that varies with the seed as random does keeps a tight difference
    paired = V.paired_differences({"a": [0.6, 0.8, 0.7], "b": [0.5, 0.7, 0.6]}, [("a", "b")])
    iv = core.worst_group_interval(paired).interval
    assert iv.low == pytest.approx(0.1) and iv.high == pytest.approx(0.1)
    with pytest.raises(ValueError, match="same seeds"):
        V.paired_differences({"a": [0.6, 0.8, 0.7], "b": [0.5, 0.7]}, [("a", "b")])
    with pytest.raises(ValueError, match="no per-seed values"):
        V.paired_differences(finals, [("gradient", "learned")])
    with pytest.raises(ValueError, match="empty"):
        V.paired_differences(finals, [])


def test_final_minus_average_by_hand():
    curves = {"a": [[0.5, 0.6, 0.7], [0.5, 0.5, 0.8]], "b": [[0.6, 0.6, 0.6], [0.7, 0.6, 0.5]]}
    d = V.final_minus_average(curves)
    np.testing.assert_allclose(d["a"], [0.1, 0.2])
    np.testing.assert_allclose(d["b"], [0.0, -0.1])
    with pytest.raises(ValueError, match="S >= 2"):
        V.final_minus_average({"a": [0.5, 0.6, 0.7]})
    with pytest.raises(ValueError, match="empty"):
        V.final_minus_average({})


def test_an_interval_over_seeds_is_recorded_with_its_student_t_fields():
    iv = core.t_interval([0.5, 0.7, 0.6], level=0.9)
    assert V.interval_fields(iv) == {
        "mean": iv.estimate,
        "low": iv.low,
        "high": iv.high,
        "se": iv.se,
        "n": 3,
        "level": 0.9,
    }


def test_profiles_are_keyed_by_the_notebooks_stems_and_the_package_reaches_its_modules():
    from conftest import ROOT

    from reprobook.papers import tactile_mnist as tactile

    stems = sorted(p.stem for p in (ROOT / "notebooks" / "10_tactile_mnist").glob("*.ipynb"))
    assert sorted(tactile.config.PROFILES) == stems
    assert tactile.evaluate is V and tactile.interval_fields is V.interval_fields
    with pytest.raises(AttributeError, match="no attribute or submodule 'nonsense'"):
        tactile.nonsense  # noqa: B018


def test_smoke_profile_keeps_what_the_full_notebooks_draw_and_score():
    """The smoke sizes still let the notebooks form intervals over seeds, draw six episodes
    per strategy and run the tactile sensor at the full profile's resolution."""
    from reprobook.papers.tactile_mnist import config

    strategy = core.resolve_notebook(config.PROFILES, "02_where_you_look", "smoke")
    full = config.PROFILES["02_where_you_look"]["full"]
    assert strategy.seeds == 2 and strategy.test_episodes >= 6
    assert strategy.policies == full.policies and strategy.level == full.level
    touch = core.resolve_notebook(config.PROFILES, "03_touching_digits", "smoke")
    assert (
        touch.sensor_resolution
        == 64
        == config.PROFILES["03_touching_digits"]["full"].sensor_resolution
    )
    interface = core.resolve_notebook(config.PROFILES, "01_interface", "smoke")
    assert interface.sensor_resolution == 64 and interface.n_episodes == 2
