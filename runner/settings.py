"""What one invocation was asked to do: the command line's flags and the profile's defaults, every precedence decided
here, once (a flag wins over the profile's key, which wins over the built-in default). Built by ``Settings.build``
after the profile is loaded (the runs and results directories default to the profile's name); frozen: nothing
downstream writes into it, and every function takes the fields it uses."""
import argparse
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

from runner.paths import REPO
from runner.profile import Profile, SpecError


def existing(path: Path) -> Path:
    """The nearest folder of ``path`` that exists (``path`` itself if it does)."""
    while not path.exists():
        path = path.parent
    return path


def check_flags(flags: argparse.Namespace) -> None:
    """Numbers and directories of the command line, before any work (a negative --jobs was a traceback; a
    --results-dir that is a file, a traceback after every training)."""
    at_least_one, positive, not_negative = (">= 1", lambda v: v >= 1), ("> 0", lambda v: v > 0), \
        (">= 0", lambda v: v >= 0)
    for flag, value, (expected, ok) in (("--jobs", flags.jobs, at_least_one),
                                        ("--threads", flags.threads, at_least_one),
                                        ("--runs-per-gpu", flags.runs_per_gpu, at_least_one),
                                        ("--cpus-per-run", flags.cpus_per_run, positive),
                                        ("--gpus-per-run", flags.gpus_per_run, not_negative),
                                        ("--slurm-time", flags.slurm_time, at_least_one),
                                        ("--slurm-mem", flags.slurm_mem, positive),
                                        ("--slurm-max-jobs", flags.slurm_max_jobs, at_least_one),
                                        ("--slurm-retries", flags.slurm_retries, not_negative)):
        if value is not None and not ok(value):
            raise SpecError(f"{flag}: expected a number {expected}, found {value:g}")
    if flags.threads is not None and flags.threads > (os.cpu_count() or 1):  # oversubscribed: each run slower
        raise SpecError(f"--threads: expected at most this machine's {os.cpu_count()} CPU cores, found {flags.threads}")
    if flags.executor == "slurm":  # SLURM counts whole CPUs and GPUs per job
        for flag, value in (("--cpus-per-run", flags.cpus_per_run), ("--gpus-per-run", flags.gpus_per_run)):
            if value is not None and value != int(value):
                raise SpecError(f"{flag}: expected a whole number with --executor slurm, found {value:g}")
    for option in flags.slurm_sbatch or ():
        if not option.startswith("--") or "\n" in option:
            raise SpecError(f"--slurm-sbatch: expected one sbatch option such as --constraint=a100, found {option!r}")
    if flags.only is not None and not [s for s in flags.only.split(",") if s.strip()]:
        raise SpecError(f"--only: expected comma-separated sweep names, found {flags.only!r}")
    for flag, value in (("--runs-dir", flags.runs_dir), ("--results-dir", flags.results_dir),
                        ("--cache-dir", flags.cache_dir)):
        if value and Path(value).exists() and not Path(value).is_dir():
            raise SpecError(f"{flag} '{value}': expected a directory (or a path to make one), found a file")
        if value:  # under /proc or on a read-only disk: a traceback at the first write. Its nearest existing
            where = existing(Path(value).absolute())  # folder is written in once (--check makes nothing)
            try:
                tempfile.TemporaryFile(dir=where).close()
            except OSError as e:
                raise SpecError(f"{flag} '{value}': expected a directory the runner can write in, found "
                                f"{e.strerror or e} writing in {where}") from None


def slurm_fields(flags: argparse.Namespace, given: dict) -> dict:
    """The slurm_* fields: a --slurm-* flag, else the profile's "slurm" key (``given``, checked at load: runner/spec.py
    check_slurm), else the field's default."""
    picked = {key: getattr(flags, f"slurm_{flag}") if getattr(flags, f"slurm_{flag}") is not None else given.get(key)
              for key, flag in (("partition", "partition"), ("account", "account"), ("qos", "qos"),
                                ("time_min", "time"), ("mem_gb", "mem"), ("max_jobs", "max_jobs"),
                                ("retries", "retries"))}
    return {"slurm_partition": picked["partition"], "slurm_account": picked["account"], "slurm_qos": picked["qos"],
            "slurm_time_min": picked["time_min"] or 240, "slurm_mem_gb": picked["mem_gb"],
            "slurm_sbatch": tuple(given.get("sbatch", ())) + tuple(flags.slurm_sbatch or ()),
            "slurm_max_jobs": picked["max_jobs"],
            "slurm_retries": 3 if picked["retries"] is None else picked["retries"]}


@dataclass(frozen=True)
class Settings:
    profile: str  # --profile, as typed (a name or a path)
    only: Optional[Tuple[str, ...]]  # --only: the sweeps whose runs are trained (None: all)
    executor: str  # local | ray | slurm
    device: str  # cpu | cuda: --device, else the profile's "device", else cpu
    jobs: int  # local executor on CPU: runs at a time (--jobs, else the profile's "jobs", else 1)
    threads: Optional[int]  # CPU threads per run (None: cores / jobs)
    runs_per_gpu: int
    address: Optional[str]  # Ray
    cpus_per_run: float  # Ray and SLURM
    gpus_per_run: float  # Ray and SLURM: --gpus-per-run, else 1 with --device cuda, else 0
    cache: bool  # the activation cache: not --no-cache and the profile's "cache" (default true)
    precision: Optional[str]  # --precision: the knob ELMO_PRECISION over the profile's
    task_precision: Optional[str]  # --task-precision: the knob TASK_PRECISION over the profile's
    runs_dir: Path
    results_dir: Path
    cache_dir: Path
    keep_models: bool
    build_only: bool
    redo_stale: bool
    baselines_only: bool
    check: bool
    fetch_data: bool
    wandb: bool
    wandb_project: str
    argv: Tuple[str, ...]  # the command line as typed, for the results' provenance
    # --executor slurm (runner/execution/slurm.py): each a --slurm-* flag, else the profile's "slurm" object's key
    slurm_partition: Optional[str] = None
    slurm_account: Optional[str] = None
    slurm_qos: Optional[str] = None
    slurm_time_min: int = 240  # each job's time limit; a run longer than that is requeued and goes on
    slurm_mem_gb: Optional[float] = None  # None: the partition's default
    slurm_sbatch: Tuple[str, ...] = ()  # extra #SBATCH options, as typed: "--constraint=a100"
    slurm_max_jobs: Optional[int] = None  # jobs submitted and not ended at once (None: every run at once)
    slurm_retries: int = 3  # resubmissions of a job cancelled, timed out, preempted or lost without a result

    @classmethod
    def build(cls, flags: argparse.Namespace, profile: Profile, argv: Tuple[str, ...] = ()) -> "Settings":
        """From the parsed command line and the loaded profile (runner/spec.py load_profile)."""
        check_flags(flags)
        device = flags.device or profile.device
        if device not in ("cpu", "cuda"):
            raise SpecError(f"profile key 'device' must be \"cpu\" or \"cuda\", found {device!r}")
        gpus_per_run = flags.gpus_per_run
        if gpus_per_run is None:
            gpus_per_run = 1.0 if device == "cuda" and flags.executor in ("ray", "slurm") else 0.0
        runs_dir = Path(flags.runs_dir or REPO / "runs" / profile.name).resolve()
        results_dir = Path(flags.results_dir or REPO / "results" / profile.name).resolve()
        if runs_dir == results_dir:  # --build-only then found the directory locked by "another runner": itself
            given = [f"{flag} '{value}'" for flag, value in (("--runs-dir", flags.runs_dir),
                                                                ("--results-dir", flags.results_dir)) if value]
            raise SpecError(f"{' and '.join(given)}: expected two directories, found one ({runs_dir}): the runs and "
                            f"the tables each need their own" + ("" if len(given) == 2 else " (the other is the "
                                                                 "default for this profile)"))
        return cls(
            profile=flags.profile, only=tuple(flags.only.split(",")) if flags.only is not None else None,
            executor=flags.executor, device=device, jobs=flags.jobs or profile.jobs,
            threads=flags.threads, runs_per_gpu=flags.runs_per_gpu, address=flags.address,
            cpus_per_run=flags.cpus_per_run, gpus_per_run=gpus_per_run,
            cache=not flags.no_cache and profile.cache,
            precision=flags.precision, task_precision=flags.task_precision,
            runs_dir=runs_dir, results_dir=results_dir,
            cache_dir=Path(flags.cache_dir).resolve(), keep_models=flags.keep_models, build_only=flags.build_only,
            redo_stale=flags.redo_stale, baselines_only=flags.baselines_only, check=flags.check,
            fetch_data=flags.fetch_data, wandb=not flags.no_wandb, wandb_project=flags.wandb_project,
            argv=tuple(argv), **slurm_fields(flags, profile.slurm))

    @property
    def writes_in(self) -> Tuple[Path, ...]:
        """The directories this invocation writes in (the line a full disk gives names their free space)."""
        return self.runs_dir, self.results_dir, self.cache_dir
