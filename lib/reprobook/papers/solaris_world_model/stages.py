"""The staged training pipeline, as Lightning modules cached between notebooks.

Paper: "Solaris: Building a Multiplayer Video World Model in Minecraft" (arXiv 2602.22208).
Stages: (1) single-player bidirectional, (2) multiplayer bidirectional from stage 1 (the
Self Forcing teacher and the critic's start), (3) multiplayer causal with diffusion forcing
from stage 2, (4) Checkpointed Self Forcing from stage 3. Each stage is one call of
:func:`reprobook.core.load_or_train` whose key names the stage it starts from, so a later
notebook loads what an earlier one trained (and trains it when it is missing).
"""

from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import TensorDataset

from reprobook import core

from . import flow, selfforcing, world
from .config import SelfForcingStage, Stage  # the stages' settings live with the profiles
from .model import WorldModel, causal_window_mask

SLUG = "solaris_world_model"


class FlowMatching(L.LightningModule):
    """Flow matching of a WorldModel (eqs. `solaris-world-model-flow` and
    `solaris-world-model-noise` of notebooks/19_solaris_world_model/index.md)."""

    def __init__(self, net: WorldModel, stage: Stage, seed: int):
        super().__init__()
        self.net, self.stage = net, stage
        self.gen = torch.Generator().manual_seed(seed)

    def training_step(self, batch, idx):
        x, a = batch
        B, P, T = x.shape[:3]
        st = self.stage
        sig = flow.noise_levels(B, P, T, st.noise, self.gen)
        weight = torch.ones(B, P, T)
        if st.noise == "standard":  # frame 0 is the clean context of the clip
            sig[:, :, 0] = 0.0
            weight[:, :, 0] = 0.0
        eps = torch.randn(x.shape, generator=self.gen)
        mask = causal_window_mask(T, st.window) if st.window > 0 else torch.ones(T, T).bool()
        v, _ = self.net(flow.noisy(x, sig, eps), sig, a, mask, torch.arange(T))
        return flow.flow_matching_loss(v, x, eps, weight)

    def configure_optimizers(self):
        return torch.optim.AdamW(
            self.net.parameters(), lr=self.stage.lr, betas=(0.9, 0.95), weight_decay=0.0
        )


def data(stage: Stage, seed: int) -> dict:
    """The stage's training clips as tensors (x in [-1, 1])."""
    d = world.training_set(stage.episodes, stage.players, stage.frames, seed, stage.mix)
    return {"x": torch.from_numpy(d["x"]), "actions": torch.from_numpy(d["actions"])}


def fit(net: WorldModel, stage: Stage, seed: int) -> WorldModel:
    """Train ``net`` in place for ``stage.steps`` steps on batches shuffled by ``seed``; its loss
    curve (what ``core.fit`` returns) stays in the buffer ``losses``, which goes into the
    checkpoint."""
    d = data(stage, seed)
    module = FlowMatching(net, stage, seed)
    clips = TensorDataset(d["x"], d["actions"])
    curve = core.fit(module, clips, steps=stage.steps, batch=stage.batch, seed=seed)
    net.register_buffer("losses", _curve_buffer(curve, stage.steps))
    return net


def _curve_buffer(curve, size: int, every: int = 1) -> torch.Tensor:
    """A float buffer of ``size`` zeros holding the training ``curve`` at steps 0, ``every``,
    2 ``every``, ... (the steps that returned a loss)."""
    out = torch.zeros(size)
    steps = torch.arange(0, size, every)[: len(curve)]
    out[steps] = torch.as_tensor(curve[: len(steps)], dtype=torch.float32)
    return out


def build(variant: str, arch: dict, players: int = 2):
    """A fresh WorldModel with a loss buffer (so a loaded model shows its curve)."""

    def make():
        net = WorldModel(variant, concat_players=players, **arch)
        net.register_buffer("losses", torch.zeros(0))
        return net

    return make


def train_stage(name, variant, arch, stage, seed, profile, start=None, start_key=None):
    """A cached stage: loaded when trained before with these settings, else trained (from
    ``start``'s weights when given). Returns (net, loaded)."""
    key = {"variant": variant, "arch": arch, "stage": stage, "seed": seed, "from": start_key}

    def train(net):
        torch.manual_seed(seed)
        if start is not None:
            state = {k: v for k, v in start.state_dict().items() if k != "losses"}
            net.load_state_dict(state, strict=False)
        return fit(net, stage, seed)

    make = build(variant, arch, stage.players if variant == "concat" else 2)

    def make_sized():
        net = make()
        net.register_buffer("losses", torch.zeros(stage.steps))
        return net

    return core.load_or_train(SLUG, name, profile=profile, key=key, build=make_sized, train=train)


class CheckpointedSelfForcing(L.LightningModule):
    """Stage 4 (eqs. `solaris-world-model-replay` and `solaris-world-model-dmd`)."""

    def __init__(self, student, teacher, critic, st: SelfForcingStage, seed: int):
        super().__init__()
        self.student, self.critic, self.st = student, critic, st
        self.teacher = [teacher.eval().requires_grad_(False)]  # frozen, not a submodule
        self.gen = torch.Generator().manual_seed(seed)
        self.automatic_optimization = False
        self.it = 0

    def training_step(self, batch, idx):
        x, a = batch
        it = self.it
        if it >= self.st.iterations:
            return None
        self.it += 1
        opt_g, opt_c = self.optimizers()
        s = int(torch.randint(0, len(flow.STUDENT_SCHEDULE), (1,), generator=self.gen))
        with torch.no_grad():  # 1. the rollout, without gradients, exit step s
            X0, Xs = flow.rollout(
                self.student, x[:, :, :1], a, self.st.window, flow.STUDENT_SCHEDULE, self.gen, s
            )
        if it % self.st.generator_every == 0:  # 2-4. replay and DMD, every k-th iteration
            sigma_s = flow.STUDENT_SCHEDULE[s]
            x0_hat = selfforcing.replay(self.student, X0, Xs, sigma_s, a, self.st.window)
            teacher = self.teacher[0]
            loss = selfforcing.dmd_loss(x0_hat, x[:, :, :1], a, teacher, self.critic, self.gen)
            opt_g.zero_grad()
            self.manual_backward(loss)
            opt_g.step()
        else:
            loss = None  # no generator step: nothing for the DMD curve
        closs = selfforcing.critic_loss(self.critic, X0, a, self.gen)  # the critic, every step
        opt_c.zero_grad()
        self.manual_backward(closs)
        opt_c.step()
        return loss  # the DMD loss of a generator step, the curve that core.fit returns

    def configure_optimizers(self):
        betas = (0.9, 0.95)
        return (
            torch.optim.AdamW(self.student.parameters(), self.st.lr_generator, betas=betas),
            torch.optim.AdamW(self.critic.parameters(), self.st.lr_critic, betas=betas),
        )


def train_self_forcing(arch, st, seed, profile, student, teacher, start_key):
    """Stage 4, cached. ``student`` is the causal model, ``teacher`` the bidirectional one
    (the critic starts as a copy of it). Returns (student, loaded)."""
    key = {"arch": arch, "stage": st, "seed": seed, "from": start_key}

    def train(net):
        torch.manual_seed(seed)
        net.load_state_dict(
            {k: v for k, v in student.state_dict().items() if k != "losses"}, strict=False
        )
        critic = build("multiplayer", arch)()
        critic.load_state_dict(
            {k: v for k, v in teacher.state_dict().items() if k != "losses"}, strict=False
        )
        d = world.training_set(st.episodes, 2, st.horizon, seed + 7, (1, 0, 0, 0, 0))
        clips = TensorDataset(torch.from_numpy(d["x"]), torch.from_numpy(d["actions"]))
        module = CheckpointedSelfForcing(net, teacher, critic, st, seed)
        n_batches = -(-st.episodes // st.batch)
        epochs = -(-st.iterations // n_batches)
        dmd = core.fit(
            module,
            clips,
            epochs=epochs,
            batch=st.batch,
            seed=seed,
            limit_train_batches=min(n_batches, st.iterations),
        )
        # the DMD loss at every generator_every-th iteration, 0 in between
        net.register_buffer("losses", _curve_buffer(dmd, st.iterations, st.generator_every))
        return net

    def make():
        net = build("multiplayer", arch)()
        net.register_buffer("losses", torch.zeros(st.iterations))
        return net

    return core.load_or_train(
        SLUG, "self-forcing", profile=profile, key=key, build=make, train=train
    )
