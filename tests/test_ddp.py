"""Data-parallel training computes what one process computes.

A small LightningModule trains a few SGD steps on the same data with the same global batch,
once in one process and once with two processes (``ddp`` on the CPU, gloo backend), each
process taking half of every batch. Averaged gradients make the two runs' weights equal to
float tolerance. The runs are scripts (``ddp`` re-launches its script for each rank), executed
in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from reprobook.core.training import parallel_settings

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import lightning as L
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
    from reprobook.core import make_trainer

    devices, out = int(sys.argv[1]), sys.argv[2]
    torch.manual_seed(0)
    x = torch.randn(64, 5)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0, -1.0]) + 0.1 * torch.randn(64)

    class Reg(L.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(1)
            self.lin = torch.nn.Linear(5, 1)

        def training_step(self, batch, _):
            xb, yb = batch
            return torch.nn.functional.mse_loss(self.lin(xb).squeeze(-1), yb)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

        def train_dataloader(self):
            # each rank takes every world_size-th example, in order: the ranks' halves of a
            # batch of 16 are together the one process's batch of 16
            ds = TensorDataset(x, y)
            world = self.trainer.world_size
            sampler = DistributedSampler(
                ds, num_replicas=world, rank=self.trainer.global_rank, shuffle=False
            )
            return DataLoader(ds, batch_size=16 // world, sampler=sampler)

    model = Reg()
    trainer = make_trainer(
        max_steps=6, devices=devices, accelerator="cpu", use_distributed_sampler=False
    )
    trainer.fit(model)
    if trainer.global_rank == 0:
        torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, out)
""")


def _train(tmp_path: Path, devices: int) -> dict:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / f"weights-{devices}.pt"
    proc = subprocess.run(
        [sys.executable, str(script), str(devices), str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1", "PL_DISABLE_FORK": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return torch.load(out)


def test_two_process_ddp_matches_one_process(tmp_path: Path) -> None:
    one = _train(tmp_path, 1)
    two = _train(tmp_path, 2)
    assert set(one) == set(two)
    for k in one:
        torch.testing.assert_close(two[k], one[k], rtol=1e-5, atol=1e-6)
    torch.manual_seed(1)
    start = torch.nn.Linear(5, 1)
    assert not torch.allclose(
        one["lin.weight"], start.weight.detach()
    )  # the steps did move the weights


def test_parallel_settings_from_profile_environment_and_slurm() -> None:
    if not torch.cuda.is_available():  # on a CPU, precision "auto" is 32-bit
        assert parallel_settings(environ={}) == {
            "devices": 1,
            "strategy": "auto",
            "precision": "32-true",
            "num_nodes": 1,
        }
    got = parallel_settings(
        environ={"SLURM_GPUS_ON_NODE": "4", "SLURM_NNODES": "2"}, in_notebook=True
    )
    assert got["devices"] == 4 and got["num_nodes"] == 2 and got["strategy"] == "ddp_notebook"
    assert parallel_settings(devices=2, environ={}, in_notebook=False)["strategy"] == "ddp"
    env = {
        "REPROBOOK_DEVICES": "3",
        "REPROBOOK_STRATEGY": "fsdp",
        "REPROBOOK_PRECISION": "16-mixed",
        "SLURM_GPUS_ON_NODE": "8",
    }
    assert parallel_settings(environ=env) == {
        "devices": 3,
        "strategy": "fsdp",
        "precision": "16-mixed",
        "num_nodes": 1,
    }
    assert parallel_settings(devices=2, environ=env)["devices"] == 2  # the profile's field wins
    with pytest.raises(ValueError, match="devices must be a positive integer or 'auto', got 'two'"):
        parallel_settings(devices="two", environ={})
    with pytest.raises(ValueError, match="num_nodes must be a positive integer"):
        parallel_settings(num_nodes=0, environ={})
