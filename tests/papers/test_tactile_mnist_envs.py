"""Tests of reprobook.papers.tactile_mnist.envs and .tactile: the offline environments of
chapter 10.

Exact properties: the action's projection onto the unit ball and the 3 cm step, the reward
identity r = base - loss on random rollouts of four environments, time_step from -1 to 1,
termination exactly at the step limit, seeded resets, the true labels of the underlying digits,
the geometry of the placed height field, the height-field volume against the triangulated solid
and a closed form, the mesh being closed and outward-oriented, Gymnasium's check_env, clear
errors on bad input, and glimpses computed for all environments at once being bitwise ap_gym's.
"""

from __future__ import annotations

import math

import ap_gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from sklearn.datasets import load_digits

from reprobook.papers.tactile_mnist.envs import (
    DigitsDataset,
    batched_glimpses,
    interface_report,
    make_digits_glimpse_env,
    make_digits_glimpse_vector_env,
)
from reprobook.papers.tactile_mnist.tactile import (
    TactileDigitEnv,
    height_map,
    height_map_mesh,
    height_map_volume,
    max_step_length_cm,
    mesh_volume,
    project_to_unit_ball,
    triangulated_volume,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def digits():
    return load_digits()


@pytest.fixture(scope="module")
def train_set():
    return DigitsDataset("train")


def make_env(name: str, dataset: DigitsDataset | None = None):
    if name == "digits":
        return make_digits_glimpse_env(dataset=dataset)
    if name == "tactile":
        return TactileDigitEnv(dataset=dataset)
    return ap_gym.make(name)


def random_action(env, rng: np.random.Generator) -> dict[str, np.ndarray]:
    inner = env.action_space["action"].shape
    k = env.action_space["prediction"].shape
    return {
        "action": rng.uniform(-1.5, 1.5, inner).astype(np.float32),
        "prediction": rng.normal(size=k).astype(np.float32),
    }


# ---------------------------------------------------------------------------------------------
# The dataset
# ---------------------------------------------------------------------------------------------


def test_digits_split_is_a_fixed_partition(digits, train_set):
    test_set = DigitsDataset("test")
    assert (len(train_set), len(test_set)) == (1438, 359)
    both = np.concatenate([train_set.indices, test_set.indices])
    assert np.array_equal(np.sort(both), np.arange(1797))
    assert np.array_equal(DigitsDataset("train").indices, train_set.indices)
    assert not np.array_equal(DigitsDataset("train", seed=1).indices, train_set.indices)
    # images and labels stay aligned with load_digits
    assert np.array_equal(train_set.labels, digits.target[train_set.indices])
    assert np.array_equal(train_set.images8 * 16, digits.images[train_set.indices])
    assert train_set.images.shape == (1438, 28, 28, 1) and train_set.images.dtype == np.float32
    assert 0.0 <= train_set.images.min() and train_set.images.max() <= 1.0
    # the upsampled image keeps the digit's mass where it was: block means track the 8x8 pixels
    big = train_set.images[0, :, :, 0]
    coarse = big.reshape(4, 7, 4, 7).mean(axis=(1, 3))
    small = train_set.images8[0].reshape(4, 2, 4, 2).mean(axis=(1, 3))
    assert np.corrcoef(coarse.ravel(), small.ravel())[0, 1] > 0.95


# ---------------------------------------------------------------------------------------------
# Action rule
# ---------------------------------------------------------------------------------------------


def test_projection_onto_the_unit_ball():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(500, 3)) * rng.uniform(0.01, 3.0, size=(500, 1))
    p = project_to_unit_ball(a)
    norms = np.linalg.norm(a, axis=1)
    outside = norms > 1
    assert outside.any() and (~outside).any()
    assert np.allclose(np.linalg.norm(p[outside], axis=1), 1.0)
    assert np.allclose(p[outside], a[outside] / norms[outside, None])
    assert np.array_equal(p[~outside], a[~outside])


def test_largest_step_is_three_cm():
    assert max_step_length_cm() == pytest.approx(3.0)  # 0.2 m/s, 4 m/s^2, 0.2 s, rest to rest
    assert max_step_length_cm(1.0, 4.0, 0.2) == pytest.approx(
        100 * 4.0 * 0.04 / 4
    )  # speed limit not reached


def test_tactile_step_moves_by_the_projected_action(train_set):
    env = TactileDigitEnv(dataset=train_set)
    assert env.max_step_norm == pytest.approx(3.0 / 5.0)
    zero = np.zeros(10, np.float32)
    for a in ([2.0, 0.0, 1.0], [0.3, -0.2, 0.5], [0.0, 0.0, 5.0]):
        a = np.array(a, np.float32)
        obs0, _ = env.reset(seed=1, options={"sensor_xy": (0.1, -0.2)})
        obs1, _, _, _, info = env.step({"action": a, "prediction": zero})
        expected = np.array([0.1, -0.2]) + 0.6 * project_to_unit_ball(a.astype(np.float64))[:2]
        assert np.allclose(obs1["sensor_pos"][:2], expected, atol=1e-6)  # z is ignored
        assert info["base_reward"] == pytest.approx(-1e-3 * np.linalg.norm(project_to_unit_ball(a)))
    env.reset(seed=1, options={"sensor_xy": (0.9, 0.9)})
    obs, *_ = env.step({"action": np.array([1, 1, 0], np.float32), "prediction": zero})
    assert np.allclose(obs["sensor_pos"][:2], 1.0)  # clipped to the cell


# ---------------------------------------------------------------------------------------------
# The interface: reward identity, time, termination, seeds
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["digits", "tactile", "CircleSquare-v0", "LightDark-v0"])
def test_reward_identity_on_random_rollouts(name, train_set):
    env = make_env(name, train_set if name in ("digits", "tactile") else None)
    report = interface_report(env, n_episodes=3, seed=0)
    roll = report["rollouts"]
    assert roll["max_reward_residual"] < 1e-6
    assert roll["terminated_at_end"] + roll["truncated_at_end"] == 3 and roll["cut"] == 0
    assert report["reset_deterministic"] and report["different_seeds_differ"]
    if name != "LightDark-v0":  # classification: ap_gym's loss is the cross-entropy over log K
        assert roll["max_loss_vs_ce_over_logk"] < 1e-5
        assert (
            roll["all_end_at_limit"]
            and roll["time_step_first"] == [-1.0]
            and roll["time_step_last"] == [1.0]
        )


@pytest.mark.parametrize("name", ["digits", "tactile", "CircleSquare-v0"])
def test_time_step_runs_from_minus_one_to_one(name, train_set):
    env = make_env(name, train_set if name in ("digits", "tactile") else None)
    rng = np.random.default_rng(3)
    obs, _ = env.reset(seed=3)
    times = [float(obs["time_step"])]
    done = False
    while not done:
        obs, _, terminated, truncated, _ = env.step(random_action(env, rng))
        times.append(float(obs["time_step"]))
        done = terminated or truncated
    assert np.allclose(times, np.linspace(-1.0, 1.0, 17), atol=1e-7)


@pytest.mark.parametrize("name", ["digits", "tactile"])
@pytest.mark.parametrize("limit", [5, 16])
def test_termination_exactly_at_the_step_limit(name, limit, train_set):
    env = (
        make_digits_glimpse_env(step_limit=limit, dataset=train_set)
        if name == "digits"
        else TactileDigitEnv(step_limit=limit, dataset=train_set)
    )
    rng = np.random.default_rng(limit)
    for episode in range(2):
        env.reset(seed=episode)
        for t in range(1, limit + 1):
            _, reward, terminated, truncated, _ = env.step(random_action(env, rng))
            assert (
                type(terminated) is bool and type(truncated) is bool and isinstance(reward, float)
            )
            assert terminated == (t == limit) and truncated is False
    if name == "tactile":
        with pytest.raises(RuntimeError, match="call reset"):
            env.step(random_action(env, rng))


@pytest.mark.parametrize("name", ["digits", "tactile"])
def test_same_seed_same_first_observation_and_trajectory(name, train_set):
    env = make_env(name, train_set)

    def episode(seed):
        rng = np.random.default_rng(0)
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for _ in range(16):
            out.append(env.step(random_action(env, rng))[0])
        return out

    a, b, c = episode(7), episode(7), episode(8)
    for key in a[0]:
        assert all(np.array_equal(x[key], y[key]) for x, y in zip(a, b))
    image_key = "glimpse" if name == "digits" else "sensor_img"
    assert not np.array_equal(
        a[0]["glimpse_pos" if name == "digits" else "sensor_pos"],
        c[0]["glimpse_pos" if name == "digits" else "sensor_pos"],
    )
    assert a[0][image_key].dtype == np.float32


# ---------------------------------------------------------------------------------------------
# True labels and geometry
# ---------------------------------------------------------------------------------------------


def test_digits_env_reports_the_true_labels(digits, train_set):
    env = make_digits_glimpse_env(dataset=train_set)
    module = env.get_wrapper_attr("image_perception_module")
    rng = np.random.default_rng(0)
    seen = set()
    for seed in range(30):
        _, info0 = env.reset(seed=seed)
        index = int(info0["index"])
        assert np.array_equal(
            module.current_images[0], train_set.images[index]
        )  # the digit shown...
        _, _, _, _, info = env.step(random_action(env, rng))
        target = int(info["prediction"]["target"])
        assert (
            target == digits.target[train_set.indices[index]]
        )  # ...is the one whose label is reported
        seen.add(target)
    assert len(seen) >= 8


def test_tactile_env_reports_the_true_labels(digits, train_set):
    env = TactileDigitEnv(dataset=train_set)
    rng = np.random.default_rng(1)
    for seed in range(20):
        _, info0 = env.reset(seed=seed)
        source = info0["source_index"]
        assert source == train_set.indices[env.current_index]
        assert np.allclose(env.current_height_map, height_map(digits.images[source] / 16.0))
        _, _, _, _, info = env.step(random_action(env, rng))
        assert int(info["prediction"]["target"]) == digits.target[source] == env.current_label


def test_tactile_surface_places_the_height_field(train_set):
    # an odd grid puts a node at the centre; rotate and shift the digit, then read nodes back
    env = TactileDigitEnv(
        dataset=train_set,
        height_map_size=65,
        max_rotation=0.3,
        max_offset_cm=1.0,
        jitter_rad=0.0,
        jitter_cm=0.0,
    )
    env.reset(seed=5, options={"index": 11})
    h = env.current_height_map
    theta, (ox, oy) = env._theta, env._offset
    i, j = np.meshgrid(np.arange(0, 65, 4), np.arange(0, 65, 4), indexing="ij")
    ux, uy = -5.0 + j * 10.0 / 64, 5.0 - i * 10.0 / 64
    wx = math.cos(theta) * ux - math.sin(theta) * uy + ox
    wy = math.sin(theta) * ux + math.cos(theta) * uy + oy
    assert np.allclose(env.surface(wx, wy), h[i, j], atol=1e-9)
    assert env.surface(np.array([5.9]), np.array([-5.9]))[0] == 0.0  # the bare platform


def test_tactile_image_is_the_gel_indentation(train_set):
    env = TactileDigitEnv(
        dataset=train_set, max_rotation=0.0, max_offset_cm=0.0, jitter_rad=0.0, jitter_cm=0.0
    )
    obs, _ = env.reset(
        seed=0, options={"sensor_xy": (1.0, 1.0)}
    )  # gel over the corner: platform only
    assert obs["sensor_img"].min() > 0.95 and obs["sensor_pos"][2] < -0.95
    found = False
    for x in np.linspace(-0.6, 0.6, 7):  # somewhere over the digit the image shows an edge
        for y in np.linspace(-0.6, 0.6, 7):
            obs, _ = env.reset(seed=0, options={"index": 0, "sensor_xy": (x, y)})
            img = obs["sensor_img"][..., 0]
            assert img.min() >= -1.0 and img.max() <= 1.0
            if img.max() > 0.99 and img.min() < -0.99:
                found = True
                cx, cy = x * 5.0, y * 5.0
                k = (np.arange(32) + 0.5) / 32 * 2 - 1
                z = env.surface(cx + k[None, :], cy - k[:, None])
                expected = 2 * np.clip(z - (z.max() - 1.0), 0, 1) - 1
                assert np.allclose(img, expected, atol=1e-6)
                assert obs["sensor_pos"][2] == pytest.approx(2 * z.max() / 5.0 - 1, abs=1e-6)
    assert found


# ---------------------------------------------------------------------------------------------
# Volumes and the mesh
# ---------------------------------------------------------------------------------------------


def closed_and_oriented(faces: np.ndarray) -> bool:
    """Every directed edge appears once and its reverse once: a closed, consistently oriented
    mesh."""
    edges = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    directed = {tuple(e) for e in edges}
    return len(directed) == len(edges) and all((b, a) in directed for a, b in directed)


def test_height_map_volume_matches_the_triangulated_solid(train_set):
    for k in range(0, 1438, 97):
        h = height_map(train_set.images8[k])
        assert h.shape == (64, 64) and h.max() <= 5.0 + 1e-12
        assert np.all(h[[0, -1], :] == 0) and np.all(h[:, [0, -1]] == 0)
        v_int, v_tri = height_map_volume(h), triangulated_volume(h)
        assert v_int > 1.0
        assert abs(v_int - v_tri) / v_int < 0.01
    vertices, faces = height_map_mesh(h)
    assert closed_and_oriented(faces)


def test_volumes_against_closed_forms():
    # paraboloid cap of radius a = 4 cm and height H = 5 mm: V = pi a^2 H / 2
    n, f = 129, 10.0
    x = np.linspace(-f / 2, f / 2, n)
    xx, yy = np.meshgrid(x, x)
    h = np.maximum(0.0, 5.0 * (1 - (xx**2 + yy**2) / 16.0))
    exact = math.pi * 16.0 * 0.5 / 2
    assert height_map_volume(h, f) == pytest.approx(exact, rel=0.01)
    assert triangulated_volume(h, f) == pytest.approx(exact, rel=0.01)
    # a slab with its border above 0 needs the side walls: both rules are exact on planes
    slab = np.full((9, 13), 3.0)
    assert height_map_volume(slab, 4.0) == pytest.approx(0.3 * 16.0, rel=1e-12)
    assert triangulated_volume(slab, 4.0) == pytest.approx(0.3 * 16.0, rel=1e-12)
    vertices, faces = height_map_mesh(slab, 4.0)
    assert closed_and_oriented(faces)
    assert mesh_volume(vertices, faces[:, ::-1]) == pytest.approx(
        -0.3 * 16.0
    )  # inward faces: negative


# ---------------------------------------------------------------------------------------------
# Gymnasium's checker, rendering, errors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["digits", "tactile"])
def test_check_env_passes(name, train_set):
    env = make_env(name, train_set)
    check_env(env)  # raises on failure
    assert interface_report(env, n_episodes=1)["check_env"]["passed"]


def test_interface_report_names_the_failing_check():
    report = interface_report(ap_gym.make("LightDark-v0"), n_episodes=2)
    assert set(report["spaces"]["observation"]) == {"noisy_position", "time_step"}
    assert report["step_limit"] == 50
    # ap-gym 0.7.1 under gymnasium 1.4: a wrapper cannot be rebuilt from the registered spec
    assert not report["check_env"]["passed"]
    assert report["check_env"]["error"] and report["check_env"]["parts"]["remake_from_spec"] != "ok"
    assert report["check_env"]["parts"]["check_step_determinism"] == "ok"


def test_render_shows_the_cell(train_set):
    env = TactileDigitEnv(dataset=train_set)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(3):
        env.step(random_action(env, rng))
    frame = env.render()
    assert frame.shape == (240, 240, 3) and frame.dtype == np.uint8
    assert env.trail.shape == (4, 2)


def test_bad_input_raises_clear_errors(train_set):
    with pytest.raises(ValueError, match="split must be one of"):
        DigitsDataset("val")
    with pytest.raises(ValueError, match="step_limit"):
        make_digits_glimpse_env(step_limit=0, dataset=train_set)
    with pytest.raises(ValueError, match="sensor_size"):
        make_digits_glimpse_env(sensor_size=(40, 40), dataset=train_set)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        height_map(np.full((8, 8), 2.0))
    with pytest.raises(ValueError, match="2-D"):
        height_map(np.ones(8))
    with pytest.raises(ValueError, match="non-negative"):
        height_map_volume(-np.ones((4, 4)))
    with pytest.raises(ValueError, match="faces"):
        mesh_volume(np.zeros((3, 3)), np.array([[0, 1, 3]]))
    with pytest.raises(ValueError, match="sensor_resolution"):
        TactileDigitEnv(sensor_resolution=1, dataset=train_set)
    env = TactileDigitEnv(dataset=train_set)
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"action": np.zeros(3, np.float32), "prediction": np.zeros(10, np.float32)})
    with pytest.raises(ValueError, match="allowed"):
        env.reset(seed=0, options={"digit": 3})
    env.reset(seed=0)
    with pytest.raises(ValueError, match="3 finite numbers"):
        env.step({"action": np.zeros(2, np.float32), "prediction": np.zeros(10, np.float32)})
    with pytest.raises(ValueError, match="n_episodes"):
        interface_report(env, n_episodes=0)


# ---------------------------------------------------------------------------------------------
# Glimpses of all environments at once
# ---------------------------------------------------------------------------------------------


def _glimpse_envs():
    """(reference, batched) pairs of one kind each: CircleSquare-v0 as a vector env of 7, and
    the digits-glimpse env (one env behind the single-env wrapper)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield (
            ap_gym.make_vec("CircleSquare-v0", num_envs=7),
            batched_glimpses(ap_gym.make_vec("CircleSquare-v0", num_envs=7)),
        )
    yield make_digits_glimpse_env(), batched_glimpses(make_digits_glimpse_env())


def test_batched_glimpses_are_bitwise_ap_gyms():
    # at random positions, at the corners and edges (points on the grid's last line), and on
    # the grid's own coordinates (cells chosen at a tie): every glimpse equal bit for bit
    from reprobook.papers.tactile_mnist.envs import _perception_module

    rng = np.random.default_rng(5)
    for reference, batched in _glimpse_envs():
        ref_mod, new_mod = _perception_module(reference), _perception_module(batched)
        assert getattr(new_mod.get_glimpse, "batched", False)
        assert not getattr(ref_mod.get_glimpse, "batched", False)
        assert batched_glimpses(batched) is batched  # installing twice changes nothing
        for seed in (0, 3):
            reference.reset(seed=seed)
            batched.reset(seed=seed)
            n = len(ref_mod._ImagePerceptionModule__interpolated_images)
            half_pixel = 1 / (ref_mod.config.dataset[0][0].shape[0] / 2)
            grid_aligned = np.round(rng.uniform(-0.8, 0.8, (n, 2)) / half_pixel) * half_pixel
            positions = [
                rng.uniform(-1, 1, (n, 2)),
                np.tile([[1.0, -1.0]], (n, 1)),
                np.tile([[-1.0, 1.0]], (n, 1)),
                np.tile([[1.0, 0.3]], (n, 1)),
                grid_aligned,
            ]
            for pos in positions:
                a, b = ref_mod.get_glimpse(pos), new_mod.get_glimpse(pos)
                assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
        reference.close()
        batched.close()


def test_batched_glimpses_give_bitwise_the_same_episodes():
    from reprobook.papers.tactile_mnist import policies as P

    fields = ("images", "positions", "time", "labels", "actions", "base_rewards", "rewards")
    for reference, batched in _glimpse_envs():
        for name in P.POLICIES:
            a, b = (
                P.rollout(env, P.make_policy(name, env, max_step=0.2), 9, seed=11)
                for env in (reference, batched)
            )
            for field in fields:
                x, y = getattr(a, field), getattr(b, field)
                assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
        reference.close()
        batched.close()


def test_batched_glimpses_fall_back_to_ap_gym():
    # points outside the image: ap_gym's interpolators raise their own error; a glimpse asked
    # for other positions than one per env goes to ap_gym's method; a non-image env is refused
    from reprobook.papers.tactile_mnist.envs import _perception_module

    env = batched_glimpses(make_digits_glimpse_env())
    env.reset(seed=0)
    module = _perception_module(env)
    with pytest.raises(ValueError, match="out of bounds"):
        module.get_glimpse(np.array([[1.5, 0.0]]))
    several = module.get_glimpse(np.zeros((1, 3, 2)))  # three positions of the one env
    assert several.shape == (1, 3, 5, 5, 1)
    with pytest.raises(TypeError, match="ap_gym image environment"):
        batched_glimpses(TactileDigitEnv())


def test_digits_vector_env_is_the_single_task_in_parallel(train_set):
    # four environments of the single env's task: ap_gym's spaces of one env, episodes of the
    # step limit, reproducible under a seed, true labels, and glimpses computed all at once
    from reprobook.papers.tactile_mnist import policies as P
    from reprobook.papers.tactile_mnist.envs import _perception_module

    venv = make_digits_glimpse_vector_env(num_envs=4, dataset=train_set)
    single = make_digits_glimpse_env(dataset=train_set)
    assert venv.num_envs == 4 and getattr(_perception_module(venv).get_glimpse, "batched", False)
    assert venv.single_observation_space == single.observation_space
    assert venv.single_action_space == single.action_space
    pol = P.make_policy("raster", venv, max_step=0.2)
    a, b = P.rollout(venv, pol, 6, seed=4), P.rollout(venv, pol, 6, seed=4)
    assert a.images.shape == (6, 16, 5, 5, 1)
    assert all(getattr(a, f).tobytes() == getattr(b, f).tobytes() for f in ("images", "labels"))
    obs, info = venv.reset(seed=9)
    labels = _perception_module(venv).current_labels
    assert np.array_equal(train_set.labels[info["index"]], labels)
    with pytest.raises(ValueError, match="num_envs"):
        make_digits_glimpse_vector_env(num_envs=0, dataset=train_set)
    venv.close()
    single.close()


def test_circle_square_vector_env_is_ap_gyms_with_batched_glimpses():
    from reprobook.papers.tactile_mnist import envs

    env = envs.make_circle_square_vector_env(3)
    assert env.num_envs == 3
    assert getattr(envs._perception_module(env).get_glimpse, "batched", False)
    with pytest.raises(ValueError, match="num_envs"):
        envs.make_circle_square_vector_env(0)
