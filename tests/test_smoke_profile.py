"""The smoke profile: the full profile's code path cut to seconds, on fixtures of its inputs.

Two halves: the machinery (profiles, fixtures, locate, the runner and the record of
stand-ins) on a throwaway toy book, and the real book's chapters held to the profile's rules
(every notebook has a smoke configuration that differs from the full one in sizes only, and
every input that is not a package has a fixture builder)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import typing
from pathlib import Path

import pytest
from conftest import ROOT

from reprobook import cli, core, ledger
from reprobook.core import fixtures, profiles, resources
from reprobook.core.chapters import find_chapters

_TOY_CONFIG = """RESOURCES = {
    'full': Resources(gpus=1, cpus=8, mem_gb=64, hours=2, inputs=(
        Input(name='jsonlib', kind='package', find='module:json', get='comes with Python'),
        Input(name='Big model', kind='weights', find='hf-model:nobody/big-model',
              get='hf download nobody/big-model', unless='llm=emulated'),
        Input(name='Some data', kind='dataset', find='env-path:TOY_DATA_DIR',
              get='set TOY_DATA_DIR', notebooks=('02_count',)),
    )),
}
"""

_TOY_FIXTURES = """from pathlib import Path

CALLS = []


def big_model(dest: Path) -> None:
    CALLS.append('model')
    (dest / 'config.json').write_text('{"model_type": "toy"}')


def data(dest: Path) -> None:
    (dest / 'rows.txt').write_text('1\\n2\\n')


FIXTURES = {'hf-model:nobody/big-model': big_model, 'env-path:TOY_DATA_DIR': data}
"""


@pytest.fixture
def smoke_book(toy_book: Path, tmp_path: Path, monkeypatch) -> Path:
    package = toy_book / "lib" / "reprobook" / "papers" / "toy"
    (package / "config.py").write_text(_TOY_CONFIG)
    (package / "fixtures.py").write_text(_TOY_FIXTURES)
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("TOY_DATA_DIR", raising=False)
    monkeypatch.delenv(fixtures.FIXTURES_ENV, raising=False)
    return toy_book


def test_smoke_runs_the_full_path_and_takes_the_full_check() -> None:
    assert core.PROFILE_NAMES == ("reduced", "full", "smoke")
    assert [core.runs_full_path(p) for p in core.PROFILE_NAMES] == [False, True, True]
    with pytest.raises(core.ProfileError, match="valid profiles: reduced, full, smoke"):
        core.runs_full_path("tiny")
    ch = next(c for c in find_chapters(ROOT) if c.slug == "spr_ldp")
    split = [c for c in ch.claims if "reduced" in c.check]
    for claim in ch.claims:
        assert claim.check_for("smoke") == claim.check_for("full")
    assert all(c.check_for("smoke") is c.check["full"] for c in split)


def test_a_table_without_smoke_is_refused_with_what_to_declare() -> None:
    @dataclasses.dataclass(frozen=True)
    class Sizes:
        n: int

    with pytest.raises(core.ProfileError, match="no smoke profile: declare one beside 'full'"):
        core.resolve({"reduced": Sizes(1), "full": Sizes(9)}, "smoke")


def test_locate_answers_the_hub_id_at_full_and_the_fixture_at_smoke(
    smoke_book: Path, monkeypatch
) -> None:
    find = "hf-model:nobody/big-model"
    assert core.locate("toy", find, "full") == "nobody/big-model"
    assert core.locate("toy", "module:json", "smoke") == "json"
    where = Path(core.locate("toy", find, "smoke"))
    assert where == fixtures.fixture_path(smoke_book, "toy", find)
    assert json.loads((where / "config.json").read_text()) == {"model_type": "toy"}
    assert where.parent.parent.name.startswith("toy-") and "_build/fixtures" in str(where)
    with pytest.raises(ValueError, match="uses no inputs"):
        core.locate("toy", find, "reduced")
    with pytest.raises(ValueError, match="declares no input 'hf-model:nobody/other'"):
        core.locate("toy", "hf-model:nobody/other", "full")
    with pytest.raises(core.MissingInputs, match="TOY_DATA_DIR is not set"):
        core.locate("toy", "env-path:TOY_DATA_DIR", "full")
    monkeypatch.setenv("TOY_DATA_DIR", "/data/toy")
    assert core.locate("toy", "env-path:TOY_DATA_DIR", "full") == "/data/toy"


def test_fixtures_are_built_once_and_again_when_their_builder_changes(smoke_book: Path) -> None:
    find = "hf-model:nobody/big-model"
    first = fixtures.ensure(smoke_book, "toy", [find, "module:json"])
    assert list(first) == [find]  # a package has no fixture
    stamp = (first[find] / "config.json").stat().st_mtime_ns
    assert fixtures.ensure(smoke_book, "toy", [find])[find].stat().st_mtime_ns > 0
    assert (first[find] / "config.json").stat().st_mtime_ns == stamp  # not rebuilt
    source = fixtures.fixtures_file(smoke_book, "toy")
    source.write_text(source.read_text().replace('"toy"', '"toy2"'))
    second = fixtures.ensure(smoke_book, "toy", [find])[find]
    assert second != first[find]
    assert json.loads((second / "config.json").read_text()) == {"model_type": "toy2"}


def test_a_failing_or_missing_builder_leaves_nothing_behind_and_says_which(
    smoke_book: Path,
) -> None:
    source = fixtures.fixtures_file(smoke_book, "toy")
    source.write_text(
        _TOY_FIXTURES.replace(
            "CALLS.append('model')", "(dest / 'half').write_text('x'); raise OSError('disk full')"
        )
    )
    find = "hf-model:nobody/big-model"
    with pytest.raises(fixtures.FixtureError, match="big-model failed: OSError: disk full"):
        fixtures.ensure(smoke_book, "toy", [find])
    folder = fixtures.fixture_path(smoke_book, "toy", find).parent
    assert not folder.exists() or list(folder.iterdir()) == []
    source.write_text("FIXTURES = {}\n")
    with pytest.raises(fixtures.FixtureError, match="no smoke fixture for hf-model:nobody/big"):
        fixtures.ensure(smoke_book, "toy", [find, "env-path:TOY_DATA_DIR"])
    source.write_text(
        "def build(dest):\n    pass\n\nFIXTURES = {'hf-model:nobody/big-model': build}\n"
    )
    with pytest.raises(fixtures.FixtureError, match="wrote nothing"):
        fixtures.ensure(smoke_book, "toy", [find])


def test_the_runner_builds_fixtures_runs_at_smoke_and_shows_no_verdict(
    smoke_book: Path, capsys
) -> None:
    assert cli.main(["run", "toy", "--profile", "smoke", "--no-progress"]) == 0
    results = smoke_book / "_build" / "results" / "smoke" / "toy"
    record = json.loads((results / "01_draw.json").read_text())
    assert record["profile"] == "smoke" and "T1" in record["claims"]
    assert record["stand_ins"] == {}
    for find in ("hf-model:nobody/big-model", "env-path:TOY_DATA_DIR"):
        assert fixtures.fixture_path(smoke_book, "toy", find).is_dir()
    # never a verdict: the notebook's label says so, and the book's ledger never reads smoke
    run = core.begin("toy", "01_draw", profile="smoke")
    run.record("T1", 0.1)
    assert run.verdict("T1") == "reproduced"  # the full check is exercised
    assert run.verdict_label("T1") == "smoke run: no verdict"
    assert set(run.claims_table()["verdict"]) == {"smoke run: no verdict"}
    assert not (smoke_book / "_build" / "results" / "reduced").exists()
    assert all(r["value"] is None for r in ledger.collect("reduced", smoke_book))
    capsys.readouterr()
    assert cli.main(["list", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "needs at the smoke profile: no GPU, 2 cores, 8 GiB, 0.1 h" in out
    assert "input: Big model (weights, unknown) as a smoke fixture, fixture built" in out


def test_a_smoke_fixture_that_cannot_be_built_stops_the_run_before_any_work(
    smoke_book: Path, capsys
) -> None:
    fixtures.fixtures_file(smoke_book, "toy").write_text("FIXTURES = {}\n")
    assert cli.main(["run", "toy", "--profile", "smoke", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "fixtures could not be built; nothing was run" in err
    assert "no smoke fixture for hf-model:nobody/big-model, env-path:TOY_DATA_DIR" in err
    assert not (smoke_book / "_build" / "results").exists()


def test_a_deliberate_stand_in_is_recorded_and_shown_beside_the_verdict(smoke_book: Path) -> None:
    @dataclasses.dataclass(frozen=True)
    class Cfg:
        llm: str = "real"

    run = core.begin("toy", "01_draw", profile="smoke", config=Cfg(llm="emulated"))
    run.record("T1", 0.2)
    record = json.loads(run.path.read_text())
    assert record["stand_ins"] == {"llm": "emulated"}
    row = next(r for r in ledger.collect("smoke", smoke_book) if r["claim"] == "T1")
    assert row["stand_ins"] == {"llm": "emulated"}  # it reaches the ledger's rows
    # not chosen: no stand-in; an input the notebook does not use waives nothing
    assert (
        json.loads(core.begin("toy", "01_draw", "smoke", config=Cfg()).path.read_text())[
            "stand_ins"
        ]
        == {}
    )
    row = {"profile": "full", "overrides": {}, "stand_ins": {"llm": "emulated"}}
    assert ledger.run_cell(row) == "full (stand-in llm=emulated)"
    row["overrides"] = {"n": 3}
    assert ledger.run_cell(row) == "full (n=3, stand-in llm=emulated)"
    archived = {
        "archived": {
            "verdict_label": "reproduced",
            "value": 0.2,
            "stand_ins": {"llm": "emulated"},
            "ran_on": "1 GPU (H100), 16 cores",
            "when": "2026-12-05",
            "commit": "abc1234",
        }
    }
    assert "reproduced: 0.2 [stand-in llm=emulated] (1 GPU" in ledger.archived_cell(archived)


# ------------------------------------------------------------------ the book's chapters

CHAPTERS = find_chapters(ROOT)


def _numeric(annotation) -> bool:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if annotation in (int, float):
        return True
    return bool(args) and all(_numeric(a) for a in args if a is not Ellipsis)


def _numbers(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, tuple) and all(_numbers(v) for v in value)


def size_only_differences(full, smoke, prefix: str = "") -> list[str]:
    """The fields where ``smoke`` departs from ``full`` other than by a size: a changed
    string, switch or None, or a tuple of names that is not a part of the full one's (nested
    configurations field by field)."""
    bad = []
    for field in dataclasses.fields(full):
        a, b = getattr(full, field.name), getattr(smoke, field.name)
        if a == b:
            continue
        if dataclasses.is_dataclass(a) and type(a) is type(b):
            bad += size_only_differences(a, b, f"{prefix}{field.name}.")
            continue
        if _numbers(a) and _numbers(b):
            continue
        if (
            isinstance(a, tuple)
            and isinstance(b, tuple)
            and b
            and all(x in a for x in b)
            and not any(_numbers(x) for x in a)
        ):
            continue
        bad.append(f"{prefix}{field.name}: full {a!r}, smoke {b!r}")
    return bad


def test_size_only_rule_catches_a_changed_switch_or_model() -> None:
    @dataclasses.dataclass(frozen=True)
    class C:
        n: int = 10
        grid: tuple[float, ...] = (0.1, 0.2)
        tables: tuple[str, ...] = ("a", "b")
        model: str = "big"
        exact: bool = True

    @dataclasses.dataclass(frozen=True)
    class Outer:
        inner: C = C()
        steps: int = 100

    assert size_only_differences(Outer(), Outer(inner=C(n=2), steps=3)) == []
    assert size_only_differences(Outer(), Outer(inner=C(model="tiny"))) == [
        "inner.model: full 'big', smoke 'tiny'"
    ]
    full = C()
    assert size_only_differences(full, C(n=1, grid=(0.1,), tables=("b",))) == []
    assert size_only_differences(full, C(model="small")) == ["model: full 'big', smoke 'small'"]
    assert size_only_differences(full, C(exact=False)) == ["exact: full True, smoke False"]
    assert size_only_differences(full, C(tables=("c",))) == [
        "tables: full ('a', 'b'), smoke ('c',)"
    ]
    assert size_only_differences(full, C(tables=())) != []


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.slug)
def test_every_notebook_has_a_smoke_configuration_that_cuts_sizes_only(chapter) -> None:
    config = importlib.import_module(f"reprobook.papers.{chapter.slug}.config")
    for name, table in config.PROFILES.items():
        assert "smoke" in table, f"{chapter.slug}: notebook {name} has no smoke configuration"
        full, smoke = table["full"], table["smoke"]
        assert type(smoke) is type(full)
        assert size_only_differences(full, smoke) == [], f"{chapter.slug}/{name}"
        assert profiles.resolve(table, "smoke") == smoke


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.slug)
def test_every_input_of_the_full_profile_has_a_smoke_fixture(chapter) -> None:
    declared = resources.chapter_resources(ROOT, chapter.slug, "full").inputs
    assert resources.chapter_resources(ROOT, chapter.slug, "smoke").inputs == declared
    wanted = {i.find for i in declared if not i.find.startswith("module:")}
    table = fixtures.builders(ROOT, chapter.slug)
    assert wanted <= set(table), f"{chapter.slug}: no fixture for {sorted(wanted - set(table))}"
    assert set(table) <= wanted, f"{chapter.slug}: fixtures of undeclared inputs"


def test_the_smoke_profile_is_part_of_make_test() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = lambda target: makefile.split(f"\n{target}:")[1].split("\n\n")[0]  # noqa: E731
    assert "$(MAKE) --no-print-directory smoke" in recipe("test")
    smoke = recipe("smoke")
    assert "reprobook run --profile smoke --jobs $(JOBS)" in smoke
    # the only stand-in it chooses is the detector of chapter 15 (no CPU torchvision)
    assert smoke.count(" -p ") == 1 and "-p detector=toy" in smoke


def test_smoke_kernels_run_on_one_thread_even_alone(tmp_path: Path, monkeypatch) -> None:
    from reprobook import execute

    for var in ("REPROBOOK_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    alone = execute.kernel_env(tmp_path, "smoke", 1)
    assert all(alone[v] == "1" for v in ("REPROBOOK_THREADS", "OMP_NUM_THREADS"))
    assert "OMP_NUM_THREADS" not in execute.kernel_env(tmp_path, "full", 1)
    assert execute.kernel_env(tmp_path, "full", 2)["OMP_NUM_THREADS"] == "1"
