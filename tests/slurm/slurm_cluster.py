"""A one-node Slurm cluster for the tests of ``--executor slurm``: munge, slurmctld and slurmd
from Debian's packages, started from a throwaway configuration and stopped by their pids.

It needs root (the daemons run as root here) and the packages ``slurmctld``, ``slurmd`` and
``munge`` (``.ci/run`` installs them); without them the tests skip and say why.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

DAEMONS = ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scancel", "sinfo")


def why_no_slurm() -> str | None:
    missing = [d for d in DAEMONS if not (shutil.which(d) or Path(f"/usr/sbin/{d}").exists())]
    if missing:
        return (
            f"no {', '.join(missing)} on this machine "
            "(apt-get install slurmctld slurmd munge): Slurm tests skipped"
        )
    if os.geteuid() != 0:
        return "the one-node Slurm cluster is started as root: Slurm tests skipped"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _daemon(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    why = why_no_slurm()
    if why:
        pytest.skip(why)
    base = tmp_path_factory.mktemp("slurm")
    host = socket.gethostname().split(".")[0]
    for sub in ("state", "spool", "munge"):
        (base / sub).mkdir()
    started: list[tuple[str, Path]] = []
    # munge: a key and a socket of our own, so nothing on the machine is disturbed
    key, sock = base / "munge" / "munge.key", base / "munge" / "munge.socket"
    subprocess.run(
        [_daemon("mungekey"), "--create", "--keyfile", str(key)], check=True, capture_output=True
    )
    os.chmod(key, 0o600)
    munged_pid = base / "munge" / "munged.pid"
    subprocess.run(
        [
            _daemon("munged"),
            "--force",
            "--key-file",
            str(key),
            "--socket",
            str(sock),
            "--pid-file",
            str(munged_pid),
            "--log-file",
            str(base / "munge" / "munged.log"),
            "--seed-file",
            str(base / "munge" / "munged.seed"),
        ],
        check=True,
        capture_output=True,
    )
    started.append(("munged", munged_pid))
    conf = base / "slurm.conf"
    cpus = os.cpu_count() or 2
    mem_mb = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 * 0.8)
    conf.write_text(f"""ClusterName=reprobook-test
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MinJobAge=3600
StateSaveLocation={base / "state"}
SlurmdSpoolDir={base / "spool"}
SlurmctldPidFile={base / "slurmctld.pid"}
SlurmdPidFile={base / "slurmd.pid"}
SlurmctldLogFile={base / "slurmctld.log"}
SlurmdLogFile={base / "slurmd.log"}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
MpiDefault=none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={host} CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        subprocess.run(
            [_daemon("slurmctld"), "-f", str(conf)], check=True, env=env, capture_output=True
        )
        started.append(("slurmctld", base / "slurmctld.pid"))
        subprocess.run(
            [_daemon("slurmd"), "-f", str(conf)], check=True, env=env, capture_output=True
        )
        started.append(("slurmd", base / "slurmd.pid"))
        deadline = time.time() + 60
        while time.time() < deadline:
            out = subprocess.run(
                ["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True
            ).stdout
            if out.strip() in ("idle", "mixed", "allocated"):
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(
                f"the test cluster did not come up: {(base / 'slurmctld.log').read_text()[-2000:]}"
            )
        yield {"SLURM_CONF": str(conf), "base": base}
    finally:
        for _name, pidfile in reversed(started):
            try:
                pid = int(pidfile.read_text().split()[0])
                os.kill(pid, signal.SIGTERM)
            except (OSError, ValueError):
                continue
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                except OSError:
                    break
                time.sleep(0.1)
