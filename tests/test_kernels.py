"""Warm kernels (reprobook.kernels): forked from a server that imported the frameworks once, yet
each one the kernel an ordinary launch would give, or an ordinary kernel where it cannot be."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from reprobook import kernels

pytestmark = pytest.mark.skipif(not kernels.supported(), reason="warm kernels need Linux")

# a module that neither ipykernel nor IPython imports: in a kernel, only the server put it there
MARKER = "colorsys"


def test_only_per_kernel_variables_may_differ():
    server = {"PATH": "/bin", "OMP_NUM_THREADS": "1", "REPROBOOK_RESULTS": "/a"}
    same = {**server, "REPROBOOK_RESULTS": "/b", "JPY_PARENT_PID": "7", "PYTEST_X": "1"}
    assert kernels.env_mismatch(server, same) == []
    # ipykernel sets its inline backend when MPLBACKEND is unset, so unset is that backend
    inline = {**server, "MPLBACKEND": kernels.INLINE_BACKEND}
    assert kernels.env_mismatch(server, inline) == []
    assert kernels.env_mismatch(server, {**server, "MPLBACKEND": "agg"}) == ["MPLBACKEND"]
    other = {**server, "OMP_NUM_THREADS": "2", "EXTRA": "x"}
    assert kernels.env_mismatch(server, other) == ["EXTRA", "OMP_NUM_THREADS"]


@pytest.fixture(autouse=True)
def warm_spec(monkeypatch):
    """Jupyter finds the ``reprobook-warm`` spec where ``make test`` puts it."""
    monkeypatch.setenv("JUPYTER_PATH", str(kernels.JUPYTER_DIR))


@pytest.fixture(scope="module")
def server():
    with kernels.KernelServer(preload=(MARKER,), timeout=60) as srv:
        assert srv.failure is None
        yield srv


def start(srv, cwd: Path, **env: str):
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name=kernels.KERNEL_NAME)
    km.start_kernel(cwd=str(cwd), env={**os.environ, **srv.env(), **env})
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, kc


def evaluate(kc, expression: str):
    reply = kc.execute_interactive("", user_expressions={"x": expression}, timeout=30)
    data = reply["content"]["user_expressions"]["x"]
    assert data["status"] == "ok", data
    return eval(data["data"]["text/plain"])  # noqa: S307  (reprs of builtins only)


def gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_warm_kernel_starts_from_the_server_in_its_own_folder_and_environment(server, tmp_path):
    km, kc = start(server, tmp_path, REPROBOOK_WHO="this kernel")
    try:
        assert evaluate(kc, f"'{MARKER}' in __import__('sys').modules")
        assert evaluate(kc, "__import__('os').getcwd()") == str(tmp_path)
        assert evaluate(kc, "__import__('os').environ.get('REPROBOOK_WHO')") == "this kernel"
        assert evaluate(kc, "__import__('os').getppid()") == server.proc.pid
        # the folder the server started in is not on the kernel's path, as with a launch by
        # ipykernel_launcher (IPython puts '' there instead)
        assert str(Path.cwd()) not in evaluate(kc, "__import__('sys').path")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_an_interrupt_reaches_the_forked_kernel(server, tmp_path):
    km, kc = start(server, tmp_path)
    try:
        # stop_on_error=False: after an error ipykernel aborts the requests that reach it in a
        # short window, and under load the next one (the check below) could fall in it
        msg_id = kc.execute("import time; time.sleep(60)", stop_on_error=False)
        time.sleep(1.0)
        km.interrupt_kernel()
        while True:
            reply = kc.get_shell_msg(timeout=20)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        assert evaluate(kc, "1 + 1") == 2  # and it goes on working
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_killing_the_kernel_kills_the_forked_process(server, tmp_path):
    km, kc = start(server, tmp_path)
    pid = evaluate(kc, "__import__('os').getpid()")
    kc.stop_channels()
    km.shutdown_kernel(now=True)  # SIGKILL to the launcher, as nbval and papermill do
    assert gone(pid)


def test_the_kernels_exit_status_is_the_launchers(server, tmp_path):
    km, kc = start(server, tmp_path)
    kc.execute("import os; os._exit(3)")
    process = km.provisioner.process
    assert process.wait(timeout=20) == 3
    assert not km.is_alive()
    kc.stop_channels()
    km.cleanup_resources()


def test_an_other_environment_gets_an_ordinary_kernel(server, tmp_path):
    km, kc = start(server, tmp_path, OMP_NUM_THREADS="7")
    try:
        assert not evaluate(kc, f"'{MARKER}' in __import__('sys').modules")
        assert evaluate(kc, "__import__('os').getppid()") == os.getpid()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_no_server_means_an_ordinary_kernel(tmp_path, monkeypatch):
    from jupyter_client.manager import KernelManager

    monkeypatch.delenv(kernels.SERVER_ENV, raising=False)
    km = KernelManager(kernel_name=kernels.KERNEL_NAME)
    km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        assert evaluate(kc, "__import__('os').getppid()") == os.getpid()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_stopping_the_server_stops_its_kernels(tmp_path):
    with kernels.KernelServer(preload=(MARKER,), timeout=60) as srv:
        km, kc = start(srv, tmp_path)
        pid = evaluate(kc, "__import__('os').getpid()")
        kc.stop_channels()
    assert gone(pid)
    km.shutdown_kernel(now=True)
    assert not Path(srv.address or "/nonexistent").exists()


def test_the_runner_forks_its_kernels_when_asked(toy_book, monkeypatch):
    from reprobook import runner

    measured = []

    def spy(*args, measure_memory=True):
        measured.append(measure_memory)
        return execute_job(*args, measure_memory=measure_memory)

    execute_job = runner._execute
    monkeypatch.setattr(runner, "_execute", spy)
    said: list[str] = []
    summary = runner.run(root=toy_book, progress=False, echo=said.append, warm_kernels=True)
    assert {Path(j.notebook).name: j.status for j in summary.jobs} == {
        "01_draw.ipynb": "ok",
        "02_count.ipynb": "ok",
    }
    assert not [line for line in said if "ordinary kernels" in line]
    # a forked kernel is outside the measured process tree: no peak memory rather than a wrong one
    assert all(j.wall_s > 0 and j.peak_mb is None for j in summary.jobs)
    assert measured == [False, False]  # not measured at all, rather than measured and dropped


def test_the_runner_refuses_warm_kernels_on_slurm(toy_book):
    from reprobook import runner

    with pytest.raises(runner.RunError, match="local executor only"):
        runner.run(root=toy_book, progress=False, echo=print, warm_kernels=True, executor="slurm")
