"""A one-node SLURM of the tests' own, on loopback: munged, slurmctld and slurmd from Debian's packages (munge,
slurmctld, slurmd, slurm-client; 22.05), started in the foreground as children of the test process with a
configuration, a munge key, a socket, ports and state written under a temporary folder, and stopped by their pids.

Nothing of the machine's own is used or changed: not /etc/slurm, not /etc/munge's key or /run/munge's socket, not the
default ports (free ones are taken). Client commands (sbatch, squeue, scancel, scontrol) find this cluster through the
SLURM_CONF variable (``env()``); the runner hands its environment to sbatch, and sbatch to the job.

``available()`` says why the cluster cannot start ('' when it can); .ci/run installs the packages where they are
absent."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "srun", "mungekey")
SBIN = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")


def _which(name: str) -> Optional[str]:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN))


def available() -> str:
    """'' when the daemons and clients are installed and this process may run them (root: slurmd starts jobs as
    their users), else why not."""
    missing = [name for name in (*DAEMONS, *CLIENTS) if not _which(name)]
    if missing:
        return (f"SLURM is not installed ({', '.join(missing)} missing): apt-get install slurmctld slurmd "
                f"slurm-client munge (.ci/run does)")
    if os.geteuid() != 0:
        return "a one-node SLURM for the tests needs root (slurmd runs each job as its user)"
    return ""


def _free_ports(count: int) -> List[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def node_resources() -> Dict[str, str]:
    """This machine's CPUs and memory as slurmd sees them (``slurmd -C``): CPUs, Boards, SocketsPerBoard, ..."""
    out = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True, timeout=30).stdout
    first = out.splitlines()[0] if out else ""
    fields = dict(item.split("=", 1) for item in first.split() if "=" in item)
    fields.pop("NodeName", None)
    return fields


class Cluster:
    """``start()`` it, ``env()`` for the commands, ``stop()`` it (or use it as a context manager)."""

    def __init__(self, root: Optional[Path] = None):
        # short: munge's socket path must fit a sockaddr_un (107 bytes)
        self.owns_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="slurm", dir="/tmp"))
        self.conf = self.root / "slurm.conf"
        self.processes: Dict[str, subprocess.Popen] = {}
        self.memory_mb = 0
        self.cpus = 0

    def env(self, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        return {**(os.environ if base is None else base), "SLURM_CONF": str(self.conf)}

    def _write_config(self) -> None:
        root = self.root
        for sub in ("munge", "state", "spool", "log"):
            (root / sub).mkdir(mode=0o700, exist_ok=True)
        os.chmod(root, 0o700)
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))  # munge's key: 1024 random bytes (mungekey's default size)
        os.chmod(key, 0o400)
        node = node_resources()
        self.cpus = int(node.get("CPUs", os.cpu_count() or 1))
        # what the jobs may ask for: the machine's memory less what the daemons and the runner need
        self.memory_mb = max(256, int(node.get("RealMemory", 1024)) - 512)
        node["RealMemory"] = str(self.memory_mb)
        controller, daemon = _free_ports(2)
        node_line = " ".join(f"{k}={v}" for k, v in node.items() if k in (
            "CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory"))
        self.conf.write_text("\n".join([
            "# a one-node SLURM for the runner's tests (tests/runner/slurm_cluster.py)",
            "ClusterName=runnertests",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={controller}",
            f"SlurmdPort={daemon}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"AuthInfo=socket={root / 'munge' / 'munge.sock'}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"StateSaveLocation={root / 'state'}",
            f"SlurmdSpoolDir={root / 'spool'}",
            f"SlurmctldPidFile={root / 'slurmctld.pid'}",
            f"SlurmdPidFile={root / 'slurmd.pid'}",
            f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
            "CommunicationParameters=NoInAddrAny",  # bind 127.0.0.1 (what the names resolve to), not every address
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU_Memory",
            "DefMemPerCPU=512",
            "ReturnToService=2",
            "KillWait=5",
            "MinJobAge=600",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "JobRequeue=1",
            "SchedulerParameters=sched_interval=2",
            f"NodeName=localhost NodeAddr=127.0.0.1 {node_line} State=UNKNOWN",
            "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO",
            ""]))

    def _start(self, name: str, command: List[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "w")
        self.processes[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, env=self.env(),
                                                start_new_session=True)
        log.close()

    def _died(self) -> str:
        for name, process in self.processes.items():
            if process.poll() is not None:
                text = (self.root / "log" / f"{name}.out").read_text(errors="replace")[-1500:]
                return f"{name} exited with {process.returncode}: {text}"
        return ""

    def start(self, timeout_s: float = 90) -> "Cluster":
        self._write_config()
        munge = self.root / "munge"
        self._start("munged", [_which("munged"), "--foreground", "--force", f"--socket={munge / 'munge.sock'}",
                               f"--key-file={munge / 'munge.key'}", f"--pid-file={munge / 'munged.pid'}",
                               f"--log-file={munge / 'munged.log'}", f"--seed-file={munge / 'munged.seed'}"])
        deadline = time.time() + timeout_s
        while not (munge / "munge.sock").exists():
            self._check(deadline, "munged's socket")
        self._start("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        self._start("slurmd", [_which("slurmd"), "-D", "-f", str(self.conf), "-N", "localhost"])
        while True:  # the node up and idle: sinfo's state of it
            state = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env(), capture_output=True,
                                   text=True, timeout=30).stdout.strip()
            if state.startswith("idle"):
                return self
            self._check(deadline, f"the node to be idle (sinfo: {state or 'no answer'})")

    def _check(self, deadline: float, waiting_for: str) -> None:
        died = self._died()
        if died or time.time() > deadline:
            logs = "".join(f"\n--- {p.name}\n{p.read_text(errors='replace')[-1500:]}"
                           for p in sorted((self.root / "log").glob("*.log")))
            self.stop()
            raise RuntimeError(f"one-node SLURM did not start ({died or 'timed out'}) waiting for {waiting_for}"
                               + logs)
        time.sleep(0.5)

    def stop(self) -> None:
        """Its jobs cancelled (every job of this private cluster is the tests'), then the daemons this object started,
        by pid, slurmd first; SIGKILL after 20 s."""
        if self.processes.get("slurmctld") and self.processes["slurmctld"].poll() is None:
            subprocess.run(["scancel", "--user", str(os.geteuid())], env=self.env(), capture_output=True, timeout=30)
            deadline = time.time() + 20
            while time.time() < deadline and subprocess.run(
                    ["squeue", "-h", "-o", "%i"], env=self.env(), capture_output=True, text=True,
                    timeout=30).stdout.strip():
                time.sleep(0.5)
        for name in ("slurmd", "slurmctld", "munged"):
            process = self.processes.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
