"""What comes before the runs: the data checked, the profile's word vectors and biLM stages made (with the baselines
trained beside the stages on spare slots), and the activation caches the ELMo runs read."""
import os
import time
from pathlib import Path

from runner.execution.archive import check_finished
from runner.execution.freshness import unfinished_or_stale
from runner.execution.jobs import execute, job_for
from runner.execution.probes import missing_probe_inputs
from runner.plan import wanted_probes
from runner.profile import Profile, SpecError
from runner.records import READS_FILE, load_result, write_json
from runner.settings import Settings
from runner.spec import bilm_outputs, missing_inputs
from runner.stages.bilm_stages import (
    archive_bilm,
    check_stage_outputs,
    check_stage_settings,
    prepare_bilm,
    stage_option,
    stages_pending,
)
from runner.stages.caches import ensure_cache, no_cache_reason
from runner.stages.word_vectors import check_vectors_settings, prepare_vectors, vectors_pending


def run_stages(plan, settings: Settings, wanted, gpus, stage_device, archive):
    """The data checked first, then the biLM stages (if the profile has its own biLM and an ELMo run is still to
    do: a fresh clone of a finished multi-session profile has no result missing, nor its biLM's weights, which stay
    out of git), then their outputs; returns (what each run reads, the finished runs)."""

    profile, run_dir = plan.profile, plan.run_dir
    # --redo-stale: the stale runs count as to do, so that their stages are brought up to date first
    unrun = (unfinished_or_stale(wanted, run_dir, plan.runs_dir) if settings.redo_stale
             else [r for r in wanted if load_result(run_dir[r] / "result.json")[0] is None])
    parallel = settings.jobs
    _check_inputs(profile, wanted, bilm_outputs(profile), wanted_probes(plan, settings.baselines_only))

    vectors_pending(profile.vectors)  # a stage output that no longer matches its record stops here, runs to do or not
    check_stage_outputs(profile.bilm)
    check_stage_settings(profile.bilm)  # and a stage made with other settings than the profile's now
    if not unrun:  # (with runs to do the vectors stage makes them again: the finished runs then turn stale)
        check_vectors_settings(profile.vectors)
    task_knobs = {r.task: r.knob_dict for r in reversed(wanted)}
    stages = not settings.baselines_only and any(r.reads_bilm for r in unrun)
    pending = stages and stages_pending(profile, task_knobs)
    check_bfloat16(profile, unrun, pending, stage_device)
    beside = pending and settings.executor == "local" and stage_device == "cpu" and parallel >= 2
    vectors = bool(profile.vectors) and bool(unrun)  # the baselines' word vectors, before any baseline
    if vectors and not (beside and vectors_pending(profile.vectors)):
        prepare_vectors(profile.vectors)
        vectors = False
    if beside:  # the vectors (if still to make) and then the baselines beside the biLM stages
        train_baselines_beside_stages(profile, task_knobs, [r for r in wanted if not r.uses_elmo], plan.runs,
                                      run_dir, plan.runs_dir, plan.cells, parallel, settings, archive, vectors)
    elif stages:
        prepare_bilm(profile, task_knobs, parallel, stage_device, gpus)
    _check_inputs(profile, unrun)
    if profile.archive_runs and profile.bilm:
        archive_bilm(profile, plan.results_dir / "bilm")
    return check_finished(plan.runs, run_dir, plan.runs_dir, redo_stale=settings.redo_stale)


def check_bfloat16(profile: Profile, unrun, stages: bool, stage_device: str) -> None:
    """bfloat16 asked of a CPU without bfloat16 kernels (elmo_module/precision.py says what happens there), refused in
    one line before any stage or run starts: the biLM stages to run with --precision bfloat16 (``stages``: some are
    to run, on ``stage_device``), the runs to train on the CPU with ELMO_PRECISION or TASK_PRECISION bfloat16."""
    from elmo_module.precision import (  # (torch/allennlp behind it: loaded when this runs)
        ALLOW_SLOW,
        cpu_bfloat16_problem,
    )

    asks = []
    if stages and stage_device == "cpu":
        spec = profile.bilm
        asks += [f"the biLM's {kind} stage (--precision bfloat16)" for kind in ("pretrain", "finetune")
                 if stage_option(spec.get(kind, {}).get("args", []), "--precision") == "bfloat16"]
    if profile.device == "cpu":
        for knob in ("ELMO_PRECISION", "TASK_PRECISION"):
            count = sum(r.knob_dict.get(knob) == "bfloat16" for r in unrun)
            asks += [f"{count} run(s) with {knob}=bfloat16"] if count else []
    problem = cpu_bfloat16_problem() if asks else None
    if problem:
        raise SpecError(f"profile '{profile.name}' asks for bfloat16 on the CPU ({', '.join(asks)}), but {problem}. "
                        f"Run it on a CPU with AVX-512 or AMX or on a GPU (--device cuda), give --precision / "
                        f"--task-precision float32 where a knob asks (a stage's --precision is the profile's protocol: "
                        f"float32 there makes another biLM), or set {ALLOW_SLOW}=1 to run it anyway")


def _check_inputs(profile: Profile, runs, exclude=(), probes=()):
    missing = missing_inputs(profile.requires, runs, exclude) + missing_probe_inputs(probes, profile.requires)
    if missing:
        raise SpecError(f"profile '{profile.name}' needs files that are not here:\n" +
                        "\n".join(f"  - {line}" for line in missing))


def train_baselines_beside_stages(profile: Profile, task_knobs, baselines, runs, run_dir, runs_dir, cells, parallel,
                                  settings: Settings, archive=None, vectors: bool = False) -> None:
    """The biLM stages take one of the ``parallel`` slots (one process; the mini profiles pretrain on 1 thread) and
    the baseline runs, which do not read the biLM, the others, so that a 2-core machine is not half idle for the
    hours of pretraining; once the stages are done their slot trains baselines too. With ``vectors`` (the profile's
    word vectors still to make: 25 min to 1.8 h on 1 thread for the small profile; the stages do not read them)
    the vectors stage takes the second slot first and the baselines, which read the vectors, wait for it. Stage
    progress goes to its log only (the runs' lines are printed). Ctrl-C stops all (stop_runs() ends the stage
    processes too)."""
    import threading


    # Before the vectors are made, runs that read other bytes at their path (a fresh machine's archive: runs of two
    # machines) cannot be told apart: the check after the vectors stage (write_reads, run_stages) settles them.
    reads, finished = check_finished(baselines, run_dir, runs_dir, redo_stale=settings.redo_stale, mixed=not vectors)
    todo = [r for r in baselines if r not in finished]
    # The finished ones are checked against the vectors once they are made; those found stale then (with
    # --redo-stale: an earlier machine's runs) train in this slot too, not after the hours of pretraining.
    unchecked, stale = ([r for r in baselines if r in finished] if vectors else []), set()
    if not todo and not vectors:
        prepare_bilm(profile, task_knobs, parallel, "cpu")
        return
    print(f"biLM stages run beside {'the word vectors and ' if vectors else ''}{len(todo)} baseline runs"
          f"{f' (and those of {len(unchecked)} finished ones that the vectors show stale)' if unchecked else ''}; "
          "stage progress is in the logs named below", flush=True)

    def write_reads():  # what each baseline reads, its word vectors' checksum included (so only once they exist)
        now, current = check_finished(baselines, run_dir, runs_dir, redo_stale=settings.redo_stale) if vectors else (
            reads, finished)
        stale.update(r for r in unchecked if r not in current)
        for run in todo + sorted(stale, key=unchecked.index):
            run_dir[run].mkdir(parents=True, exist_ok=True)
            write_json(run_dir[run] / READS_FILE, now[run])

    def timed(label, work):
        def call():
            started = time.time()
            work()
            return {"status": "stages", "wall_time_s": round(time.time() - started, 1)}
        return {"call": call, "label": label}

    jobs = [timed("biLM stages", lambda: prepare_bilm(profile, task_knobs, 1, "cpu", quiet=True))]
    vectors_made, vectors_ok = threading.Event(), []
    if vectors:
        def make_vectors():
            try:
                prepare_vectors(profile.vectors)
                write_reads()
                vectors_ok.append(True)
            finally:  # the baselines waiting for them go on (or, if they failed, are not started)
                vectors_made.set()
        jobs.append(timed("word vectors", make_vectors))
    else:
        write_reads()

    def after_vectors() -> bool:
        vectors_made.wait()
        return bool(vectors_ok)

    candidates = todo + unchecked
    baseline_jobs = [job_for(r, run_dir[r], {}, profile, cells, settings) for r in candidates]
    if vectors:  # an unchecked run that the vectors leave current does not start (status 'interrupted': silent)
        for run, job in zip(candidates, baseline_jobs):
            job["after"] = after_vectors if run in todo else (lambda run=run: after_vectors() and run in stale)
    threads = settings.threads or max(1, (os.cpu_count() or 1) // parallel)
    # the stages first: they start at once
    execute(jobs + baseline_jobs, settings, parallel, (), threads, archive=archive)


def build_caches(todo, cache_root: Path, device: str = "cpu"):
    """One activation cache per (task, data, biLM) that the unfinished ELMo runs need."""

    caches = {}
    for run in todo:
        if not run.uses_elmo or run.cache_key in caches:
            continue
        reason = no_cache_reason(run.task, run.knob_dict)
        if reason:
            print(reason, flush=True)
            caches[run.cache_key] = ""
            continue
        print(f"activation cache for {run.task} ...", flush=True)
        caches[run.cache_key] = str(ensure_cache(run.task, run.knob_dict, cache_root, device=device))
    return caches
