"""The runner on a throwaway book: cache skip and invalidation, failures, overrides, seeds."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, toy_notebook, write_nb

from reprobook import cli, execute, ledger, runner, slurm


def statuses(summary: runner.RunSummary) -> dict[str, str]:
    return {Path(j.notebook).name: j.status for j in summary.jobs}


def results(root: Path, name: str, tag: str = "") -> dict:
    base = root / "_build" / ("tagged/" + tag if tag else "") / "results"
    return json.loads((base / "reduced" / "toy" / f"{name}.json").read_text())


def planned(root: Path) -> dict[str, str]:
    """What ``runner.run`` would do now at the reduced profile: each notebook's status in the
    plan it executes (``pending`` runs, ``cached`` is skipped)."""
    jobs = runner.plan(root, runner.select_chapters(root, None), "reduced", {}, False)
    return {Path(j.notebook).name: j.status for j in jobs}


def test_cache_skip_and_invalidation(toy_book: Path) -> None:
    first = runner.run(root=toy_book, progress=False, echo=lambda *_: None)
    assert statuses(first) == {"01_draw.ipynb": "ok", "02_count.ipynb": "ok"}
    assert all(j.wall_s > 0 and j.peak_mb > 0 for j in first.jobs)

    second = runner.run(root=toy_book, progress=False, echo=lambda *_: None)
    assert statuses(second) == {"01_draw.ipynb": "cached", "02_count.ipynb": "cached"}
    assert not second.executed

    # Editing the last notebook re-runs that one only; editing the first re-runs the chapter from
    # there on, since a later notebook may show what an earlier one recorded.
    for name, expected in (
        ("02_count", {"01_draw.ipynb": "cached", "02_count.ipynb": "ok"}),
        ("01_draw", {"01_draw.ipynb": "ok", "02_count.ipynb": "ok"}),
    ):
        nb = toy_book / "notebooks" / "01_toy" / f"{name}.ipynb"
        data = json.loads(nb.read_text())
        data["cells"][0]["source"] = f"# {name}, edited"
        nb.write_text(json.dumps(data))
        assert (
            statuses(runner.run(root=toy_book, progress=False, echo=lambda *_: None)) == expected
        ), name

    # The core library, the chapter's library, the lock file and the claims file each
    # invalidate it all: each changed alone, the plan that `run` executes marks both notebooks to
    # run, and with the change undone both are cached again (no notebook runs for this).
    core = toy_book / "lib" / "reprobook" / "core" / "claims.py"
    core.parent.mkdir(parents=True)
    core.write_text("# core\n")
    assert planned(toy_book) == {"01_draw.ipynb": "pending", "02_count.ipynb": "pending"}
    runner.run(root=toy_book, progress=False, echo=lambda *_: None)
    for path in (
        core,
        toy_book / "lib" / "reprobook" / "papers" / "toy" / "__init__.py",
        toy_book / "requirements.lock",
        toy_book / "notebooks" / "01_toy" / "claims.yml",
    ):
        text = path.read_text()
        path.write_text(text + "\n# changed\n")
        assert planned(toy_book) == {"01_draw.ipynb": "pending", "02_count.ipynb": "pending"}, (
            path.name
        )
        path.write_text(text)
        assert planned(toy_book) == {"01_draw.ipynb": "cached", "02_count.ipynb": "cached"}, (
            path.name
        )

    # A results file deleted, or rewritten by a run outside the runner, makes its notebook
    # run again.
    draw = toy_book / "_build" / "results" / "reduced" / "toy" / "01_draw.json"
    draw.unlink()
    assert (
        statuses(runner.run(root=toy_book, progress=False, echo=lambda *_: None))["01_draw.ipynb"]
        == "ok"
    )
    draw.write_text(draw.read_text().replace('"seed": 0', '"seed": 5'))
    assert (
        statuses(runner.run(root=toy_book, progress=False, echo=lambda *_: None))["01_draw.ipynb"]
        == "ok"
    )

    # Other parameters are another key; the results record them and the ledger shows them.
    other = runner.run(root=toy_book, overrides={"n": 4}, progress=False, echo=lambda *_: None)
    assert statuses(other) == {"01_draw.ipynb": "cached", "02_count.ipynb": "ok"}
    assert results(toy_book, "02_count")["claims"]["T2"]["value"] == 4
    assert results(toy_book, "02_count")["overrides"] == {"n": 4}
    row = {r["claim"]: r for r in ledger.collect("reduced", toy_book)}["T2"]
    assert ledger.run_cell(row) == "reduced (n=4)"

    manifest = json.loads((toy_book / "_build" / "runs" / "reduced" / "manifest.json").read_text())
    assert {"git_commit", "packages", "hardware", "notebooks"} <= set(manifest)
    assert manifest["packages"]["numpy"]


def test_failing_notebook_does_not_stop_the_others(toy_book: Path, monkeypatch, capsys) -> None:
    write_nb(
        toy_book / "notebooks" / "01_toy" / "01_draw.ipynb",
        toy_notebook("01_draw", "raise RuntimeError('deliberate failure')"),
    )
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    code = cli.main(["run", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED notebooks/01_toy/01_draw.ipynb: RuntimeError: deliberate failure" in out
    partial = (
        toy_book / "_build" / "executed" / "reduced" / "notebooks" / "01_toy" / "01_draw.ipynb"
    )
    assert "deliberate failure" in partial.read_text()  # the partial output keeps the error
    assert results(toy_book, "02_count")["claims"]["T2"]["value"] == 3  # the other notebook ran
    # A failed notebook is not cached: the next run tries it again, and a notebook that fails on a
    # re-run leaves none of its earlier claims behind.
    again = runner.run(root=toy_book, progress=False, echo=lambda *_: None)
    assert statuses(again) == {"01_draw.ipynb": "failed", "02_count.ipynb": "cached"}
    write_nb(
        toy_book / "notebooks" / "01_toy" / "02_count.ipynb",
        toy_notebook(
            "02_count", "raise ValueError('now broken')", params="n: int | None = None  # n\n"
        ),
    )
    runner.run(root=toy_book, progress=False, echo=lambda *_: None)
    assert "T2" not in results(toy_book, "02_count")["claims"]
    assert {r["claim"]: r["verdict"] for r in ledger.collect("reduced", toy_book)}[
        "T2"
    ] == "not_run"


def test_unknown_override_is_refused_before_anything_runs(
    toy_book: Path, monkeypatch, capsys
) -> None:
    with pytest.raises(
        runner.RunError,
        match=r"no notebook .* parameter named stepz; their parameters: n, profile, seed",
    ):
        runner.run(root=toy_book, overrides={"stepz": 3}, progress=False)
    with pytest.raises(runner.RunError, match=r"--profile reduced\|full\|smoke, not with -p"):
        runner.run(root=toy_book, overrides={"profile": "full"}, progress=False)
    assert not (toy_book / "_build" / "executed").exists()
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    assert cli.main(["run", "-p", "stepz=3"]) == 2
    assert "stepz" in capsys.readouterr().err
    assert cli.main(["run", "nochapter"]) == 2
    assert "no chapter 'nochapter'; chapters: toy" in capsys.readouterr().err


def test_same_seed_same_values_other_seed_other_values(toy_book: Path) -> None:
    values = []
    for seed in (7, 7, 8):
        runner.run(
            root=toy_book,
            overrides={"seed": seed},
            force=True,
            progress=False,
            echo=lambda *_: None,
        )
        data = results(
            toy_book, "01_draw", tag=f"seed{seed}"
        )  # another seed's run keeps to its own folder
        assert data["seed"] == seed
        values.append(data["claims"]["T1"]["value"])
    assert values[0] == values[1]
    assert values[0] != values[2]
    assert not (
        toy_book / "_build" / "results"
    ).exists()  # the default seed's results were never touched


def test_seed_runs_are_kept_apart_and_compared(toy_book: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    quiet = dict(root=toy_book, progress=False, echo=lambda *_: None)
    runner.run(**quiet)
    runner.run(overrides={"seed": 1}, **quiet)
    assert (
        results(toy_book, "01_draw")["seed"] == 0
        and results(toy_book, "01_draw", "seed1")["seed"] == 1
    )
    assert (
        toy_book / "_build" / "tagged" / "seed1" / "runs" / "reduced" / "manifest.json"
    ).exists()
    # a second run of the same seed finds its own cache
    again = runner.run(overrides={"seed": 1}, **quiet)
    assert {j.status for j in again.jobs} == {"cached"}
    # T1 draws u * 0.5 < 0.5 at every seed: no flip
    assert cli.main(["ledger", "--compare", "default", "seed1"]) == 0
    out = capsys.readouterr().out
    assert "0 flipped" in out and "verdict seed1" in out
    # a claim whose verdict depends on the seed is flagged, and the command fails
    claims = toy_book / "notebooks" / "01_toy" / "claims.yml"
    claims.write_text(
        claims.read_text().replace("reproduced: {max: 0.5}", "reproduced: {max: 0.2}")
    )
    runner.run(**quiet)
    runner.run(overrides={"seed": 1}, **quiet)
    pairs = ledger.compare(
        ledger.collect("reduced", toy_book),
        ledger.collect("reduced", toy_book, runner.tag_results_dir(toy_book, "seed1")),
    )
    t1 = next(p for p in pairs if p["claim"] == "T1")
    v0, v1 = (
        results(toy_book, "01_draw")["claims"]["T1"]["value"],
        results(toy_book, "01_draw", "seed1")["claims"]["T1"]["value"],
    )
    assert t1["flip"] == ((v0 <= 0.2) != (v1 <= 0.2))
    assert cli.main(["ledger", "--compare", "default", "nosuchtag"]) == 2
    assert "no run tagged 'nosuchtag'" in capsys.readouterr().err
    with pytest.raises(runner.RunError, match="tag 'Bad/Tag'"):
        runner.run(tag="Bad/Tag", **quiet)


def test_flip_rule() -> None:
    assert not ledger.is_flip("reproduced", "reproduced")
    assert ledger.is_flip("reproduced", "partial") and ledger.is_flip(
        "reproduced", "not_reproduced"
    )
    assert not ledger.is_flip("inconclusive", "not_reproduced") and not ledger.is_flip(
        "partial", "inconclusive"
    )
    assert not ledger.is_flip(
        "reproduced", "inconclusive"
    )  # an interval straddling the reproduced bar
    assert ledger.is_flip("needs_full", "reproduced") and ledger.is_flip("not_run", "inconclusive")


def test_ledger_json_and_verdicts(toy_book: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    rows = ledger.collect("reduced", toy_book)
    assert [r["verdict"] for r in rows] == ["not_run", "not_run"]
    runner.run(root=toy_book, progress=False, echo=lambda *_: None)
    assert cli.main(["ledger", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"chapter", "claim", "verdict", "value", "paper_value", "profile"} <= set(rows[0])
    by_id = {r["claim"]: r for r in rows}
    assert by_id["T1"]["verdict"] == "reproduced" and by_id["T1"]["chapter"] == "toy"
    assert by_id["T2"]["value"] == 3 and by_id["T2"]["verdict"] == "reproduced"


def test_parse_override() -> None:
    assert runner.parse_override("n=3") == ("n", 3)
    assert runner.parse_override("lr=1e-3") == ("lr", 1e-3)
    assert runner.parse_override("flag=True") == ("flag", True)
    assert runner.parse_override("x=None") == ("x", None)
    assert runner.parse_override("ks=[1, 2]") == ("ks", [1, 2])
    assert runner.parse_override("name=abc") == ("name", "abc")
    with pytest.raises(runner.RunError, match="not NAME=VALUE"):
        runner.parse_override("n3")
    with pytest.raises(runner.RunError, match="not a Python identifier"):
        runner.parse_override("1n=3")


def test_notebooks_of_a_chapter_run_in_order(toy_book: Path) -> None:
    """02 reads what 01 wrote; 01 is slow, so running them side by side would fail."""
    chapter = toy_book / "notebooks" / "01_toy"
    write_nb(
        chapter / "01_draw.ipynb",
        toy_notebook(
            "01_draw",
            """
        import time
        time.sleep(3)
        run.record("T1", 0.25)
    """,
        ),
    )
    write_nb(
        chapter / "02_count.ipynb",
        toy_notebook(
            "02_count",
            """
        first = run.path.with_name("01_draw.json")
        import json
        assert json.loads(first.read_text())["claims"]["T1"]["value"] == 0.25, "01 has not finished"
        run.record("T2", 1)
    """,
            params="n: int | None = None  # an override\\n",
        ),
    )
    summary = runner.run(root=toy_book, jobs=2, progress=False, echo=lambda *_: None)
    assert statuses(summary) == {"01_draw.ipynb": "ok", "02_count.ipynb": "ok"}, [
        j.error for j in summary.jobs
    ]


def test_chapters_run_in_parallel(toy_book: Path) -> None:
    """Two chapters run side by side: the run takes clearly less than its notebooks in turn."""
    import time

    other = toy_book / "notebooks" / "02_other"
    other.mkdir()
    (other / "index.md").write_text("# Other\n")
    (other / "claims.yml").write_text(
        (toy_book / "notebooks" / "01_toy" / "claims.yml").read_text().split("  - id: T2")[0]
    )
    write_nb(
        other / "01_draw.ipynb",
        toy_notebook("01_draw", "import time; time.sleep(3); run.record('T1', 0.1)", slug="other"),
    )
    t0 = time.perf_counter()
    summary = runner.run(root=toy_book, jobs=2, progress=False, echo=lambda *_: None)
    wall = time.perf_counter() - t0
    assert [j.status for j in summary.jobs] == ["ok", "ok", "ok"], [j.error for j in summary.jobs]
    assert wall < 0.85 * sum(j.wall_s for j in summary.jobs), (
        wall,
        [j.wall_s for j in summary.jobs],
    )
    assert results(toy_book, "01_draw")["chapter"] == "toy"
    assert json.loads(
        (toy_book / "_build" / "results" / "reduced" / "other" / "01_draw.json").read_text()
    )["claims"]


def test_list_names_chapters_notebooks_and_claims(toy_book: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "01 toy: A toy paper (2 claims)"
    assert out[1:] == [
        "    needs at the reduced profile: no GPU, 2 cores, 8 GiB, 0.5 h",
        "    01_draw.ipynb  [T1]",
        "    02_count.ipynb  [T2]",
        "the book at the reduced profile: 0.5 hours of jobs, 0 GPU-hours",
    ]
    (toy_book / "lib" / "reprobook" / "papers" / "toy" / "config.py").write_text(
        "RESOURCES = {'full': Resources(gpus=2, cpus=8, mem_gb=64, hours=3)}\n"
    )
    assert cli.main(["list", "--profile", "full"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "    needs at the full profile: 2 GPUs, 8 cores, 64 GiB, 3 h"
    assert out[-1] == "the book at the full profile: 3 hours of jobs, 6 GPU-hours"
    (toy_book / "lib" / "reprobook" / "papers" / "toy" / "config.py").write_text(
        "RESOURCES = {'full': Resources(gpus=-1)}\n"
    )
    assert cli.main(["list", "--profile", "full"]) == 2
    assert "gpus must be an integer >= 0" in capsys.readouterr().err


def test_compact_ledger_fits_the_terminal_and_wide_keeps_everything(
    toy_book: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    runner.run(root=toy_book, progress=False, echo=lambda *_: None)
    rows = ledger.collect("reduced", toy_book)
    rows[0]["statement"] = "a very long statement " * 20
    for width in (80, 120):
        text = ledger.render(rows, "compact", width=width)
        assert max(len(line) for line in text.splitlines()) <= width
        assert len(text.splitlines()) == 1 + len(rows) + 1 + len(
            __import__("textwrap").wrap(ledger.headline(rows), width)
        )
    assert ledger.render(rows, "table").count("statement") >= 20  # wrapped, never cut
    monkeypatch.setenv("COLUMNS", "100")
    assert cli.main(["ledger"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100 and "Of the paper's 1 claim" in out
    assert cli.main(["ledger", "--wide"]) == 0
    assert "statement" in capsys.readouterr().out


def test_overview_figure_and_ledger_page(toy_book: Path, monkeypatch) -> None:
    from reprobook import site

    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    runner.run(root=toy_book, progress=False, echo=lambda *_: None)
    rows = ledger.collect("reduced", toy_book)
    png = ledger.overview_figure(rows, toy_book / "out" / "overview.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not list(png.parent.glob(".*tmp*"))
    page = site.ledger_page(toy_book, "reduced", rows)
    assert page.startswith("```{figure} ledger_overview.png")
    assert "{doc}`T1 </notebooks/01_toy/01_draw>`" in page and ":class: dropdown" in page
    assert "*Measured:* the draw." in page


# ------------------------------------------------------------------ --dry-run and Slurm errors


def without_slurm(tmp_path: Path, monkeypatch) -> Path:
    """PATH reduced to one empty folder: no srun, sbatch, sinfo or squeue, as on a laptop.
    Nothing these tests run needs another program; the folder is returned for fakes."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    assert shutil.which("srun") is None and shutil.which("sbatch") is None
    return folder


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_dry_run_prints_the_batch_scripts_without_slurm(
    toy_book: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    without_slurm(tmp_path, monkeypatch)
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    (toy_book / "lib" / "reprobook" / "papers" / "toy" / "config.py").write_text(
        "RESOURCES = {'full': Resources(gpus=1, cpus=8, mem_gb=32, hours=2)}\n"
    )
    argv = ["run", "toy", "--profile", "full", "--executor", "slurm", "--dry-run", "--no-progress"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    out = captured.out
    assert "# chapter toy: 2 notebook(s); needs 1 GPU, 8 cores, 32 GiB, 2 h" in out
    for line in (
        "#!/bin/bash",
        "#SBATCH --gpus-per-node=1",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=32768M",
        "#SBATCH --time=120",
        "#SBATCH --job-name=reprobook-toy",
    ):
        assert line in out, line
    assert "srun --unbuffered" in out  # the script submitit would hand to sbatch
    assert not (toy_book / "_build").exists()  # a dry run writes nothing


def test_dry_run_of_spr_ldp_at_full_needs_no_slurm(tmp_path: Path, monkeypatch, capsys) -> None:
    """The command of the issue, on the book itself: the script asks for what the chapter's
    RESOURCES declare at the full profile (a GPU line exactly when it declares GPUs)."""
    without_slurm(tmp_path, monkeypatch)
    monkeypatch.setenv("REPROBOOK_ROOT", str(ROOT))
    argv = ["run", "spr_ldp", "--profile", "full", "--executor", "slurm", "--dry-run", "--force"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    needs = slurm.chapter_resources(ROOT, "spr_ldp", "full")
    assert f"#SBATCH --cpus-per-task={needs.cpus}" in out
    assert f"#SBATCH --time={int(round(needs.hours * 60))}" in out
    assert "#SBATCH --job-name=reprobook-spr_ldp" in out
    if needs.gpus:
        assert f"#SBATCH --gpus-per-node={needs.gpus}" in out
    else:
        assert "--gpus" not in out


def test_submitting_without_slurm_is_one_line_and_keeps_results(
    toy_book: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    without_slurm(tmp_path, monkeypatch)
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    kept = toy_book / "_build" / "results" / "reduced" / "toy" / "01_draw.json"
    kept.parent.mkdir(parents=True)
    kept.write_text("{}")
    assert cli.main(["run", "--executor", "slurm", "--no-progress"]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("reprobook run: Slurm's sbatch, srun, sinfo, squeue and scontrol are ")
    assert "not on PATH on this machine; submitting needs a Slurm login node" in line
    assert "(use --dry-run to print the scripts)" in line
    assert kept.exists()  # refused before the results of the notebooks to run were removed
    # nothing submitted, nothing to gather: no Slurm needed, and the last manifest is kept
    assert cli.main(["run", "--collect"]) == 0
    assert "no Slurm jobs to collect at profile reduced" in capsys.readouterr().out
    assert not (toy_book / "_build" / "runs").exists()
    assert not (toy_book / "_build" / "slurm").exists()
    # gathering jobs submitted earlier without Slurm says what is missing, in one line
    registry = toy_book / "_build" / "slurm" / "reduced" / "submitted.json"
    registry.parent.mkdir(parents=True)
    registry.write_text(json.dumps({"toy": {"job_id": "12", "stderr": "x.err"}}))
    assert cli.main(["run", "--collect"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "not on PATH on this machine; collecting Slurm jobs needs a Slurm login node" in line


def test_a_refusal_of_sbatch_is_one_line(toy_book: Path, tmp_path: Path, monkeypatch, capsys):
    """Slurm installed, sbatch says no (a wrong account): its complaint, on one line."""
    fakes = without_slurm(tmp_path, monkeypatch)
    for name in ("srun", "sinfo", "squeue", "scontrol"):
        (fakes / name).write_text("#!/bin/sh\nexit 0\n")
    (fakes / "sbatch").write_text(
        "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Invalid account' >&2\n"
        "exit 1\n"
    )
    for fake in fakes.iterdir():
        fake.chmod(0o755)
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    assert cli.main(["run", "--executor", "slurm", "--account", "nolab", "--no-progress"]) == 2
    assert one_line(capsys.readouterr().err) == (
        "reprobook run: sbatch refused the job of chapter toy: "
        "sbatch: error: Batch job submission failed: Invalid account"
    )
    assert not (toy_book / "_build" / "slurm" / "reduced" / "submitted.json").exists()


# ------------------------------------------------------------------ overrides and options checked


def typed_book(root: Path) -> list:
    """The toy book, its second notebook declaring one parameter of each kind."""
    write_nb(
        root / "notebooks" / "01_toy" / "02_count.ipynb",
        toy_notebook(
            "02_count",
            "run.record('T2', 3)",
            params="n: int | None = None  # an override\n"
            "rate: float = 0.5  # a rate\n"
            "flag: bool = False  # a switch\n"
            "label: str = 'a'  # a name\n"
            "sizes: list[int] | None = None  # a grid\n",
        ),
    )
    return runner.select_chapters(root, None)


def test_a_wrong_override_is_refused_before_any_folder_is_made(
    toy_book: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    monkeypatch.setenv("REPROBOOK_RESULTS", str(tmp_path / "results"))
    for extra in ([], ["--dry-run"], ["--executor", "slurm"]):
        assert cli.main(["run", "-p", "seed=abc", "--no-progress", *extra]) == 2
        assert one_line(capsys.readouterr().err) == (
            "reprobook run: -p seed=abc: seed is declared 'seed: int' in "
            "notebooks/01_toy/01_draw.ipynb; 'abc' is not an integer"
        )
    assert not (toy_book / "_build").exists()  # no _build/tagged/seedabc, nothing at all
    assert not (tmp_path / "results").exists()


def test_overrides_are_converted_to_the_declared_types(toy_book: Path) -> None:
    chapters = typed_book(toy_book)
    check = lambda **given: runner.check_overrides(toy_book, chapters, given)
    assert check(seed="1") == {"seed": 1} and type(check(seed="1")["seed"]) is int
    assert check(seed=" -2 ") == {"seed": -2}
    for none in ("None", "none", "null", "~", None):
        assert check(n=none) == {"n": None}, none
    assert check(n="4") == {"n": 4}
    assert check(rate="1e-3") == {"rate": 0.001} and check(rate=2) == {"rate": 2.0}
    assert check(flag="true") == {"flag": True} and check(flag="False") == {"flag": False}
    assert check(label="1") == {"label": "1"}  # text stays text for a str
    assert check(sizes="[1, 2]") == {"sizes": [1, 2]} and check(sizes="none") == {"sizes": None}
    where = "in notebooks/01_toy/02_count.ipynb; "
    for given, message in (
        (
            {"rate": "x"},
            "-p rate=x: rate is declared 'rate: float' " + where + "'x' is not a number",
        ),
        ({"seed": "1.5"}, "'1.5' is not an integer"),
        ({"seed": "none"}, "'none' is not an integer"),  # None only where `| None` says so
        ({"seed": True}, "-p seed=True: seed is declared 'seed: int'"),  # a bool is no integer
        ({"n": "x"}, "'x' is not an integer or None"),
        ({"flag": "yes"}, "'yes' is not true or false"),
        ({"sizes": "[1, a]"}, "'[1, a]' is not a list[int] written like [1, 2] or None"),
    ):
        with pytest.raises(runner.RunError, match=re.escape(message)):
            check(**given)

    # the converted value is what the notebook gets, and what names the run's folder
    quiet = dict(root=toy_book, progress=False, echo=lambda *_: None, dry_run=True)
    summary = runner.run(overrides={"seed": "1", "n": "none"}, **quiet)
    assert summary.tag == "seed1" and {j.status for j in summary.jobs} == {"pending"}
    assert summary.jobs[1].params == {"profile": "reduced", "seed": 1, "n": None}
    assert runner.run(overrides={"seed": "0"}, **quiet).tag == ""  # seed 0 is the default run
    assert not (toy_book / "_build").exists()  # a local dry run executes nothing


def test_numeric_options_out_of_range_are_refused(toy_book: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    for argv, message in (
        (["--timeout", "-5"], "--timeout (seconds per notebook) must be a finite real number > 0"),
        (["--timeout", "0"], "--timeout (seconds per notebook) must be a finite real number > 0"),
        (["--timeout", "inf"], "--timeout (seconds per notebook) must be a finite real number"),
        (["--jobs", "0"], "--jobs (chapters at once) must be an integer >= 1, got 0"),
        (["--jobs", "-1", "--executor", "slurm", "--dry-run"], "must be an integer >= 1"),
    ):
        assert cli.main(["run", "--no-progress", *argv]) == 2, argv
        assert message in one_line(capsys.readouterr().err), argv
    with pytest.raises(runner.RunError, match="--timeout"):
        runner.run(root=toy_book, timeout=-5, progress=False)
    assert not (toy_book / "_build").exists()


def test_a_missing_package_or_a_broken_parameters_cell_is_one_line(
    toy_book: Path, monkeypatch, capsys
) -> None:
    """A bare install without submitit, or a parameters cell that is not Python: one line on
    stderr and exit 2, never a traceback."""
    from reprobook import runner

    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))

    def no_submitit(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'submitit'", name="submitit")

    monkeypatch.setattr(runner, "run", no_submitit)
    assert cli.main(["run", "--no-progress"]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("reprobook run: submitit is not installed; install the book's")

    def broken(*args, **kwargs):
        raise SyntaxError("invalid syntax", ("01_draw.ipynb", 2, 1, "seed: int = = 0"))

    monkeypatch.setattr(runner, "run", broken)
    assert cli.main(["run", "--no-progress"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "a parameters cell does not parse (01_draw.ipynb, line 2): invalid syntax" in line


# ------------------------------------------------------------------ inputs and the preflight

_INPUTS_CONFIG = """RESOURCES = {
    'full': Resources(gpus=0, cpus=2, mem_gb=4, hours=1, inputs=(
        Input(name='jsonlib', kind='package', find='module:json', get='comes with Python'),
        Input(name='Big model', kind='weights', find='hf-model:nobody/no-such-model',
              get='hf download nobody/no-such-model', licence='Apache-2.0',
              size_gb=28.0, unless='llm=emulated'),
        Input(name='Some data', kind='dataset', find='env-path:TOY_DATA_DIR',
              get='set TOY_DATA_DIR to the unpacked archive'),
    )),
}
"""


def test_inputs_are_read_from_the_config_text_and_checked(
    toy_book: Path, tmp_path: Path, monkeypatch
) -> None:
    from reprobook.core import resources

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("TOY_DATA_DIR", raising=False)
    config = toy_book / "lib" / "reprobook" / "papers" / "toy" / "config.py"
    config.write_text(_INPUTS_CONFIG)
    res = resources.read_resources(config, "full")
    assert [i.name for i in res.inputs] == ["jsonlib", "Big model", "Some data"]
    assert resources.read_resources(config, "reduced").inputs == ()
    assert [i.name for i in resources.missing_inputs(res)] == ["Big model", "Some data"]
    assert [i.name for i in resources.missing_inputs(res, {"llm": "emulated"})] == ["Some data"]
    # present once there: a snapshot with a config in the hub cache, a folder named by the env
    snap = tmp_path / "hf" / "hub" / "models--nobody--no-such-model" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    assert resources.missing_inputs(res)[0].name == "Big model"  # no config.json yet
    (snap / "config.json").write_text("{}")
    monkeypatch.setenv("TOY_DATA_DIR", str(tmp_path))
    assert resources.missing_inputs(res) == []
    # a dataset is found in either cache: the hub's snapshots or datasets' prepared folder
    data = resources.Input(name="d", kind="dataset", find="hf-dataset:org/set", get="x")
    assert not resources.input_present(data)
    (tmp_path / "hf" / "datasets" / "org___set").mkdir(parents=True)
    assert resources.input_present(data)


@pytest.mark.parametrize(
    "text, message",
    [
        ("inputs=[Input(name='a', kind='model', find='module:x', get='y')]", "Input.kind"),
        ("inputs=(Input(name='a', kind='data', find='url:x', get='y'),)", "Input.find"),
        ("inputs=(Input(name='a', kind='data', find='module:x', get=''),)", "Input.get"),
        ("inputs=(Input(name='a', kind='data', find='module:x', get='y', unless='x'),)", "unless"),
        ("inputs=(Input(name='a', kind='data', find='module:x', get='y', ur='z'),)", "fields"),
        ("inputs=(Input(name=NAME, kind='data', find='module:x', get='y'),)", "literal"),
        ("inputs=(dict(name='a'),)", r"Input\(\.\.\.\) calls"),
        ("inputs='CIFAR'", "tuple of Input"),
    ],
)
def test_malformed_inputs_are_refused_with_the_file_and_the_reason(
    toy_book: Path, text: str, message: str
) -> None:
    from reprobook.core import resources

    config = toy_book / "lib" / "reprobook" / "papers" / "toy" / "config.py"
    config.write_text(f"RESOURCES = {{'full': Resources(gpus=0, {text})}}\n")
    with pytest.raises(ValueError, match=message) as err:
        resources.read_resources(config, "full")
    assert str(config) in str(err.value)


def test_full_profile_stops_before_any_work_listing_every_missing_input(
    toy_book: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("TOY_DATA_DIR", raising=False)
    (toy_book / "lib" / "reprobook" / "papers" / "toy" / "config.py").write_text(_INPUTS_CONFIG)
    assert cli.main(["run", "toy", "--profile", "full", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "needs inputs this machine lacks; nothing was run" in err
    assert "Big model (weights, Apache-2.0, 28 GB)" in err and "-p llm=emulated" in err
    assert "Some data (dataset, unknown)" in err and "TOY_DATA_DIR" in err
    assert "jsonlib" not in err  # present
    assert not (toy_book / "_build" / "results").exists()  # nothing ran, nothing was removed
    # the reduced profile declares no inputs and runs; list shows each input and where it is
    assert cli.main(["list", "--profile", "full"]) == 0
    out = capsys.readouterr().out
    assert "    input: jsonlib (package, unknown), present; get: comes with Python" in out
    assert "    input: Big model (weights, Apache-2.0, 28 GB), missing here; get:" in out


def test_every_chapter_that_declares_inputs_is_stopped_by_the_preflight(monkeypatch) -> None:
    """On a machine with none of the inputs, the full profile of the book names, per chapter,
    every input its RESOURCES declare, and the stand-in a parameter selects (14)."""
    from reprobook.core import resources

    monkeypatch.setattr(resources, "input_present", lambda item, *where: False)
    chapters = runner.select_chapters(ROOT, None)
    declared = {
        ch.slug: resources.read_resources(
            ROOT / "lib" / "reprobook" / "papers" / ch.slug / "config.py", "full"
        ).inputs
        for ch in chapters
    }
    with_inputs = {slug for slug, inputs in declared.items() if inputs}
    assert {"facts_leaderboard", "tailcon", "tagbo", "tsqbench", "aeo_injection"} <= with_inputs
    assert {"dcat_merging", "stomatabench"} <= with_inputs
    everything = {ch.slug: set(ch.notebook_stems()) for ch in chapters}
    message = runner.preflight(ROOT, chapters, everything, "full", {})
    for slug in with_inputs:
        assert f" {slug}:" in message
        for item in declared[slug]:
            assert item.describe() in message and item.get in message
    assert "-p modelcompose=False" in message
    dcat = {"dcat_merging": everything["dcat_merging"]}
    waived = runner.preflight(ROOT, chapters, dcat, "full", {"modelcompose": False})
    assert waived == ""  # the stand-in needs none of them
    assert runner.preflight(ROOT, chapters, everything, "reduced", {}) == ""
    # an input that only some notebooks use is not asked of the others (08's CIFAR-10)
    tail = runner.preflight(
        ROOT, chapters, {"tailcon": {"03_mnist1d", "04_tail_erosion"}}, "full", {}
    )
    assert tail == "" and "CIFAR-10" in runner.preflight(
        ROOT, chapters, {"tailcon": {"02_memory_consolidation"}}, "full", {}
    )


def test_a_notebook_run_by_hand_at_full_stops_at_start_without_its_inputs(
    toy_book: Path, tmp_path: Path, monkeypatch
) -> None:
    """core.start is where a notebook run outside the runner (Jupyter, papermill, Colab)
    meets the same check, for the inputs this notebook uses, waived by its config's fields."""
    import dataclasses

    from reprobook import core

    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("TOY_DATA_DIR", raising=False)
    (toy_book / "lib" / "reprobook" / "papers" / "toy" / "config.py").write_text(
        _INPUTS_CONFIG.replace(
            "get='set TOY_DATA_DIR to the unpacked archive'",
            "get='set TOY_DATA_DIR to the unpacked archive', notebooks=('02_count',)",
        )
    )

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        llm: str = "real"

    with pytest.raises(core.MissingInputs, match="(?s)Big model.*Some data"):
        core.begin("toy", "02_count", profile="full", config=Cfg())
    with pytest.raises(core.MissingInputs) as err:
        core.begin("toy", "01_draw", profile="full", config=Cfg())
    assert "Big model" in str(err.value) and "Some data" not in str(err.value)
    core.begin("toy", "01_draw", profile="full", config=Cfg(llm="emulated"))  # waived
    core.begin("toy", "02_count", profile="reduced", config=Cfg())  # nothing declared


# ------------------------------------------------------------------ archived runs


def test_archive_keeps_a_run_and_the_ledger_shows_it_beside_the_reduced_verdict(
    toy_book: Path, monkeypatch, capsys
) -> None:
    from reprobook import archive, site

    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    quiet = dict(root=toy_book, progress=False, echo=lambda *_: None)
    # refused before there is a full run to keep
    assert cli.main(["archive", "toy"]) == 2
    assert "no full-profile results for 01_draw, 02_count" in capsys.readouterr().err
    runner.run(**quiet)
    runner.run(profile="full", **quiet)
    assert cli.main(["archive", "toy", "--profile", "full"]) == 0
    manifest = archive.read_manifest(toy_book, "full", "toy")
    assert [n["notebook"] for n in manifest["notebooks"]] == ["01_draw", "02_count"]
    assert all(n["wall_s"] > 0 and n["started"] for n in manifest["notebooks"])
    assert manifest["hardware"]["cores"] >= 1
    assert sorted(p.name for p in (toy_book / "archive" / "full" / "toy").iterdir()) == [
        "01_draw.json",
        "02_count.json",
    ]
    rows = ledger.attach_archived(ledger.collect("reduced", toy_book), toy_book)
    full = {r["claim"]: r for r in ledger.collect("full", toy_book)}
    for r in rows:  # the archived verdict is the full run's, under the current check
        a = r["archived"]
        assert (
            a["verdict"] == full[r["claim"]]["verdict"] and a["value"] == full[r["claim"]]["value"]
        )
        assert a["profile"] == "full" and not a["stale"] and a["when"] and a["ran_on"]
    assert "full profile (archived run)" in site.status_box(rows, "reduced")
    assert "full (archived)" in ledger.render(rows, "markdown")
    # the full results go; the archive stays, and goes stale when the claims file changes
    shutil.rmtree(toy_book / "_build" / "results" / "full")
    claims = toy_book / "notebooks" / "01_toy" / "claims.yml"
    claims.write_text(claims.read_text() + "\n# edited\n")
    rows = ledger.attach_archived(ledger.collect("reduced", toy_book), toy_book)
    assert all(r["archived"]["stale"] for r in rows)
    assert "[STALE]" in ledger.archived_cell(rows[0])
    # and a stale result is not archived
    runner.run(profile="full", **quiet)
    claims.write_text(claims.read_text() + "# again\n")
    with pytest.raises(archive.ArchiveError, match="other versions of claims.yml"):
        archive.archive_chapter(
            toy_book,
            runner.select_chapters(toy_book, ["toy"])[0],
            "full",
            toy_book / "_build" / "results",
            runner.load_state(toy_book, "full"),
        )


def test_a_kernel_that_died_before_starting_is_started_once_more(monkeypatch) -> None:
    """Only a kernel that never started is retried, and only once; a failing cell is not."""
    calls = []

    def fake(errors):
        def once(job, root, env, timeout, measure_memory=True):
            calls.append(job.notebook)
            error = errors[len(calls) - 1]
            job.status, job.error = ("failed", error) if error else ("ok", None)
            return job

        return once

    job = lambda: runner.Job("toy", "nb.ipynb", {}, "k", "out.ipynb")  # noqa: E731
    died = f"RuntimeError: {runner.KERNEL_NOT_STARTED}"
    monkeypatch.setattr(execute, "_execute_once", fake([died, None]))
    assert runner._execute(job(), ROOT, {}, None).status == "ok" and len(calls) == 2
    calls.clear()
    monkeypatch.setattr(execute, "_execute_once", fake([died, died]))
    assert runner._execute(job(), ROOT, {}, None).status == "failed" and len(calls) == 2
    calls.clear()
    monkeypatch.setattr(execute, "_execute_once", fake(["ValueError: a cell failed"]))
    assert runner._execute(job(), ROOT, {}, None).error == "ValueError: a cell failed"
    assert len(calls) == 1


def test_chapters_start_longest_first_by_their_last_wall_times() -> None:
    def job(chapter: str, name: str) -> runner.Job:
        nb = f"notebooks/{chapter}/{name}.ipynb"
        return runner.Job(chapter=chapter, notebook=nb, params={}, key="k", output=nb)

    pending = [job("a", "01"), job("b", "01"), job("b", "02"), job("c", "01"), job("d", "01")]

    def order(state: dict) -> list[str]:
        return [jobs[0].chapter for jobs in runner.longest_first(pending, state)]

    # never run: by number of notebooks, ties in the book's order
    assert order({}) == ["b", "a", "c", "d"]
    # last wall times: c 50 s, a 20 s, b 10 + 5 s; d never ran: the mean, (20 + 10 + 5 + 50) / 4
    state = {
        "notebooks/a/01.ipynb": {"wall_s": 20.0},
        "notebooks/b/01.ipynb": {"wall_s": 10.0},
        "notebooks/b/02.ipynb": {"wall_s": 5.0},
        "notebooks/c/01.ipynb": {"wall_s": 50.0},
    }
    assert order(state) == ["c", "d", "a", "b"]  # d: 21.25 s
    # a chapter's own notebooks keep their order
    assert [Path(j.notebook).stem for j in runner.longest_first(pending, state)[3]] == ["01", "02"]
