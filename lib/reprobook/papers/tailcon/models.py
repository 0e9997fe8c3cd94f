"""Networks and one LightningModule per method for chapter 08 (TailCon, NeurIPS 2026):
CE, the logit-adjusted loss (LA), LDAM-DRW, the decoupled cRT and LWS, and TailCon (our
reconstruction: LA training with the episodic memory filled online and FOCUS every few
epochs). Backbones: an MLP (digits), a small 1-D CNN (MNIST-1D), ResNet-32 (CIFAR-LT).
"""

from __future__ import annotations

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics.classification import MulticlassAccuracy

from reprobook.core import checks

from . import losses, memory


def mlp(d_in: int, width: int = 128, dim: int = 64) -> nn.Module:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(d_in, width), nn.ReLU(), nn.Linear(width, dim), nn.ReLU()
    )


def cnn1d(channels: int = 32, dim: int = 64, length: int = 40) -> nn.Module:
    """Three strided 1-D convolutions and a linear map to the feature."""
    c = channels
    return nn.Sequential(
        nn.Conv1d(1, c, 5, stride=2, padding=2),
        nn.ReLU(),
        nn.Conv1d(c, c, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv1d(c, c, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(c * ((length + 7) // 8), dim),
        nn.ReLU(),
    )


class _Block(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.c1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(c_out)
        self.c2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(c_out)
        self.skip = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.skip = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x):
        out = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(out)) + self.skip(x))


def resnet32() -> nn.Module:
    """The CIFAR ResNet-32: three stages of five basic blocks (16, 32, 64 channels)."""
    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    c_in = 16
    for c, stride in ((16, 1), (32, 2), (64, 2)):
        for i in range(5):
            layers.append(_Block(c_in, c, stride if i == 0 else 1))
            c_in = c
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())


def backbone(kind: str, d_in: int = 64) -> tuple[nn.Module, int]:
    """The backbone of a data set and its feature dimension."""
    kind = checks.choice(kind, "kind", ("mlp", "cnn1d", "resnet32"))
    if kind == "mlp":
        return mlp(d_in), 64
    if kind == "cnn1d":
        return cnn1d(length=d_in), 64
    return resnet32(), 64


class Net(nn.Module):
    """``f_phi`` then a head: linear ``W h + b`` or, for LDAM, cosine."""

    def __init__(self, kind: str, d_in: int, n_classes: int, cosine: bool = False):
        super().__init__()
        self.backbone, dim = backbone(kind, d_in)
        self.head = losses.CosineHead(dim, n_classes) if cosine else nn.Linear(dim, n_classes)

    def features(self, x):
        return self.backbone(x)

    def forward(self, x):
        return self.head(self.backbone(x))


class CEModule(L.LightningModule):
    """Cross-entropy on the long-tailed data (and the base of every other method)."""

    cosine = False

    def __init__(
        self,
        kind,
        d_in,
        counts,
        epochs,
        lr=1e-3,
        weight_decay=0.0,
        optimizer="adam",
        milestones=(),
        warmup=0,
        tau=1.0,
        drw_epoch=None,
        max_margin=0.5,
        scale=30.0,
    ):
        super().__init__()
        counts = np.asarray(counts)
        self.net = Net(kind, d_in, counts.size, cosine=self.cosine)
        self.epochs = checks.integer(epochs, "epochs", minimum=1)
        self.lr, self.weight_decay = lr, weight_decay
        self.optimizer = checks.choice(optimizer, "optimizer", ("adam", "sgd"))
        self.milestones, self.warmup, self.tau = tuple(milestones), warmup, tau
        self.drw_epoch, self.max_margin, self.scale = drw_epoch, max_margin, scale
        self.register_buffer("counts", torch.as_tensor(counts, dtype=torch.float32))
        self.register_buffer("logprior", losses.log_prior(counts))
        self.register_buffer("curve", torch.zeros(self.epochs, counts.size))  # val recall
        self.monitor = None  # (x_val, y_val), set before fit to fill `curve`

    def forward(self, x):
        return self.net(x)

    def loss(self, logits, y):
        return F.cross_entropy(logits, y)

    def training_step(self, batch, _):
        x, y, idx = batch
        h = self.net.features(x)
        logits = self.net.head(h)
        self.after_forward(h, logits, y, idx)
        return self.loss(logits, y)

    def after_forward(self, h, logits, y, idx):
        """A hook for TailCon's memory; nothing for the baselines."""

    def on_train_epoch_end(self):
        self.consolidate()
        if self.monitor is not None and self.current_epoch < self.epochs:
            x, y = self.monitor
            self.curve[self.current_epoch] = per_class_accuracy(self.predict_logits(x), y)

    def consolidate(self):
        """A hook for FOCUS; nothing for the baselines."""

    @torch.no_grad()
    def predict_logits(self, x):
        was = self.training
        self.eval()
        out = self.net(x.to(self.device)).cpu()
        self.train(was)
        return out

    def configure_optimizers(self):
        if self.optimizer == "adam":
            return torch.optim.Adam(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        opt = torch.optim.SGD(
            self.parameters(), lr=self.lr, momentum=0.9, weight_decay=self.weight_decay
        )

        def factor(epoch):  # linear warm-up, then x0.1 at each milestone
            warm = min(1.0, (epoch + 1) / self.warmup) if self.warmup else 1.0
            return warm * 0.1 ** sum(epoch >= m for m in self.milestones)

        return [opt], [torch.optim.lr_scheduler.LambdaLR(opt, factor)]


class LAModule(CEModule):
    """The logit-adjusted loss ``CE(z + tau log pi, y)``."""

    def loss(self, logits, y):
        return losses.la_loss(logits, y, self.logprior, self.tau)


class LDAMDRWModule(CEModule):
    """LDAM on a cosine head, with DRW class weights from ``drw_epoch`` on."""

    cosine = True

    def loss(self, logits, y):
        margins = losses.ldam_margins(self.counts.cpu().numpy(), self.max_margin)
        drw = self.drw_epoch is not None and self.current_epoch >= self.drw_epoch
        weight = losses.drw_weights(self.counts.cpu().numpy()) if drw else None
        return losses.ldam_loss(logits, y, margins, self.scale, weight)


class TailConModule(LAModule):
    """TailCon (our reconstruction): LA training; after each forward pass the rare or
    uncertain items enter the detached memory; every ``focus_every`` epochs (and after the last)
    FOCUS fits a surrogate on the memory and merges it into the head. ``focus_every = 0`` keeps
    the memory but never consolidates (the retrieval-only model)."""

    def __init__(
        self,
        *args,
        capacity=16,
        focus_every=10,
        focus_steps=50,
        surrogate="lws",
        gamma=1.0,
        k=5,
        T=0.1,
        rank=4,
        mode="feature",
        x_train=None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        rare = torch.as_tensor(_tertiles(self.counts.numpy()) == 2)
        self.register_buffer("rare", rare)
        self.focus_every = checks.integer(focus_every, "focus_every", minimum=0)
        self.focus_kw = dict(kind=surrogate, steps=focus_steps, gamma=gamma, k=k, T=T, rank=rank)
        self.memory = memory.EpisodicMemory(int(self.counts.numel()), capacity, 64, mode)
        self.x_train = x_train  # only for the index memory's re-encoding
        self.register_buffer("focus_epochs", torch.zeros(self.epochs, dtype=torch.bool))

    def after_forward(self, h, logits, y, idx):
        keep = memory.insert_mask(logits, y, self.rare)
        if keep.any():
            self.memory.add(h[keep].detach(), y[keep], idx[keep])

    def memory_items(self):
        encode = self.net.features
        return self.memory.read(encode, self.x_train)

    def consolidate(self):
        e = self.current_epoch + 1
        if self.focus_every == 0 or (e % self.focus_every and e != self.epochs):
            return
        was = self.net.training
        self.net.eval()  # features as the model would compute them at test time
        H, y, ids = self.memory_items()
        self.net.train(was)
        head = self.net.head
        memory.focus(
            head,
            H.to(self.device),
            y.to(self.device),
            ids.to(self.device),  # each item's posterior leaves the item itself out
            seed=int(self.focus_epochs.sum()),
            **self.focus_kw,
        )
        self.focus_epochs[self.current_epoch] = True


def _tertiles(counts):
    from .data import class_groups

    return class_groups(counts)


@torch.no_grad()
def per_class_accuracy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-class recall on a balanced set (torchmetrics' ``MulticlassAccuracy``, no average)."""
    metric = MulticlassAccuracy(num_classes=logits.shape[1], average=None)
    return metric(logits.argmax(dim=1), y.cpu())


class DecoupledModule(L.LightningModule):
    """The second stage of the decoupled methods on a frozen backbone, trained with
    class-balanced sampling: ``"crt"`` re-initialises and re-trains the linear head, ``"lws"``
    learns only ``z'_c = s_c z_c + b_c`` on the fixed head."""

    def __init__(self, net: Net, method: str, lr: float = 1e-2, seed: int = 0):
        super().__init__()
        self.method = checks.choice(method, "method", ("crt", "lws"))
        self.net, self.lr = net, lr
        for p in self.net.parameters():
            p.requires_grad_(False)
        if self.method == "crt":
            g = torch.Generator().manual_seed(seed)
            head = self.net.head
            head.weight.data = torch.randn(head.weight.shape, generator=g) * 0.01
            head.bias.data.zero_()
            for p in head.parameters():
                p.requires_grad_(True)
        self.lws = losses.LWS(self.net.head.out_features)

    def forward(self, x):
        z = self.net(x)
        return self.lws(z) if self.method == "lws" else z

    def training_step(self, batch, _):
        x, y, _ = batch
        self.net.backbone.eval()  # frozen features
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        params = self.lws.parameters() if self.method == "lws" else self.net.head.parameters()
        return torch.optim.Adam(params, lr=self.lr)
