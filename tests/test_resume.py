"""A long training survives a pre-emption: inside ``core.training.resumable`` (which
``core.load_or_train`` opens around every training) the Trainer of ``core.make_trainer`` saves
its last checkpoint now and then, and a second attempt resumes from it and ends where an
uninterrupted run ends."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from reprobook.core import checkpoints, make_trainer
from reprobook.core.training import RESUME_STEPS_ENV, resumable

STEPS = 24  # 3 epochs of 8 batches


class Preempted(RuntimeError):
    pass


class Reg(L.LightningModule):
    def __init__(self, die_at: int | None = None):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(3, 1)
        self.die_at = die_at
        self.steps_seen: list[int] = []

    def training_step(self, batch, _):
        if self.die_at is not None and self.global_step == self.die_at:
            raise Preempted(f"killed at step {self.global_step}")
        self.steps_seen.append(int(self.global_step))
        x, y = batch
        return torch.nn.functional.mse_loss(self.lin(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.05)

    def train_dataloader(self):
        g = torch.Generator().manual_seed(1)
        x = torch.randn(64, 3, generator=g)
        y = x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.1
        return DataLoader(TensorDataset(x, y), batch_size=8, shuffle=False)


def _fit(model: Reg) -> Reg:
    make_trainer(max_steps=STEPS, accelerator="cpu", devices=1).fit(model)
    return model


def _weights(model: Reg) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_a_preempted_training_resumes_from_its_last_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setenv(RESUME_STEPS_ENV, "4")
    straight = _fit(Reg())
    folder = tmp_path / "run"

    with pytest.raises(Preempted), resumable(folder):
        _fit(Reg(die_at=10))
    last = folder / "fit-0" / "last.ckpt"
    assert last.exists() and torch.load(last, weights_only=False)["global_step"] == 8

    with resumable(folder):
        again = _fit(Reg())
    assert again.steps_seen[0] == 8 and len(again.steps_seen) == STEPS - 8
    assert torch.allclose(_weights(again), _weights(straight), atol=1e-6)
    assert not folder.exists()  # a finished training leaves nothing behind


def test_without_the_block_nothing_is_saved_and_nothing_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv(RESUME_STEPS_ENV, "4")
    monkeypatch.chdir(tmp_path)
    model = _fit(Reg())
    assert model.steps_seen == list(range(STEPS)) and not any(tmp_path.iterdir())


def test_load_or_train_resumes_in_a_folder_named_after_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv(RESUME_STEPS_ENV, "4")
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path / "ckpt"))
    monkeypatch.setattr(checkpoints, "source_digest", lambda slug: "fixed")  # no package "toy"
    args = dict(profile="reduced", key={"seed": 0}, build=lambda: Reg(die_at=10), train=_fit)
    with pytest.raises(Preempted):
        checkpoints.load_or_train("toy", "reg", **args)
    partial = list((tmp_path / "ckpt").rglob("last.ckpt"))
    assert len(partial) == 1 and partial[0].parent.parent.name.startswith(".reg-")
    model, loaded = checkpoints.load_or_train("toy", "reg", **{**args, "build": Reg})
    assert not loaded and model.steps_seen[0] == 8
    assert not list((tmp_path / "ckpt").rglob("last.ckpt"))  # removed once the model is saved
    _, loaded = checkpoints.load_or_train("toy", "reg", **{**args, "build": Reg})
    assert loaded


def test_the_checkpoint_key_ignores_comments_and_docstrings(tmp_path):
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text('def f(x):\n    """Doc."""\n    return x + 1  # one\n')
    b.write_text('def f(x):\n    """Another doc."""\n\n    return x + 1  # eq. 3\n')
    c.write_text('def f(x):\n    """Doc."""\n    return x + 2\n')
    assert checkpoints._code_of(a) == checkpoints._code_of(b) != checkpoints._code_of(c)


def test_the_code_of_a_file_is_parsed_once_per_content(tmp_path, monkeypatch):
    a = tmp_path / "a.py"
    a.write_text("def f(x):\n    return x + 1\n")
    first = checkpoints._code_of(a)
    parsed = []
    real = checkpoints._parse_code
    monkeypatch.setattr(checkpoints, "_parse_code", lambda text: parsed.append(text) or real(text))
    assert checkpoints._code_of(a) == first and parsed == []  # the same bytes: not parsed again
    a.write_text("def f(x):\n    return x + 3\n")  # rewritten in place: parsed, a new tree
    assert checkpoints._code_of(a) != first and len(parsed) == 1
    a.write_text("def f(x):\n    return x + 1\n")  # back to the first bytes: the first tree
    assert checkpoints._code_of(a) == first and len(parsed) == 1


def test_the_loss_curve_of_core_fit_survives_a_resumed_training(tmp_path, monkeypatch):
    """A training killed half-way and resumed from its last checkpoint returns the whole curve
    from core.fit, equal to one uninterrupted training's (the curve is kept in the checkpoint)."""
    from reprobook import core

    loader = Reg().train_dataloader()
    whole = core.fit(Reg(), loader, steps=16)
    monkeypatch.setenv(RESUME_STEPS_ENV, "4")
    folder = tmp_path / "resume"
    with pytest.raises(Preempted), resumable(folder):
        core.fit(Reg(die_at=10), loader, steps=16)  # last checkpoint: step 8
    with resumable(folder):
        resumed = core.fit(Reg(), loader, steps=16)
    assert resumed.shape == whole.shape == (16,)
    assert torch.equal(torch.from_numpy(resumed), torch.from_numpy(whole))
