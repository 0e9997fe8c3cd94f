"""Warm kernels: notebook kernels forked from a process that has already imported torch and
Lightning.

Every kernel of the book imports the same frameworks before its first line of work: torch,
Lightning (which brings torchmetrics, matplotlib, transformers and torch's compiler with it),
NumPy, SciPy and pandas, about 4 s of one core each time. ``make test`` starts 148 kernels for
the book's notebooks (74 under nbval, 74 in the smoke run), so it spent about ten minutes of CPU
importing the same modules again.

A *kernel server* imports them once and then forks one child per kernel; the child chdirs,
takes the kernel's environment and standard streams, and runs ipykernel as
``python -m ipykernel_launcher`` would. Nothing is shared between kernels but the modules'
freshly imported state: a child starts from the server's memory as it was after the imports
(copy on write), never from another kernel's.

How it plugs into Jupyter: the kernel spec ``reprobook-warm`` (``jupyter/kernels`` beside this
file, found through ``JUPYTER_PATH``) starts ``python -m reprobook.kernels -f CONNECTION_FILE``,
a small *launcher*. When ``$REPROBOOK_KERNEL_SERVER`` names a running server whose import-time
environment matches the kernel's, the launcher hands the server its arguments, working folder,
environment and standard streams, and stands in for the forked child: signals sent to it
(interrupts) are passed on, its exit status is the child's, and when it is killed the server
kills the child. Otherwise, or on any platform but Linux, it becomes an ordinary kernel
(``exec`` of ``python -m ipykernel_launcher``). So a warm kernel runs in the environment an
ordinary one would; what differs is only that the preloaded modules are already in
``sys.modules``, which is why ``make book`` keeps ordinary kernels.

Who starts a server: nbval in ``make test``, through a plugin in ``tests/conftest.py``, one
server for each pytest worker (the pytest step fell from 911-1,097 s to 697 s on a 2-core
machine), and ``reprobook run --warm-kernels``, which ``make smoke`` uses (alone, 342 s with
ordinary kernels and 171 s with warm ones). ``make book`` and ``make bench`` do not: their peak
memory is measured on the process tree of each notebook, which a forked kernel is not in, and
they are where every notebook runs in the kernel a reader gets.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNEL_NAME = "reprobook-warm"
SERVER_ENV = "REPROBOOK_KERNEL_SERVER"
#: The folder to put on ``JUPYTER_PATH`` so that Jupyter finds the ``reprobook-warm`` spec.
JUPYTER_DIR = Path(__file__).resolve().parent / "jupyter"

#: What the server imports once for all its kernels: what nearly every notebook imports.
PRELOAD = ("numpy", "scipy", "pandas", "torch", "lightning", "ipykernel.kernelapp")

#: Variables that may differ between the server and a kernel: read when a notebook runs, never
#: while the preloaded modules are imported. A kernel whose environment differs from the server's
#: in any other variable gets an ordinary kernel instead.
PER_KERNEL_PREFIXES = ("REPROBOOK_", "JPY_", "PYTEST_", "PAPERMILL_")
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


def _import_time_env(env: dict[str, str]) -> dict[str, str]:
    """The part of ``env`` that the preloaded modules may read while they import. ipykernel sets
    ``MPLBACKEND`` to its inline backend before a notebook's first import when it is unset
    (``matplotlib`` is imported by Lightning), so unset counts as that backend."""
    out = {k: v for k, v in env.items() if not k.startswith(PER_KERNEL_PREFIXES)}
    out["MPLBACKEND"] = env.get("MPLBACKEND") or INLINE_BACKEND
    return out


def env_mismatch(server: dict[str, str], kernel: dict[str, str]) -> list[str]:
    """The variables in which a kernel's import-time environment differs from the server's."""
    a, b = _import_time_env(server), _import_time_env(kernel)
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def jupyter_path(env: dict[str, str]) -> str:
    """``env``'s ``JUPYTER_PATH`` with :data:`JUPYTER_DIR` first, where Jupyter finds the
    ``reprobook-warm`` kernel spec."""
    path = [p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    return os.pathsep.join([str(JUPYTER_DIR), *(p for p in path if p != str(JUPYTER_DIR))])


def supported() -> bool:
    """Warm kernels need ``fork`` and file descriptors passed over Unix sockets, and forking
    is only safe where no framework holds threads or Objective-C state: Linux."""
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds")


# ---- the launcher: what the kernel spec starts ---------------------------------------------------


def _ordinary_kernel(args: list[str]) -> None:
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *args])


def launch(args: list[str]) -> int:
    """Stand in for a kernel forked by the server named in ``$REPROBOOK_KERNEL_SERVER``, or
    become an ordinary kernel when there is none or it declines."""
    address = os.environ.get(SERVER_ENV)
    if not address or not supported():
        _ordinary_kernel(args)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(address)
        request = {"args": args, "cwd": os.getcwd(), "env": dict(os.environ)}
        socket.send_fds(sock, [json.dumps(request).encode()], [0, 1, 2])
        reply = json.loads(sock.recv(65536) or b"{}")
    except (OSError, ValueError):
        reply = {}
    if "pid" not in reply:
        sock.close()
        if reply.get("declined"):  # said, so that a server that never serves is noticed
            print(
                "reprobook.kernels: an ordinary kernel, since its environment differs from the "
                f"kernel server's in {', '.join(reply['declined'])}",
                file=sys.stderr,
                flush=True,
            )
        _ordinary_kernel(args)
    child = int(reply["pid"])

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child, signum)  # the kernel's group, as for an ordinary kernel

    for name in _SIGNALS:
        signal.signal(getattr(signal, name), forward)
    parent = os.getppid()
    sock.settimeout(1.0)
    while True:
        try:
            message = sock.recv(65536)
        except TimeoutError:
            if os.getppid() != parent:  # whoever started the kernel is gone: so is the kernel
                return 1  # closing the socket makes the server kill the child
            continue
        except InterruptedError:
            continue
        if not message:  # the server went away before the kernel ended
            return 1
        return int(json.loads(message)["status"])


# ---- the server ----------------------------------------------------------------------------------


def _exit_status(status: int) -> int:
    """A shell's exit status for a wait status: the code, or 128 + the signal that killed it."""
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def _run_child(request: dict, fds: list[int], base_path: list[str]) -> None:
    """In the forked child: become the kernel that ``python -m ipykernel_launcher ARGS`` started
    in ``cwd`` with ``env`` and the launcher's standard streams would be. Never returns."""
    code = 1
    try:
        for fd, target in zip(fds, (0, 1, 2)):
            os.dup2(fd, target)
            os.close(fd)
        with contextlib.suppress(Exception):  # die with the server, as a kernel with its parent
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        os.setpgid(0, 0)  # its own group, so the server can stop what the kernel started
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [sys.argv[0], *request["args"]]
        sys.path[:] = base_path
        from ipykernel import kernelapp

        # the pid the kernel manager gave, as an ordinary kernel reads it at import: ipykernel
        # then prints no connection banner, and its poller (which finds its parent is this
        # server, not that pid) stops the kernel when the server is gone
        parent = int(request["env"].get("JPY_PARENT_PID") or 0)
        kernelapp.IPKernelApp.launch_instance(argv=request["args"], parent_handle=parent)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            import atexit

            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


def serve(address: str, preload: tuple[str, ...] = PRELOAD) -> int:
    """Import ``preload``, say ``ready`` on standard output, then fork a kernel for every
    launcher that connects to the Unix socket ``address``, until standard input closes (the
    process that started the server is gone) or SIGTERM. Its children are killed with it."""
    import gc
    import importlib
    import selectors

    os.environ.pop("JPY_PARENT_PID", None)  # ipykernel would watch the wrong parent
    os.environ.setdefault("MPLBACKEND", INLINE_BACKEND)
    server_env = dict(os.environ)  # before the imports, some of which set variables of their own
    for name in preload:
        importlib.import_module(name)
    # ipykernel_launcher drops the folder it started in from the import path (IPython puts ''
    # back): the server started in its own folder, so the kernels get its path without it
    started_in = sys.path and Path(sys.path[0] or ".").resolve() == Path.cwd()
    base_path = sys.path[1:] if started_in else sys.path[:]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "wake")
    selector.register(sys.stdin, selectors.EVENT_READ, "parent")
    children: dict[int, socket.socket] = {}  # child pid -> its launcher's connection
    by_conn: dict[socket.socket, int] = {}
    gc.collect()
    gc.freeze()  # the imported modules' objects stay put: fewer pages copied in each child
    print("ready", flush=True)
    try:
        while not stopping:
            for key, _ in selector.select():
                if key.data == "accept":
                    conn, _ = listener.accept()
                    try:
                        message, fds, _, _ = socket.recv_fds(conn, 1 << 22, 3)
                        request = json.loads(message)
                    except (OSError, ValueError):
                        conn.close()
                        continue
                    mismatch = env_mismatch(server_env, request.get("env", {}))
                    if len(fds) != 3 or mismatch:
                        for fd in fds:
                            os.close(fd)
                        with contextlib.suppress(OSError):
                            conn.send(json.dumps({"declined": mismatch[:5]}).encode())
                        conn.close()
                        continue
                    sys.stdout.flush()
                    sys.stderr.flush()
                    pid = os.fork()
                    if pid == 0:
                        signal.set_wakeup_fd(-1)
                        for name in ("SIGCHLD", "SIGTERM"):
                            signal.signal(getattr(signal, name), signal.SIG_DFL)
                        signal.signal(signal.SIGINT, signal.default_int_handler)
                        selector.close()
                        listener.close()
                        for other in by_conn:
                            other.close()
                        conn.close()
                        os.close(wake_r)
                        os.close(wake_w)
                        _run_child(request, fds, base_path)
                    with contextlib.suppress(OSError):  # before any signal can be sent to it
                        os.setpgid(pid, pid)
                    for fd in fds:
                        os.close(fd)
                    children[pid] = conn
                    by_conn[conn] = pid
                    selector.register(conn, selectors.EVENT_READ, "launcher")
                    with contextlib.suppress(OSError):
                        conn.send(json.dumps({"pid": pid}).encode())
                elif key.data == "wake":
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
                    _reap(children, by_conn, selector)
                elif key.data == "parent":
                    if not sys.stdin.buffer.read1(4096):
                        stopping.append(True)
                else:  # a launcher closed its end: it was killed, so is its kernel
                    conn = key.fileobj
                    with contextlib.suppress(OSError):
                        if conn.recv(1):
                            continue
                    pid = by_conn.get(conn)
                    if pid is not None:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.killpg(pid, signal.SIGKILL)
                    selector.unregister(conn)
            _reap(children, by_conn, selector)
    finally:
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        for pid in list(children):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address)
    return 0


def _reap(children: dict, by_conn: dict, selector) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        by_conn.pop(conn, None)
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"status": _exit_status(status)}).encode())
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(conn)
        conn.close()


# ---- starting and stopping a server --------------------------------------------------------------


class KernelServer:
    """A kernel server in a process of its own, for as long as the ``with`` block (or until
    :meth:`stop`). :meth:`env` is what a kernel manager's environment needs to use it: the
    server's address and the folder of the ``reprobook-warm`` kernel spec."""

    def __init__(
        self,
        env: dict[str, str] | None = None,
        preload: tuple[str, ...] = PRELOAD,
        timeout: float = 180.0,
    ):
        self.base_env = dict(os.environ if env is None else env)
        self.preload = tuple(preload)
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.folder: str | None = None
        self.address: str | None = None
        self.failure: str | None = None

    def start(self) -> bool:
        """Start the server and wait until it has imported everything; ``False`` (with the
        reason in :attr:`failure`) where warm kernels cannot run, so callers use ordinary
        ones."""
        if not supported():
            self.failure = f"warm kernels need Linux, not {sys.platform}"
            return False
        self.folder = tempfile.mkdtemp(prefix="reprobook-kernels-")
        self.address = os.path.join(self.folder, "server.sock")
        env = {k: v for k, v in self.base_env.items() if k != SERVER_ENV}
        env["JUPYTER_PATH"] = jupyter_path(env)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "reprobook.kernels", "serve", self.address, *self.preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + self.timeout
        line = b""
        import selectors

        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline and not line.endswith(b"\n"):
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    break
                chunk = os.read(self.proc.stdout.fileno(), 64)
                if not chunk:
                    break
                line += chunk
        if line.strip() != b"ready":
            self.failure = f"the kernel server did not start (said {line[:200]!r})"
            self.stop()
            return False
        return True

    def env(self) -> dict[str, str]:
        """The variables to add to a kernel manager's environment (none when not running)."""
        if self.address is None:
            return {}
        return {SERVER_ENV: self.address, "JUPYTER_PATH": jupyter_path(self.base_env)}

    def stop(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.stdin.close()  # the server stops when its standard input closes
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()
            self.proc = None
        if self.folder is not None:
            import shutil

            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        self.address = None

    def __enter__(self) -> KernelServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["serve"]:
        if len(args) < 2:
            print(
                "usage: python -m reprobook.kernels serve SOCKET_PATH [MODULE ...]", file=sys.stderr
            )
            return 2
        return serve(args[1], tuple(args[2:]) or PRELOAD)
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
