"""A recurrent predictor of the class from a sequence of glimpses or touches, for the chapter on
Tactile MNIST.

Paper: "Tactile MNIST: Benchmarking Active Tactile Perception", Schneider et al., arXiv 2506.06361.
In the benchmark the agent must output class logits at every step, and the reward subtracts the
prediction loss (cross-entropy) of each step. The paper's baselines (APPLE) train the prediction
head directly on that loss. Here the movement comes from a scripted policy (``policies.py``) and
the prediction from a supervised model trained on the recorded episodes:

    x_t = (o_t - mu) / sigma                    per-channel standardisation, mu and sigma the mean
                                                and standard deviation of the training images
    z_t = enc(x_t)                              an MLP on the flattened image (images of at most
                                                8 x 8 pixels) or a tiny CNN (larger images)
    h_t = GRU([z_t, p_t, tau_t], h_{t-1})       p_t the sensor position, tau_t the time step
    y_t = W h_t + b                             class logits at every step t = 0..T-1
    L   = 1/(E T) sum_{e,t} CE(y_et, label_e)   the env's per-step cross-entropy (natural log),
                                                averaged over all steps

(eq. `tac-predictor` of notebooks/10_tactile_mnist/index.md)

ASSUMED sizes: image embedding 32, MLP hidden 64, GRU hidden 64, AdamW (weight decay 1e-4),
batch size 32, learning rate 3e-3, no learning-rate schedule. The standardisation (ASSUMED) is
needed: CircleSquare's glimpses lie in [0.45, 1] and the object's edge differs from the
background by about 0.1, and without it the GRU stayed at chance for 150-450 steps. ap_gym's
CircleSquare reports its loss in bits (cross-entropy divided by ln 2); the ordering of
predictors is the same.
"""

from __future__ import annotations

import lightning as L
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from reprobook import core
from reprobook.core import checks

from .policies import Trajectories

__all__ = [
    "GlimpsePredictor",
    "TrajectoryDataModule",
    "build_predictor",
    "fit_predictor",
    "train_predictor",
    "predict_logits",
    "trajectory_tensors",
    "CURVE_COLUMNS",
]

# Images with at most 8 x 8 = 64 pixels go through the MLP, larger ones through the CNN.
MLP_MAX_PIXELS = 64
CURVE_COLUMNS = ("train_loss", "val_loss", "val_final_accuracy")


def trajectory_tensors(trajs: Trajectories) -> dict[str, torch.Tensor]:
    """The model's inputs from :class:`Trajectories`: images (E, T, H, W, C), positions
    (E, T, d), time (E, T) as float32 tensors and labels (E,) as int64."""
    if not isinstance(trajs, Trajectories):
        raise TypeError(f"expected Trajectories, got {type(trajs).__name__}")
    return {
        "images": torch.from_numpy(np.ascontiguousarray(trajs.images, dtype=np.float32)),
        "positions": torch.from_numpy(np.ascontiguousarray(trajs.positions, dtype=np.float32)),
        "time": torch.from_numpy(np.ascontiguousarray(trajs.time, dtype=np.float32)),
        "labels": torch.from_numpy(np.ascontiguousarray(trajs.labels, dtype=np.int64)),
    }


class _TinyCNN(nn.Module):
    """(N, C, H, W) -> (N, embed): two stride-2 3x3 convolutions (8, 16 channels),
    average-pooled to 4 x 4, then a linear layer."""

    def __init__(self, channels: int, embed: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(channels, 8, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
            nn.Flatten(),
            nn.Linear(16 * 16, embed),
            nn.ReLU(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class GlimpsePredictor(L.LightningModule):
    """Per-step class logits from the history of (image, position, time step); see the module
    docstring for the equations (eq. `tac-predictor` of notebooks/10_tactile_mnist/index.md).
    Initial weights depend on ``seed`` only (drawn in a forked RNG).

    ``curve`` (a buffer, epochs x :data:`CURVE_COLUMNS`, NaN where not measured) keeps the mean
    training loss of each epoch (from the step losses ``core.fit`` returns, see
    :meth:`record_training_loss`), the validation loss and the validation final-step accuracy,
    so a model loaded from a checkpoint still has its training curve."""

    def __init__(
        self,
        image_shape: tuple[int, int, int],
        pos_dim: int,
        num_classes: int,
        *,
        hidden: int = 64,
        embed: int = 32,
        mlp_hidden: int = 64,
        lr: float = 3e-3,
        weight_decay: float = 1e-4,
        epochs: int = 1,
        seed: int = 0,
    ):
        super().__init__()
        if len(tuple(image_shape)) != 3:
            raise ValueError(f"image_shape must be (H, W, C), got {image_shape!r}")
        h, w, c = (int(s) for s in image_shape)
        if min(h, w, c) < 1:
            raise ValueError(f"image_shape must be positive, got {image_shape!r}")
        checks.integer(pos_dim, "pos_dim", minimum=1)
        checks.integer(num_classes, "num_classes", minimum=2)
        for name, value in (
            ("hidden", hidden),
            ("embed", embed),
            ("mlp_hidden", mlp_hidden),
            ("epochs", epochs),
        ):
            checks.integer(value, name, minimum=1)
        checks.real(lr, "lr", above=0)
        checks.real(weight_decay, "weight_decay", minimum=0)
        checks.integer(seed, "seed", minimum=0, maximum=2**63 - 1)
        self.save_hyperparameters()
        self.image_shape, self.pos_dim, self.num_classes = (h, w, c), pos_dim, num_classes
        self.lr, self.weight_decay, self.seed = float(lr), float(weight_decay), seed
        self.uses_cnn = h * w > MLP_MAX_PIXELS
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if self.uses_cnn:
                self.encoder = _TinyCNN(c, embed)
            else:
                self.encoder = nn.Sequential(
                    nn.Flatten(),
                    nn.Linear(h * w * c, mlp_hidden),
                    nn.ReLU(),
                    nn.Linear(mlp_hidden, embed),
                    nn.ReLU(),
                )
            self.gru = nn.GRU(embed + pos_dim + 1, hidden, batch_first=True)
            self.head = nn.Linear(hidden, num_classes)
        self.register_buffer("curve", torch.full((epochs, len(CURVE_COLUMNS)), float("nan")))
        self.register_buffer("image_mean", torch.zeros(c))  # mu, per channel (set_input_stats)
        self.register_buffer("image_std", torch.ones(c))  # sigma, per channel

    # model ------------------------------------------------------------------------------------
    def set_input_stats(self, images: np.ndarray | torch.Tensor) -> None:
        """mu, sigma := the per-channel mean and standard deviation of ``images`` (..., H, W, C);
        a channel with sigma < 1e-6 keeps sigma = 1."""
        x = torch.as_tensor(np.asarray(images), dtype=torch.float64).reshape(
            -1, self.image_shape[2]
        )
        if x.shape[0] == 0:
            raise ValueError("set_input_stats needs at least one image")
        mean, std = x.mean(dim=0), x.std(dim=0, correction=0)
        std = torch.where(std < 1e-6, torch.ones_like(std), std)
        self.image_mean.copy_(mean.float())
        self.image_std.copy_(std.float())

    def forward(
        self, images: torch.Tensor, positions: torch.Tensor, time: torch.Tensor
    ) -> torch.Tensor:
        """images (B, T, H, W, C), positions (B, T, d), time (B, T) -> logits
        (B, T, num_classes): eq. `tac-predictor` of notebooks/10_tactile_mnist/index.md."""
        if images.dim() != 5 or tuple(images.shape[2:]) != self.image_shape:
            raise ValueError(
                f"images must be (B, T, {', '.join(map(str, self.image_shape))}), "
                f"got {tuple(images.shape)}"
            )
        b, t = images.shape[:2]
        if tuple(positions.shape) != (b, t, self.pos_dim) or tuple(time.shape) != (b, t):
            raise ValueError(
                f"positions must be ({b}, {t}, {self.pos_dim}) and time ({b}, {t}), "
                f"got {tuple(positions.shape)} and {tuple(time.shape)}"
            )
        x = ((images - self.image_mean) / self.image_std).reshape(b * t, *self.image_shape)
        if self.uses_cnn:
            x = x.permute(0, 3, 1, 2)  # (N, C, H, W)
        z = self.encoder(x).reshape(b, t, -1)
        seq = torch.cat([z, positions, time.unsqueeze(-1)], dim=-1)
        out, _ = self.gru(seq)
        return self.head(out)

    @staticmethod
    def step_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """CE(y_et, label_e) = -log softmax(y_et)[label_e]: logits (B, T, C), labels (B,) ->
        (B, T)."""
        b, t, c = logits.shape
        target = labels.unsqueeze(1).expand(b, t).reshape(-1)
        return F.cross_entropy(logits.reshape(b * t, c), target, reduction="none").reshape(b, t)

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """L = mean over episodes and steps of the per-step cross-entropy (the loss of eq.
        `tac-predictor` of notebooks/10_tactile_mnist/index.md)."""
        logits = self(batch["images"], batch["positions"], batch["time"])
        return self.step_losses(logits, batch["labels"]).mean()

    # Lightning ----------------------------------------------------------------------------------
    def training_step(self, batch, batch_idx):
        return self.loss(batch)

    def record_training_loss(self, losses: np.ndarray, steps_per_epoch: int) -> None:
        """Fill the ``train_loss`` column of ``curve``: the mean of each epoch's step losses
        (``losses``, the per-step training loss ``core.fit`` returns, ``steps_per_epoch`` steps
        an epoch)."""
        checks.integer(steps_per_epoch, "steps_per_epoch", minimum=1)
        losses = np.asarray(losses, dtype=np.float64)
        for e, start in enumerate(range(0, len(losses), steps_per_epoch)):
            if e < self.curve.shape[0]:
                self.curve[e, 0] = float(np.mean(losses[start : start + steps_per_epoch]))

    def validation_step(self, batch, batch_idx):
        logits = self(batch["images"], batch["positions"], batch["time"])
        losses = self.step_losses(logits, batch["labels"])
        correct = (logits[:, -1].argmax(-1) == batch["labels"]).float()
        self._val.append(
            (float(losses.sum()), losses.numel(), float(correct.sum()), correct.numel())
        )

    def on_validation_epoch_start(self):
        self._val = []

    def on_validation_epoch_end(self):
        e = self.current_epoch
        if self.trainer.sanity_checking or not self._val or e >= self.curve.shape[0]:
            return
        loss_sum, n_loss, correct, n = (sum(col) for col in zip(*self._val))
        self.curve[e, 1] = loss_sum / n_loss
        self.curve[e, 2] = correct / n

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)

    def training_curve(self):
        """The training curve as a pandas DataFrame: epoch and :data:`CURVE_COLUMNS`."""
        import pandas as pd

        frame = pd.DataFrame(self.curve.detach().cpu().numpy(), columns=list(CURVE_COLUMNS))
        frame.insert(0, "epoch", range(len(frame)))
        return frame


class _EpisodeBatches(torch.utils.data.Dataset):
    """Indexed by a list of episode indices (from a BatchSampler): one whole batch, no collate."""

    def __init__(self, tensors: dict[str, torch.Tensor], index: torch.Tensor):
        self.tensors, self.index = tensors, index

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, idx: list[int]) -> dict[str, torch.Tensor]:
        rows = self.index[torch.as_tensor(idx, dtype=torch.long)]
        return {k: v[rows] for k, v in self.tensors.items()}


class TrajectoryDataModule(L.LightningDataModule):
    """Batches of whole episodes from :class:`Trajectories`, split into training and validation
    episodes by a permutation drawn from ``seed`` (``val_fraction`` of the episodes, at least one
    when the fraction is positive). Training batches are reshuffled every epoch by a
    ``torch.Generator`` seeded with ``seed``; the last partial batch is kept; no workers."""

    def __init__(
        self, trajs: Trajectories, batch_size: int = 32, val_fraction: float = 0.1, seed: int = 0
    ):
        super().__init__()
        checks.integer(batch_size, "batch_size", minimum=1)
        checks.real(val_fraction, "val_fraction", minimum=0, below=1)
        self.tensors = trajectory_tensors(trajs)
        n = len(trajs)
        n_val = 0 if val_fraction == 0 else max(1, int(round(val_fraction * n)))
        if n - n_val < 1:
            raise ValueError(
                f"{n} episodes leave none for training with val_fraction={val_fraction}"
            )
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        self.val_index, self.train_index = perm[:n_val].sort().values, perm[n_val:].sort().values
        self.batch_size, self.seed = batch_size, seed

    def _loader(self, index: torch.Tensor, shuffle: bool) -> torch.utils.data.DataLoader:
        if shuffle:
            sampler = torch.utils.data.RandomSampler(
                range(len(index)), generator=torch.Generator().manual_seed(self.seed)
            )
        else:
            sampler = torch.utils.data.SequentialSampler(range(len(index)))
        batches = torch.utils.data.BatchSampler(
            sampler, batch_size=self.batch_size, drop_last=False
        )
        return torch.utils.data.DataLoader(
            _EpisodeBatches(self.tensors, index), sampler=batches, batch_size=None, num_workers=0
        )

    def train_dataloader(self):
        return self._loader(self.train_index, shuffle=True)

    def val_dataloader(self):
        if len(self.val_index) == 0:
            return []
        return self._loader(self.val_index, shuffle=False)


def _check_labels(trajs: Trajectories, num_classes: int) -> None:
    if not isinstance(trajs, Trajectories):
        raise TypeError(f"trajs must be Trajectories (from rollout), got {type(trajs).__name__}")
    labels = np.asarray(trajs.labels)
    if labels.min() < 0 or labels.max() >= num_classes:
        raise ValueError(
            f"labels must lie in [0, {num_classes}), got the range [{labels.min()}, {labels.max()}]"
        )


def build_predictor(
    trajs: Trajectories,
    num_classes: int,
    epochs: int = 30,
    seed: int = 0,
    lr: float = 3e-3,
    **model_kwargs,
) -> GlimpsePredictor:
    """An untrained :class:`GlimpsePredictor` shaped for ``trajs`` (image shape, position
    dimension), with a training curve of ``epochs`` rows; ``model_kwargs`` go to its constructor.
    With :func:`fit_predictor`, the ``build`` and ``train`` of ``core.load_or_train``."""
    checks.integer(num_classes, "num_classes", minimum=2)
    _check_labels(trajs, num_classes)
    return GlimpsePredictor(
        tuple(trajs.images.shape[2:]),
        trajs.positions.shape[-1],
        num_classes,
        lr=lr,
        epochs=epochs,
        seed=seed,
        **model_kwargs,
    )


def fit_predictor(
    model: GlimpsePredictor,
    trajs: Trajectories,
    seed: int = 0,
    batch_size: int = 32,
    val_fraction: float = 0.1,
) -> GlimpsePredictor:
    """Train ``model`` in place for ``model.hparams.epochs`` epochs on ``trajs`` with
    :func:`reprobook.core.fit` (quiet, deterministic; CPU here), after setting its input
    standardisation from the training episodes' images, and keep each epoch's mean training loss
    in its curve. The split and the batch order come from ``seed``. Returns the model in eval
    mode. Torch's fill of each new tensor's memory under deterministic training is skipped
    (``core.unfilled_allocations``): the model reads no uninitialised memory, so the weights are
    the same (a test trains with and without the fill)."""
    if not isinstance(model, GlimpsePredictor):
        raise TypeError(f"model must be a GlimpsePredictor, got {type(model).__name__}")
    _check_labels(trajs, model.num_classes)
    if (
        tuple(trajs.images.shape[2:]) != model.image_shape
        or trajs.positions.shape[-1] != model.pos_dim
    ):
        raise ValueError(
            f"trajs have images {tuple(trajs.images.shape[2:])} and positions of dimension "
            f"{trajs.positions.shape[-1]}; the model expects {model.image_shape} and "
            f"{model.pos_dim}"
        )
    data = TrajectoryDataModule(trajs, batch_size=batch_size, val_fraction=val_fraction, seed=seed)
    model.set_input_stats(trajs.images[data.train_index.numpy()])
    with core.unfilled_allocations():
        losses = core.fit(model, data, epochs=int(model.hparams.epochs), num_sanity_val_steps=0)
    model.record_training_loss(losses, -(-len(data.train_index) // batch_size))
    model.eval()
    return model


def train_predictor(
    trajs: Trajectories,
    num_classes: int,
    epochs: int = 30,
    seed: int = 0,
    batch_size: int = 32,
    lr: float = 3e-3,
    val_fraction: float = 0.1,
    **model_kwargs,
) -> GlimpsePredictor:
    """A :class:`GlimpsePredictor` trained for ``epochs`` epochs on ``trajs``:
    :func:`build_predictor` then :func:`fit_predictor`. Weights, the split and the batch order
    come from ``seed`` alone, so two calls give identical weights on one machine with the same
    torch thread count. ``model_kwargs`` go to :class:`GlimpsePredictor`."""
    checks.integer(epochs, "epochs", minimum=1)
    model = build_predictor(trajs, num_classes, epochs=epochs, seed=seed, lr=lr, **model_kwargs)
    return fit_predictor(model, trajs, seed=seed, batch_size=batch_size, val_fraction=val_fraction)


@torch.no_grad()
def predict_logits(
    model: GlimpsePredictor, trajs: Trajectories, batch_size: int = 1024
) -> np.ndarray:
    """Logits (E, T, C) of ``model`` on every step of ``trajs`` (eval mode, no gradient)."""
    if not isinstance(model, GlimpsePredictor):
        raise TypeError(f"model must be a GlimpsePredictor, got {type(model).__name__}")
    checks.integer(batch_size, "batch_size", minimum=1)
    tensors = trajectory_tensors(trajs)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(trajs), batch_size):
        sl = slice(start, start + batch_size)
        out.append(
            model(
                tensors["images"][sl].to(device),
                tensors["positions"][sl].to(device),
                tensors["time"][sl].to(device),
            ).cpu()
        )
    model.train(was_training)
    return torch.cat(out).numpy()
