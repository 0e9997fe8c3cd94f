"""Can tactile-mnist build its tactile environment offline from our synthetic digits?

The evidence behind chapter 10's package decision. Run it in an environment that has the book's
library and `tactile-mnist` (0.13.0 was tried) installed; the book's own environment does not
install tactile-mnist. It builds meshes of 20 synthetic relief digits (reprobook's
`height_map_mesh`, in metres), wraps them in a `datasets.Dataset`, and constructs
`tactile_mnist.TactileClassificationVectorEnv` with the depth sensor and the NumPy backend,
without touching the model hub. Rendering needs pyrender with EGL: set PYOPENGL_PLATFORM=egl
(without it, construction fails with "Failed to initialize Pyglet window with any OpenGL
context"). Prints the timings and what the observations look like.

    PYOPENGL_PLATFORM=egl HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 python tools/probe_tactile_mnist.py
"""

from __future__ import annotations

import time

import numpy as np


def main(n: int = 20) -> None:
    import datasets
    import tactile_mnist

    from reprobook.papers.tactile_mnist import DigitsDataset
    from reprobook.papers.tactile_mnist.tactile import height_map, height_map_mesh

    digits = DigitsDataset("train")
    meshes = []
    for k in range(n):
        v, f = height_map_mesh(height_map(digits.images8[k]))
        meshes.append(
            {"vertices": (np.asarray(v) / 100.0).tolist(), "faces": np.asarray(f).tolist()}
        )  # cm -> m
    features = datasets.Features(
        {
            "id": datasets.Value("int64"),
            "label": datasets.ClassLabel(names=[str(i) for i in range(10)]),
            "mesh": {
                "vertices": datasets.Sequence(datasets.Sequence(datasets.Value("float32"))),
                "faces": datasets.Sequence(datasets.Sequence(datasets.Value("int64"))),
            },
        }
    )
    data = datasets.Dataset.from_dict(
        {"id": list(range(n)), "label": [int(v) for v in digits.labels[:n]], "mesh": meshes},
        features=features,
    )
    config = tactile_mnist.TactilePerceptionConfig(
        dataset=tactile_mnist.SimpleMeshDataset(data),
        sensor_type="depth",
        sensor_output_size=(32, 32),
        sensor_backend="numpy",
        allow_sensor_rotation=False,
        step_limit=16,
    )
    t0 = time.perf_counter()
    env = tactile_mnist.TactileClassificationVectorEnv(config, num_envs=4)
    print(f"constructed in {time.perf_counter() - t0:.2f} s")
    obs, info = env.reset(seed=0)
    t0 = time.perf_counter()
    for _ in range(16):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    print(f"{1000 * (time.perf_counter() - t0) / 16:.1f} ms per vector step (4 environments)")
    img = np.asarray(obs["sensor_img"])
    print(
        f"sensor_img {img.shape}, range [{img.min():.3f}, {img.max():.3f}]; "
        f"targets {info['prediction']['target']}; terminated {terminated}"
    )
    print("inner action space:", env.single_action_space["action"])
    env.close()


if __name__ == "__main__":
    main()
