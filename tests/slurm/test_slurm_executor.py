"""``reprobook run --executor slurm`` on a real one-node Slurm cluster (see slurm_cluster.py):
two chapters run as two Slurm jobs, their values equal a local run's, a second submission
submits nothing, and a job killed with ``scancel`` is reported with its log and resubmitted by
the next run."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import TOY_CLAIMS, toy_notebook, write_nb
from slurm_cluster import slurm_cluster  # noqa: F401 (a fixture)

from reprobook import ledger, runner, slurm


def two_chapter_book(root: Path) -> Path:
    """The toy book (chapter 01_toy) with a second chapter, 02_toyb."""
    second = root / "notebooks" / "02_toyb"
    second.mkdir(parents=True)
    (second / "index.md").write_text("# Toy B\n")
    (second / "claims.yml").write_text(TOY_CLAIMS.replace("bibkey: toy", "bibkey: toyb"))
    write_nb(
        second / "01_draw.ipynb",
        toy_notebook(
            "01_draw",
            """
        import numpy as np
        run.record("T1", float(np.random.rand()) * 0.5)
    """,
            slug="toyb",
        ),
    )
    write_nb(
        second / "02_count.ipynb",
        toy_notebook(
            "02_count",
            """
        import time
        time.sleep(float(pause))
        run.record("T2", n if n is not None else 3)
    """,
            params="n: int | None = None  # an override\npause: float = 0.0  # seconds to wait\n",
            slug="toyb",
        ),
    )
    return root


def values(root: Path) -> dict:
    return {
        (r["chapter"], r["claim"]): (r["value"], r["verdict"])
        for r in ledger.collect("reduced", root)
    }


def test_slurm_runs_chapters_as_jobs_caches_and_resubmits(
    # the fixture imported from slurm_cluster above, requested by name
    slurm_cluster,  # noqa: F811
    toy_book: Path,
    tmp_path: Path,
    monkeypatch,
) -> None:
    monkeypatch.setenv("SLURM_CONF", slurm_cluster["SLURM_CONF"])
    book = two_chapter_book(toy_book)
    local = tmp_path / "local"
    shutil.copytree(book, local)
    quiet = dict(progress=False, echo=lambda *_: None)
    runner.run(root=local, **quiet)
    expected = values(local)

    monkeypatch.setenv("REPROBOOK_ROOT", str(book))
    said: list[str] = []
    summary = runner.run(root=book, executor="slurm", progress=False, echo=said.append)
    assert summary.ok, summary.failures
    manifest = json.loads((book / "_build" / "runs" / "reduced" / "manifest.json").read_text())
    ids = {nb["notebook"]: nb["slurm_job"] for nb in manifest["notebooks"]}
    assert all(ids.values()) and len(ids) == 4, ids  # every notebook ran under Slurm
    by_chapter = {Path(k).parts[1]: v for k, v in ids.items()}
    assert len(set(by_chapter.values())) == 2  # one job per chapter
    assert sum("submitted chapter" in s for s in said) == 2
    assert values(book) == expected  # the same values as the local run

    # nothing changed: nothing is submitted
    said.clear()
    again = runner.run(root=book, executor="slurm", progress=False, echo=said.append)
    assert not any("submitted chapter" in s for s in said) and {j.status for j in again.jobs} == {
        "cached"
    }

    # a job killed with scancel is reported by name with its log, and the next run resubmits it
    submitted = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    runner.run(
        root=book,
        chapter_keys=["toyb"],
        executor="slurm",
        force=True,
        wait=False,
        overrides={"pause": 60.0},
        progress=False,
        echo=lambda *_: None,
    )
    folder = book / "_build" / "slurm" / "reduced"
    job_id = json.loads((folder / "submitted.json").read_text())["toyb"]["job_id"]
    state = book / "_build" / "state" / "reduced.json"
    deadline = time.time() + 300
    while time.time() < deadline:  # wait until the job has finished its first notebook
        entry = (json.loads(state.read_text()) if state.exists() else {}).get(
            "notebooks/02_toyb/01_draw.ipynb", {}
        )
        if entry.get("finished", "") >= submitted:
            break
        time.sleep(0.5)
    time.sleep(1)  # inside the second notebook, which sleeps
    assert slurm.job_state(job_id) == "RUNNING"
    subprocess.run(["scancel", job_id], check=True)
    collected = runner.collect_slurm(book, "reduced", wait=True, echo=lambda *_: None)
    assert not collected.ok
    [failure] = collected.failures
    assert f"chapter toyb: Slurm job {job_id} ended CANCELLED" in failure and "log: " in failure
    said.clear()
    resumed = runner.run(
        root=book,
        chapter_keys=["toyb"],
        executor="slurm",
        timeout=600,
        progress=False,
        echo=said.append,
    )
    statuses = {Path(j.notebook).name: j.status for j in resumed.jobs}
    assert statuses["01_draw.ipynb"] == "cached"  # it finished inside the killed job
    assert statuses["02_count.ipynb"] == "ok" and resumed.ok
    assert any("submitted chapter toyb" in s for s in said)


def test_dry_run_prints_one_batch_script_per_chapter(toy_book: Path, capsys) -> None:
    book = two_chapter_book(toy_book)
    cfg = book / "lib" / "reprobook" / "papers" / "toy" / "config.py"
    cfg.write_text(
        "from reprobook import core\n"
        'RESOURCES = {"full": core.Resources(gpus=2, cpus=16, mem_gb=120, '
        'hours=10), "reduced": core.Resources(cpus=2, mem_gb=4, hours=0.2)}\n'
    )
    runner.run(
        root=book,
        executor="slurm",
        dry_run=True,
        profile="full",
        progress=False,
        echo=print,
        slurm_options=slurm.SlurmOptions(partition="gpu", account="lab", qos="normal"),
    )
    out = capsys.readouterr().out
    assert out.count("#!/bin/bash") == 2
    toy = out[out.index("# chapter toy:") : out.index("# chapter toyb:")]
    for line in (
        "#SBATCH --gpus-per-node=2",
        "#SBATCH --cpus-per-task=16",
        "#SBATCH --mem=122880M",
        "#SBATCH --time=600",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=lab",
        "#SBATCH --qos=normal",
        "#SBATCH --job-name=reprobook-toy",
    ):
        assert line in toy
    assert (
        "#SBATCH --gpus-per-node=1" in out[out.index("# chapter toyb:") :]
    )  # the default for a full run
    assert not (book / "_build" / "slurm" / "full" / "submitted.json").exists()


def test_slurm_options_file_and_errors(tmp_path: Path) -> None:
    (tmp_path / "reprobook-slurm.yml").write_text(
        "partition: a100\nqos: long\nadditional_parameters: {constraint: h100}\n"
        "setup: module load cuda\n"
    )
    opts = slurm.load_options(tmp_path, account="lab", qos=None)
    assert (opts.partition, opts.account, opts.qos, opts.additional_parameters, opts.setup) == (
        "a100",
        "lab",
        "long",
        {"constraint": "h100"},
        ("module load cuda",),
    )
    (tmp_path / "bad.yml").write_text("partion: a100\n")
    with pytest.raises(slurm.SlurmError, match="unknown key.*partion.*valid: partition"):
        slurm.load_options(tmp_path, tmp_path / "bad.yml")
    with pytest.raises(slurm.SlurmError, match="no Slurm config file"):
        slurm.load_options(tmp_path, tmp_path / "missing.yml")
