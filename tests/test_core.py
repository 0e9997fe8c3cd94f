"""reprobook.core: profiles, claims checks and records, seeding, atomic writes."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

from reprobook import core
from reprobook.core import chapters, claims, paths, profiles, runtime
from conftest import TOY_CLAIMS


@dataclasses.dataclass(frozen=True)
class Sizes:
    n: int  # instances
    eps: tuple[float, ...]  # privacy levels
    lr: float = 0.1  # a float
    name: str = "a"  # a string
    k_max: int | None = None  # optional


PROFILES = {"reduced": Sizes(n=10, eps=(0.5, 1.0)), "full": Sizes(n=1000, eps=(0.1, 0.5, 1.0))}


def test_resolve_profile_and_overrides() -> None:
    assert profiles.resolve(PROFILES, "reduced") == PROFILES["reduced"]
    assert profiles.resolve(PROFILES, "full").n == 1000
    cfg = profiles.resolve(PROFILES, "reduced", n=3, eps=[1, 2], lr=1, k_max=None)
    assert cfg == Sizes(n=3, eps=(1, 2), lr=1.0)
    assert isinstance(cfg.lr, float) and isinstance(cfg.eps, tuple)
    assert profiles.resolve(PROFILES, "reduced", k_max=5).k_max == 5


def test_resolve_errors_name_the_valid_choices() -> None:
    with pytest.raises(core.ProfileError, match="unknown profile 'fast'; valid profiles: full, reduced"):
        profiles.resolve(PROFILES, "fast")
    with pytest.raises(core.ProfileError, match="unknown override key.*nn.*valid keys: n, eps, lr, name, k_max"):
        profiles.resolve(PROFILES, "reduced", nn=3)
    with pytest.raises(core.ProfileError, match="n='3' does not fit"):
        profiles.resolve(PROFILES, "reduced", n="3")
    with pytest.raises(core.ProfileError, match="n=True does not fit"):
        profiles.resolve(PROFILES, "reduced", n=True)
    with pytest.raises(core.ProfileError, match="eps="):
        profiles.resolve(PROFILES, "reduced", eps=["a"])


def _claim(check) -> chapters.Claim:
    return chapters.Claim(id="C", claim="c", metric="m", paper_value="p", source="abstract", notebook="01_x", check=check)


def test_verdicts_follow_the_check() -> None:
    c = _claim({"reproduced": {"max": 1e-6}, "partial": {"max": 1e-3}})
    assert c.verdict(0.0, "reduced") == "reproduced"
    assert c.verdict(1e-6, "reduced") == "reproduced"
    assert c.verdict(1e-4, "reduced") == "partial"
    assert c.verdict(0.1, "reduced") == "not_reproduced"
    assert c.verdict(None, "reduced") == "not_run"
    band = _claim({"reproduced": {"min": 2.5, "max": 3.5}})
    assert [band.verdict(v, "full") for v in (2.4, 3.0, 3.6)] == ["not_reproduced", "reproduced", "not_reproduced"]
    flag = _claim({"reproduced": {"equals": True}})
    assert flag.verdict(True, "reduced") == "reproduced"
    assert flag.verdict(False, "reduced") == "not_reproduced"
    assert flag.verdict(1.0, "reduced") == "not_reproduced"
    per = _claim({"reduced": {"needs_full": True}, "full": {"reproduced": {"min": 0.9}}})
    assert per.verdict(0.95, "reduced") == "needs_full"
    assert per.verdict(None, "reduced") == "needs_full"
    assert per.verdict(0.95, "full") == "reproduced"
    assert per.verdict(None, "full") == "not_run"
    never = _claim({"not_checkable": "the meshes live on a hub these machines cannot reach"})
    assert never.verdict(None, "reduced") == never.verdict(0.3, "full") == "not_checkable"


@pytest.mark.parametrize("text, message", [
    ("paper: {}\nclaims: [{id: C1}]", "missing key"),
    ("claims: []", "needs a 'paper' mapping"),
    (TOY_CLAIMS.replace("source: reconstruction", "source: blog"), "source 'blog' is not one of"),
    (TOY_CLAIMS.replace("reproduced: {max: 0.5}", "reproduced: {maximum: 0.5}"), "unknown condition key"),
    (TOY_CLAIMS.replace("reproduced: {max: 0.5}", "partial: {max: 0.5}"), "needs a 'reproduced' condition"),
    (TOY_CLAIMS.replace("id: T2", "id: T1"), "duplicate claim id T1"),
    (TOY_CLAIMS.replace("check:\n      reproduced: {max: 0.5}", "check:\n      full: {reproduced: {max: 1}}"),
     "names both profiles; missing: reduced"),
    (TOY_CLAIMS.replace("check:\n      reproduced: {max: 0.5}", "check:\n      fast: {reproduced: {max: 1}}"),
     "unknown key"),
    ("paper: {}\nclaims: [", "not valid YAML"),
    (TOY_CLAIMS.replace("reproduced: {max: 0.5}", "not_checkable: ''"), "not_checkable stands alone"),
    (TOY_CLAIMS.replace("reproduced: {max: 0.5}", "{not_checkable: why, reproduced: {max: 1}}"), "not_checkable stands alone"),
])
def test_bad_claims_files_are_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "claims.yml"
    path.write_text(text)
    with pytest.raises(chapters.ClaimsFileError, match=message):
        chapters.load_claims_file(path)


def test_claim_naming_a_missing_notebook_is_refused(toy_book: Path) -> None:
    (toy_book / "notebooks" / "01_toy" / "02_count.ipynb").unlink()
    with pytest.raises(chapters.ClaimsFileError, match="claim T2 names notebook '02_count'"):
        chapters.find_chapters(toy_book)


def test_run_records_atomically_and_validates(toy_book: Path, monkeypatch) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    monkeypatch.delenv("REPROBOOK_RESULTS", raising=False)
    run = core.start("toy", "01_draw", profile="reduced", seed=3, config=PROFILES["reduced"], threads=1)
    assert run.record("T1", np.float64(0.25), n=np.int64(4)) == "reproduced"
    data = json.loads(run.path.read_text())
    assert run.path == toy_book / "_build" / "results" / "reduced" / "toy" / "01_draw.json"
    assert data["claims"]["T1"]["value"] == 0.25 and data["claims"]["T1"]["details"] == {"n": 4}
    assert data["seed"] == 3 and data["config"]["eps"] == [0.5, 1.0]
    assert {"git_commit", "packages", "hardware", "python"} <= set(data["facts"])
    assert not list(run.path.parent.glob(".*tmp"))  # no temporary file left behind
    table = run.claims_table()
    assert table.loc["T1", "verdict"] == "reproduced" and table.loc["T1", "ours"] == "0.25"
    whole = run.claims_table(whole_chapter=True)
    assert list(whole.index) == ["T1", "T2"] and whole.loc["T2", "verdict"] == "not run"
    with pytest.raises(KeyError, match="no claim 'T9'; its claims: T1, T2"):
        run.record("T9", 1.0)
    with pytest.raises(ValueError, match="belongs to notebook 02_count"):
        run.record("T2", 1)
    with pytest.raises(ValueError, match="must be finite"):
        run.record("T1", float("nan"))
    with pytest.raises(TypeError, match="number or a bool"):
        run.record("T1", "0.3")
    with pytest.raises(ValueError, match="record the measured value, not None"):
        run.record("T1", None)  # None is only for claims that need the full profile
    with pytest.raises(ValueError, match="unknown profile 'big'"):
        core.start("toy", "01_draw", profile="big")
    with pytest.raises(ValueError, match="no notebook '03_x'; its notebooks: 01_draw, 02_count"):
        core.start("toy", "03_x")
    with pytest.raises(ValueError, match="no chapter 'nope'; chapters: toy"):
        core.start("nope", "01_draw")


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "r.json"
    paths.atomic_write_text(target, "old")

    def boom(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        paths.atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_seed_everything_is_deterministic_and_sets_threads() -> None:
    import random

    import torch

    draws = []
    for _ in range(2):
        assert runtime.seed_everything(11, threads=1) == 1
        draws.append((random.random(), np.random.rand(), torch.rand(1).item()))
    assert draws[0] == draws[1]
    assert torch.get_num_threads() == 1
    assert os.environ["PL_GLOBAL_SEED"] == "11"
    runtime.seed_everything(12, threads=1)
    assert np.random.rand() != draws[0][1]
    with pytest.raises(ValueError, match="seed must be an integer"):
        runtime.seed_everything(-1)


def test_threads_from_environment(monkeypatch) -> None:
    monkeypatch.setenv("REPROBOOK_THREADS", "1")
    assert runtime.default_threads() == 1
    monkeypatch.setenv("REPROBOOK_THREADS", "zero")
    with pytest.raises(ValueError, match="REPROBOOK_THREADS"):
        runtime.default_threads()


def test_plain_makes_numpy_json_ready() -> None:
    out = claims.plain({"a": np.arange(3), "b": np.float32(0.5), "c": (np.int8(2), True)})
    assert json.loads(json.dumps(out)) == {"a": [0, 1, 2], "b": 0.5, "c": [2, True]}


def test_lightning_trainer_is_quiet_and_deterministic(capfd) -> None:
    import lightning as L
    import torch

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 1)

        def training_step(self, batch, _):
            x, y = batch
            return torch.nn.functional.mse_loss(self.lin(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    weights = []
    for _ in range(2):
        runtime.seed_everything(0, threads=1)
        x = torch.randn(32, 3)
        data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
        model = Tiny()
        core.make_trainer(max_steps=8).fit(model, data)
        weights.append(model.lin.weight.detach().clone())
    assert torch.equal(weights[0], weights[1])
    printed = "".join(capfd.readouterr())
    for chatter in ("GPU available", "TPU available", "Seed set", "litlogger", "does not have many workers"):
        assert chatter not in printed, printed


def test_resolve_notebook_names_the_notebooks() -> None:
    table = {"first": PROFILES, "second": PROFILES}
    assert profiles.resolve_notebook(table, "second", "full", n=2).n == 2
    with pytest.raises(core.ProfileError, match="unknown notebook 'third'; valid notebooks: first, second"):
        profiles.resolve_notebook(table, "third", "reduced")


# --- checkpoints shared between notebooks -------------------------------------------------------


def _linear_factory(calls):
    import torch

    def build():
        torch.manual_seed(0)
        return torch.nn.Linear(3, 2)

    def train(module):
        calls.append(1)
        with torch.no_grad():
            module.weight.add_(1.0)
        return module

    return build, train


def test_load_or_train_trains_once_then_loads(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    calls: list[int] = []
    build, train = _linear_factory(calls)
    first, loaded = core.load_or_train("spr_ldp", "toy", profile="reduced", key={"a": 1, "b": (1, 2)}, build=build, train=train)
    assert not loaded and calls == [1]
    second, loaded = core.load_or_train("spr_ldp", "toy", profile="reduced", key={"b": (1, 2), "a": 1}, build=build, train=train)
    assert loaded and calls == [1]
    assert torch.equal(first.weight, second.weight) and not second.training
    files = sorted(p.name for p in (tmp_path / "reduced" / "spr_ldp").iterdir())
    assert len(files) == 2 and files[0].endswith(".json") and files[1].endswith(".pt")
    # another key, another profile: trained again
    core.load_or_train("spr_ldp", "toy", profile="reduced", key={"a": 2, "b": (1, 2)}, build=build, train=train)
    core.load_or_train("spr_ldp", "toy", profile="full", key={"a": 1, "b": (1, 2)}, build=build, train=train)
    assert calls == [1, 1, 1]


def test_load_or_train_retrains_a_damaged_file(tmp_path, monkeypatch):
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    calls: list[int] = []
    build, train = _linear_factory(calls)
    core.load_or_train("spr_ldp", "toy", profile="reduced", key={"a": 1}, build=build, train=train)
    (pt,) = (tmp_path / "reduced" / "spr_ldp").glob("*.pt")
    pt.write_bytes(b"not a checkpoint")
    _, loaded = core.load_or_train("spr_ldp", "toy", profile="reduced", key={"a": 1}, build=build, train=train)
    assert not loaded and calls == [1, 1]
    _, loaded = core.load_or_train("spr_ldp", "toy", profile="reduced", key={"a": 1}, build=build, train=train)
    assert loaded and calls == [1, 1]


def test_load_or_train_refuses_bad_names_and_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    build, train = _linear_factory([])
    with pytest.raises(ValueError, match="letters, digits"):
        core.load_or_train("spr_ldp", "../up", profile="reduced", key={}, build=build, train=train)
    with pytest.raises(TypeError, match="checkpoint key"):
        core.load_or_train("spr_ldp", "toy", profile="reduced", key={"x": object()}, build=build, train=train)
    with pytest.raises(ValueError, match="no paper package"):
        core.load_or_train("no_such_slug", "toy", profile="reduced", key={}, build=build, train=train)
    assert not any(tmp_path.iterdir())


def test_not_checkable_claims_record_none_only(toy_book: Path, monkeypatch) -> None:
    monkeypatch.setenv("REPROBOOK_ROOT", str(toy_book))
    claims = toy_book / "notebooks" / "01_toy" / "claims.yml"
    claims.write_text(TOY_CLAIMS.replace("check:\n      reproduced: {max: 0.5}",
                                         "check:\n      not_checkable: the draw happens on another machine"))
    run = core.start("toy", "01_draw", profile="reduced", seed=0, config=PROFILES["reduced"], threads=1)
    with pytest.raises(ValueError, match="not_checkable in claims.yml: record None"):
        run.record("T1", 0.2)
    assert run.record("T1", None, why="elsewhere") == "not_checkable"
    assert run.claims_table().loc["T1", "verdict"] == "not checkable here"


def test_t_interval_matches_scipy_and_checks_its_input():
    import numpy as np
    import pytest
    from scipy import stats

    from reprobook.core import t_interval

    x = np.array([0.81, 0.86, 0.78, 0.9, 0.84])
    iv = t_interval(x, 0.9)
    lo, hi = stats.t.interval(0.9, df=4, loc=x.mean(), scale=stats.sem(x))
    assert abs(iv.low - lo) < 1e-12 and abs(iv.high - hi) < 1e-12
    assert iv.mean == pytest.approx(x.mean()) and iv.se == pytest.approx(stats.sem(x)) and iv.n == 5
    assert t_interval([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0, 0.0, 3)
    for bad, match in (([1.0], "at least 2"), ([1.0, np.nan], "finite"), ([1.0, 2.0, 3.0], "level")):
        with pytest.raises(ValueError, match=match):
            t_interval(bad, 1.5 if match == "level" else 0.95)
