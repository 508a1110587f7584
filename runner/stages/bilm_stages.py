"""A profile's own biLM: pretraining on a text corpus, then one fine-tuned copy per task (arXiv:1802.05365v2
Sec. 3.4, p. 4, and supplement A.1, p. 12: the biLM fine-tuned for one epoch on the task's training split, evaluated
on its development split), both with ``python -m elmo_module pretrain|finetune``.

A profile asks for it with a ``bilm`` section::

    "bilm": {"pretrain": {"out": "artifacts/mini/bilm", "args": ["--options", "...", "--train", "...", ...]},
             "finetune": {"tasks": ["ner", "sst"], "out": "artifacts/mini/bilm-{task}", "args": ["--epochs", "1"]}}

and points its runs at the results (``ELMO_OPTIONS: artifacts/mini/bilm-ner/options.json``). Without a pretrain
stage, ``finetune.from`` names the biLM to start from, e.g. the official weights (the paper profile; they come
without a softmax, so ``finetune`` starts a new one over the task text's vocabulary)::

    "bilm": {"finetune": {"from": {"options": "${ELMO_DIR}/...stage_options.json", "weights":
"${ELMO_DIR}/..._weights.hdf5"}, "tasks": ["snli", "ner"], "out": "artifacts/paper/bilm-{task}", "args": [...]}}

The stages run on the profile's ``device`` (``--device``; default cpu). Each stage is
resumable like the runs: pretraining continues from its checkpoint (``--resume``) until its ``--tokens`` or
``--epochs`` budget is spent; a fine-tuning is done once its ``perplexity.json`` exists. Both are keyed on the bytes
they read (``stage_args.json``: a changed corpus, task file or starting biLM makes the stage again) and refused when
their written options or weights no longer match their record. The fine-tuning text of a
task is the sentences its own dataset reader gives for the training (and dev) files, one per line, so any task
works without knowing its file format. Every command and its wall time go to ``OUT/stages.json``.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional

from runner.execution.freshness import changed_reads, changed_writes, in_format, input_paths, reads, sha256_of
from runner.execution.training import LIVE, LIVE_LOCK, STOPPING, child_pythonpath, die_with_parent
from runner.paths import REPO, canonical, expand, repo_path
from runner.profile import Profile, SpecError
from runner.records import keep_portable, repo_relative, write_atomic, write_json
from runner.stages.caches import read_task_sentences


def stage_option(stage_args: List[str], name: str) -> Optional[str]:
    """The value after ``name`` in a stage's args (None if it is absent or last)."""
    at = stage_args.index(name) + 1 if name in stage_args else len(stage_args)
    return stage_args[at] if at < len(stage_args) else None


SETTINGS = "stage_args.json"  # a stage's freshness record, beside its files: args, reads, writes (runner-written)


def stage_options(stage_args: List[str]) -> Dict[str, List[str]]:
    """``--name v1 v2 --flag`` -> {"--name": ["v1", "v2"], "--flag": []}."""
    options, name = {}, None
    for arg in stage_args:
        if arg.startswith("--"):
            name = arg
            options[name] = []
        elif name is not None:
            options[name].append(arg)
    return options


def check_settings(out: Path, stage_args: List[str], what: str) -> None:
    """A stage's output made with other args than the profile's now is neither reused nor resumed (a finished
    pretraining was "done" whatever its args; a checkpoint went on under the new ones): a one-line error naming the
    options that differ. Paths are compared as the
    files they name under the default data root (runner/paths.py canonical): a stage recorded with
    ``../shared/data/x`` was made by a profile now written ``${DATA_DIR}/x``, whatever DATA_DIR is (the bytes are
    keyed apart: _changed)."""
    path = out / SETTINGS
    if not path.is_file():
        return
    old, new = stage_options(_recorded(out).get("settings") or []), stage_options(stage_args)

    def shown(options, name):
        return "(absent)" if name not in options else " ".join(options[name]) or "(set)"

    def files(options):  # what the values name, under the default data root
        return {name: [canonical(expand(a)) for a in values] for name, values in options.items()}

    old_files, new_files = files(old), files(new)
    changed = [f"{name} {shown(old, name)} -> {shown(new, name)}" for name in sorted(set(old) | set(new))
               if old_files.get(name) != new_files.get(name)]
    if changed:
        raise SpecError(f"{what}: {out} was made with other settings than the profile's ({'; '.join(changed)}): "
                        f"remove {out} to make it again (the finished runs that read it are then stale), or put "
                        f"the profile's args back")


def _record_settings(out: Path, stage_args: List[str], read: Dict[str, Optional[str]], writes: dict = None) -> None:
    """OUT/stage_args.json, the freshness record of runner/execution/freshness.py: the args (``settings``), the
    sha256 of the files the stage read (``reads``) and, once it is done, of the files it wrote (``writes``)."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / SETTINGS, {"settings": stage_args, "reads": read, **({"writes": writes} if writes else {})})


OUTPUTS = ("options.json", "weights.hdf5")  # what the runs read of a stage (ELMO_OPTIONS, ELMO_WEIGHTS)


def _recorded(out: Path) -> dict:
    try:
        record = json.loads((out / SETTINGS).read_text())
    except (OSError, ValueError):
        return {}
    return in_format(record, out / SETTINGS)


def _changed(out: Path, now: Dict[str, Optional[str]]) -> List[str]:
    """The files whose bytes changed since the stage in OUT read them (its stage_args.json: changed_reads); a record
    that names none (an output the runner did not make) counts as changed: the stage is made again."""
    record = _recorded(out)
    return changed_reads(record.get("reads"), now) if record else []


def _check_outputs(out: Path, what: str) -> None:
    """A finished stage's options and weights against the sha256 its record keeps (recorded now if it keeps none):
    a file changed since (cut, replaced) is refused in one line, never reused, nor trained on by --redo-stale."""

    record = _recorded(out)
    if not record or not all((out / name).is_file() for name in OUTPUTS):
        return
    if "writes" not in record:  # just made: what it wrote is recorded now
        _record_settings(out, record["settings"], record["reads"], {name: sha256_of(out / name) for name in OUTPUTS})
        return
    for name, recorded, found in changed_writes(record, out):
        size = f", {(out / name).stat().st_size:,} bytes" if (out / name).is_file() else ""
        raise SpecError(f"{what}: {out / name} does not match its record in {out / SETTINGS} (sha256 "
                        f"{str(recorded)[:12]}, found {found[:12]}{size}): remove {out} to make it again (the runs "
                        f"that read it then train again)")


def _files(stage_args: List[str], flags) -> List[str]:
    """The files named by ``flags`` in a stage's args (globs expanded, relative to the repository where the stage
    runs), as given: what the stage reads."""
    import glob

    options, files = stage_options(stage_args), []
    for flag in flags:
        for pattern in options.get(flag, []):
            pattern = expand(pattern)
            files += sorted(glob.glob(pattern, root_dir=REPO)) if glob.has_magic(pattern) else [pattern]
    return files


def pretrain_inputs(stage_args: List[str]) -> Dict[str, Optional[str]]:
    """What a pretraining reads: its options file, training and held-out text."""

    return reads(_files(stage_args, ("--options", "--train", "--heldout")))


def finetune_inputs(source: List[str], task: str, knobs: Dict[str, str]) -> Dict[str, Optional[str]]:
    """What a fine-tuning reads: the biLM it starts from (--from DIR: its options, weights, softmax and vocabulary;
    or --options and --weights) and the task's training and dev files (the task text is written from them)."""

    flags = stage_options(source)
    files = [str(Path(flags["--from"][0]) / name) for name in (*OUTPUTS, "softmax.hdf5", "vocab.txt")
             if (Path(flags["--from"][0]) / name).is_file()] if "--from" in flags else []
    files += [v[0] for k, v in flags.items() if k in ("--options", "--weights")]
    data = input_paths(task, knobs, uses_elmo=False)
    return reads(files + [data["TRAIN_PATH"], data["DEV_PATH"]])


def pretraining_done(out: Path, stage_args: List[str]) -> bool:
    """True once OUT/perplexity.json records a spent --tokens or --epochs budget (a --minutes stop is not done)."""
    path = out / "perplexity.json"
    if not path.is_file():
        return False
    record = json.loads(path.read_text())
    tokens, epochs = stage_option(stage_args, "--tokens"), stage_option(stage_args, "--epochs")
    if tokens is not None:
        return record["history"][-1]["tokens_trained"] >= int(tokens)
    return record.get("epochs_completed", 0) >= int(epochs or 10)


def _record(out: Path, command: List[str], seconds: float, returncode: int) -> None:
    path = out / "stages.json"
    stages = json.loads(path.read_text()) if path.is_file() else []
    stages.append({"command": " ".join(command), "wall_time_s": round(seconds, 1), "returncode": returncode,
                   "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")})
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stages, indent=2))


def call_stage(command: List[str], out: Path, log: Path, what: str, show: bool = True,
               env: Optional[Dict[str, str]] = None) -> None:
    """Run one stage; its output (progress bar included) goes to ``log`` and, if ``show``, to the terminal."""
    sys.stdout.write(f"{what}: {' '.join(command)}\n  (log: {log})\n")  # one write: runs print beside it
    sys.stdout.flush()
    started = time.time()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as f:
        with LIVE_LOCK:  # stop_runs() (Ctrl-C, or the word vectors failing beside this stage) stops it too; checked
            if STOPPING.is_set():  # and registered together: a stage started just after stop_runs() went on for
                raise SpecError(f"{what}: not started, the runner is stopping")  # hours (the runner waiting on it)
            process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       env={**os.environ, "PYTHONPATH": child_pythonpath(), **(env or {})},
                                       preexec_fn=die_with_parent)  # a killed runner leaves no stage behind
            LIVE.add(process)
        try:
            for chunk in iter(lambda: process.stdout.read1(4096), b""):
                f.write(chunk)
                f.flush()
                if show:
                    sys.stdout.buffer.write(chunk)
                    sys.stdout.flush()
        except BaseException:  # Ctrl-C (or a full disk): the stage stops with the runner, not after it
            process.terminate()
            process.wait()
            raise
        finally:
            with LIVE_LOCK:
                LIVE.discard(process)
        returncode = process.wait()
    _record(out, command, time.time() - started, returncode)
    if returncode != 0:
        lines = [line for line in log.read_text(errors="replace").replace("\r", "\n").splitlines() if line.strip()]
        raise SpecError(f"{what} failed (exit {returncode}): {lines[-1] if lines else ''} -- log: {log}")


def task_text(task: str, knobs: Dict[str, str], directory: Path) -> Dict[str, Path]:
    """The task's training and dev sentences as whitespace-tokenized text files (one sentence per line).

    Each distinct text once, in first-seen order: the paper fine-tuned "for one epoch on the training split"
    (arXiv:1802.05365v2 supplement A.1, p. 12), and the readers repeat texts per instance (an SQuAD paragraph once
    per question, ~5x; an SNLI premise once per hypothesis, 3x), which would make the epoch 2-4 times longer and
    weight those texts accordingly. SST is read as whole sentences (SST_PHRASES=false): its phrases are sub-strings
    of the training sentences."""


    files, data = {}, input_paths(task, knobs, uses_elmo=False)
    for split, key in (("train", "TRAIN_PATH"), ("dev", "DEV_PATH")):
        path = directory / f"{task}.{split}.txt"
        source = reads([data[key]])  # the text is made again from a changed (or other) data file
        record = path.with_name(path.name + ".source.json")
        try:
            current = json.loads(record.read_text()) == source and path.is_file()
        except (OSError, ValueError):
            current = False
        if not current:
            sentences = read_task_sentences(task, {**knobs, "SST_PHRASES": "false"}, [key])
            lines = dict.fromkeys(" ".join(s) for s in sentences if s)
            partial = path.with_name(path.name + ".partial")
            partial.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text("".join(line + "\n" for line in lines))
            os.replace(partial, path)
            write_json(record, source)
        files[split] = path
    return files


def prepare_bilm(profile: Profile, task_knobs: Dict[str, Dict[str, str]], jobs: int = 1, device: str = "cpu",
                 gpus: List[str] = (), quiet: bool = False) -> None:
    """Run the profile's pretraining and fine-tuning stages that are not done yet (``jobs`` fine-tunings at a
    time, or one per GPU slot of ``gpus``). ``task_knobs``: the knobs of one run of each task (for its data files).
    ``device``: the stages' --device unless the profile's args name one. ``quiet``: progress to the logs only (the
    runner trains baseline runs beside the stages and prints their lines)."""
    spec = profile.bilm
    if not spec:
        return
    python = [sys.executable, "-m", "elmo_module"]
    fine = spec.get("finetune") or {}
    if "pretrain" in spec:
        pre = spec["pretrain"]
        out = repo_path(pre["out"])
        check_settings(out, pre["args"], "biLM pretraining")
        inputs = pretrain_inputs(pre["args"])
        changed = _changed(out, inputs)
        if changed:  # neither reused nor resumed: the runs that read the old biLM are then stale (its checksum)
            print(f"biLM pretraining: {', '.join(changed)} changed since {out} was made: pretrained again")
            shutil.rmtree(out)
        tuning = [t for t in fine.get("tasks", []) if t in task_knobs
                  and not (repo_path(fine["out"].format(task=t)) / "perplexity.json").is_file()]
        if tuning and pretraining_done(out, pre["args"]) and not (out / "softmax.hdf5").is_file():
            print(f"biLM pretraining: {out} holds no softmax.hdf5 (a biLM of record keeps its weights only), which "
                  f"the fine-tuning on {', '.join(tuning)} continues: pretrained again")
            shutil.rmtree(out)
        if pretraining_done(out, pre["args"]):
            _check_outputs(out, "biLM pretraining")
            heldout = json.loads((out / "perplexity.json").read_text())["heldout"]
            if not math.isfinite(heldout["average"]):  # written before `pretrain` refused a diverged biLM
                raise SpecError(f"biLM pretraining: {out} diverged (held-out perplexity {heldout['average']}): "
                                f"remove {out} and pretrain again with a lower --lr")
            print(f"biLM pretraining: done ({out})")
        else:
            resume = ["--resume"] if (out / "checkpoint.pt").is_file() else []
            _record_settings(out, pre["args"], inputs)
            args = [expand(a) for a in pre["args"]]  # (${DATA_DIR}: the profiles' data root)
            call_stage([*python, "pretrain", *args, *_device(device, args), "--out", str(out), *resume],
                  out, out / "pretrain.log", "biLM pretraining", show=not quiet)
            if not pretraining_done(out, pre["args"]):
                raise SpecError(f"biLM pretraining stopped before its budget (--minutes?); run again to resume it "
                                f"from {out / 'checkpoint.pt'}")
            _check_outputs(out, "biLM pretraining")  # records the outputs' checksums
        source = ["--from", str(out)]
    else:
        source = None  # finetune.from, checked when a fine-tuning is to run
    todo = []
    for task in fine.get("tasks", []):
        if task not in task_knobs:
            continue
        target = repo_path(fine["out"].format(task=task))
        what = f"biLM fine-tuning on {task}"
        check_settings(target, fine.get("args", []), what)
        done = (target / "perplexity.json").is_file()
        source = source or _finetune_source(profile, fine, check=not done)  # (a done one needs it only to check it)
        inputs = finetune_inputs(source, task, task_knobs[task])
        changed = _changed(target, inputs) if done else []
        if changed:  # another task file or a pretraining made again since: the old copy is not reused
            print(f"{what}: {', '.join(changed)} changed since {target} was made: fine-tuned again")
        elif done:
            _check_outputs(target, what)
            print(f"{what}: done ({target})")
            continue
        if "--from" not in source:
            source = _finetune_source(profile, fine)  # a missing source is named now (one line)
        shutil.rmtree(target, ignore_errors=True)  # an interrupted fine-tuning starts again
        text = task_text(task, task_knobs[task], target.parent / "text")
        args = [expand(a) for a in fine.get("args", [])]
        todo.append(([*python, "finetune", *source, "--train", str(text["train"]), "--dev", str(text["dev"]),
                      "--tokenize", "whitespace", *args, *_device(device, args), "--out", str(target)],
                     target, target.parent / f"finetune-{task}.log", what, inputs))
    # one fine-tuning per GPU slot; on one unnamed GPU, one after another, each with the whole device
    jobs = len(gpus) or (1 if device == "cuda" else jobs)
    show = not quiet and (jobs <= 1 or len(todo) <= 1)  # parallel progress bars would garble each other: logs only
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:  # one process each, `jobs` at a time
        pinned = [{"CUDA_VISIBLE_DEVICES": gpus[i % len(gpus)]} if gpus else {} for i in range(len(todo))]
        def finetune(job, env):
            *call, inputs = job
            call_stage(*call, show, env)
            _record_settings(job[1], fine.get("args", []), inputs)  # finetune writes only into an empty --out
            _check_outputs(job[1], job[3])  # records the outputs' checksums

        for future in [pool.submit(finetune, job, env) for job, env in zip(todo, pinned)]:
            future.result()


def stages_pending(profile: Profile, tasks) -> bool:
    """True when prepare_bilm() would run a stage for runs of ``tasks``."""
    spec = profile.bilm
    if "pretrain" in spec:
        out = repo_path(spec["pretrain"]["out"])
        if not pretraining_done(out, spec["pretrain"]["args"]) or _changed(
                out, pretrain_inputs(spec["pretrain"]["args"])):
            return True
    fine = spec.get("finetune") or {}
    for task in (t for t in fine.get("tasks", []) if t in tasks):
        target = repo_path(fine["out"].format(task=task))
        source = ["--from", str(repo_path(spec["pretrain"]["out"]))] if "pretrain" in spec else (
            _finetune_source(profile, fine, check=False))
        if not (target / "perplexity.json").is_file() or _changed(
                target, finetune_inputs(source, task, tasks[task])):
            return True
    return False


def check_stage_outputs(bilm: dict) -> None:
    """Every finished stage's options and weights against its record (_check_outputs), whether or not a stage is to
    run: a weights file cut or replaced since is refused before any run reads it (--redo-stale included). ``bilm``:
    the profile's stages ({} without any)."""
    for kind, out in _stage_dirs(bilm):
        if (out / "perplexity.json").is_file():
            _check_outputs(out, "biLM pretraining" if kind == "pretrain" else f"biLM fine-tuning ({out.name})")


def _device(device: str, stage_args: List[str]) -> List[str]:
    """``--device`` of the runner (the profile's ``device`` unless --device says otherwise), unless the stage's args
    name one."""
    return [] if "--device" in stage_args else ["--device", "cuda" if device == "cuda" else "cpu"]


def _finetune_source(profile: Profile, fine: dict, check: bool = True) -> List[str]:
    """``--options X --weights Y`` of ``finetune.from`` (the biLM to fine-tune when there is no pretrain stage);
    ``check``: a missing or unset one is a one-line error (else given as it is: not checkable)."""
    given = fine.get("from")
    if not isinstance(given, dict) or set(given) != {"options", "weights"}:
        raise SpecError(f"profile '{profile.name}': bilm.finetune needs a pretrain stage or "
                        f"'from': {{\"options\": ..., \"weights\": ...}}, found 'from' = {given!r}")
    hints = profile.requires
    source = []
    for key, knob in (("options", "ELMO_OPTIONS"), ("weights", "ELMO_WEIGHTS")):
        value = expand(str(given[key]))
        path = repo_path(value)
        if check and ("${" in value or not path.is_file()):
            hint = f"; {hints[knob]}" if knob in hints else ""
            raise SpecError(f"bilm.finetune.from.{key} = {given[key]}: "
                            f"{'an environment variable is not set' if '${' in value else f'{path} is not a file'}"
                            f"{hint}")
        source += [f"--{key}", str(path)]
    return source


def _stages(out: Path) -> List[dict]:
    path = out / "stages.json"
    return json.loads(path.read_text()) if path.is_file() else []


def bilm_report(spec: dict, archive: Optional[Path] = None) -> Optional[dict]:
    """What the profile's biLM stages (``spec``: its "bilm") produced (their perplexity.json and stages.json), for
    results/; a stage with no output here is read from ``archive`` (archive_bilm), if given and kept there."""
    if not spec:
        return None

    def records(out: Path) -> Path:
        kept = archive / out.name if archive is not None else out
        return out if (out / "perplexity.json").is_file() or not (kept / "perplexity.json").is_file() else kept

    report = {"pretrain": None, "finetune": {}}
    if "pretrain" in spec:
        out = records(repo_path(spec["pretrain"]["out"]))
        report["pretrain"] = {"out": spec["pretrain"]["out"], "done": pretraining_done(out, spec["pretrain"]["args"]),
                              "stages": _stages(out)}
        if (out / "perplexity.json").is_file():
            report["pretrain"]["perplexity"] = json.loads((out / "perplexity.json").read_text())
            report["pretrain"]["options"] = json.loads((out / "options.json").read_text())
    else:
        report["from"] = (spec.get("finetune") or {}).get("from")
    fine = spec.get("finetune") or {}
    for task in fine.get("tasks", []):
        target = records(repo_path(fine["out"].format(task=task)))
        if (target / "perplexity.json").is_file():
            report["finetune"][task] = {"out": fine["out"].format(task=task), "stages": _stages(target),
                                        "perplexity": json.loads((target / "perplexity.json").read_text())}
    return repo_relative(report)  # bilm.md and summary.json name no absolute path of this machine


def bilm_markdown(report: dict, provenance_lines: List[str]) -> str:
    pre = report["pretrain"]
    lines = ["# The profile's biLM: pretraining and fine-tuning perplexities", ""] + provenance_lines + [""]
    if pre is None:
        source = report.get("from") or {}
        lines += [f"No pretraining: fine-tuned from `{source.get('options')}` + `{source.get('weights')}`."]
    elif not pre.get("perplexity"):
        return "\n".join(lines + [f"Pretraining in `{pre['out']}` has not finished."]) + "\n"
    else:
        lines += _pretrain_lines(pre)
    if report["finetune"]:
        lines += ["", "Fine-tuned on each task's training sentences (dev perplexity picks the epoch, Sec. 3.4):", "",
                  "| task | biLM | dev ppl before (fwd / bwd / avg) | dev ppl after (fwd / bwd / avg) | epoch kept |",
                  "|---|---|---|---|---|"]
        for task, f in report["finetune"].items():
            b, a = f["perplexity"]["dev_before"], f["perplexity"]["dev"]
            lines.append(f"| {task} | `{f['out']}` | {b['forward']:.1f} / {b['backward']:.1f} / {b['average']:.1f} | "
                         f"{a['forward']:.1f} / {a['backward']:.1f} / {a['average']:.1f} | "
                         f"{f['perplexity']['best_epoch']} |")
    stages = ([(pre["out"], s) for s in pre["stages"]] if pre else []) + [
        (f["out"], s) for f in report["finetune"].values() for s in f["stages"]]
    if stages:
        lines += ["", "Commands the runner ran for these stages, with their wall times:", ""]
        lines += [f"- `{s['command']}` ({s['wall_time_s']:,.0f} s, exit {s['returncode']}, {s['date']})"
                  for _, s in stages]
    return "\n".join(lines) + "\n"


def _pretrain_lines(pre: dict) -> List[str]:
    ppl, o = pre["perplexity"], pre["options"]
    lines = [f"Pretrained biLM `{pre['out']}`: {o['lstm']['n_layers']} x {o['lstm']['dim']}-cell LSTMs, projection "
              f"{o['lstm']['projection_dim']}, char CNN filters {o['char_cnn']['filters']}, "
              f"{o['char_cnn']['n_highway']} highway; vocabulary {ppl['vocabulary_size']:,} words, "
              f"{ppl['train_tokens_per_epoch']:,} training tokens per epoch.", "",
              "| tokens trained | held-out tokens | forward ppl | backward ppl | average ppl |",
              "|---|---|---|---|---|"]
    lines += [f"| {h['tokens_trained']:,} | {h['tokens']:,} | {h['forward']:.1f} | {h['backward']:.1f} | "
              f"{h['average']:.1f} |" for h in ppl["history"]]
    last = ppl.get("last_run", {})
    lines += ["", f"Last training segment: {last.get('tokens', 0):,} tokens in {last.get('seconds', 0):,.0f} s "
              f"({last.get('tokens_per_second', 0):,.0f} tokens/s, {last.get('device')}, {last.get('threads')} "
              f"thread(s))."]
    return lines


# What a multi-session profile ("archive_runs": true) keeps of its biLM in RESULTS/bilm/<stage dir name>/: each
# stage's record (options, perplexities, commands and wall times), so that a fresh clone (artifacts/ is not in git)
# still reports it in bilm.md. Not the weights: generated weights stay out of git. A fresh clone whose archived runs
# are all finished trains nothing and needs no biLM; one with ELMo runs still to do runs the stages again, which
# need not give the same bits, and then lists the archived ELMo runs that read other weights as stale.
_RECORDS = ("options.json", "perplexity.json", "stages.json")


def _stage_dirs(spec: dict) -> List[tuple]:
    dirs = [("pretrain", repo_path(spec["pretrain"]["out"]))] if "pretrain" in spec else []
    fine = spec.get("finetune") or {}
    return dirs + [("finetune", repo_path(fine["out"].format(task=t))) for t in fine.get("tasks", [])]


def check_stage_settings(spec: dict) -> None:
    """Every biLM stage made here against the profile's args now, whether runs are left to do or not: a stage made
    with other settings is refused in one line (check_settings), never taken as the profile's (its finished runs
    would keep a biLM the profile no longer describes). ``spec``: the profile's "bilm" ({} without stages)."""
    if "pretrain" in spec:
        check_settings(repo_path(spec["pretrain"]["out"]), spec["pretrain"]["args"], "biLM pretraining")
    fine = spec.get("finetune") or {}
    for task in fine.get("tasks", []):  # named as prepare_bilm names them
        check_settings(repo_path(fine["out"].format(task=task)), fine.get("args", []), f"biLM fine-tuning on {task}")


def archive_bilm(profile: Profile, archive: Path) -> None:
    """Copy each finished stage's records into ARCHIVE/<dir name>/, portable (no absolute path of this checkout, as
    every record under results/; written with write-then-rename; unchanged records are not rewritten)."""
    for _, out in _stage_dirs(profile.bilm):
        if not (out / "perplexity.json").is_file():
            continue
        for name in _RECORDS:
            source, target = out / name, archive / out.name / name
            if not source.is_file():
                continue
            keep_portable(source, target)
    keep_of_record(profile.bilm_of_record, archive)


# The biLM of record: a profile's pretrained biLM kept in git beside its results ("bilm_of_record": {"from":
# "results/small/bilm/bilm", "to": "artifacts/small/bilm"}), the one exception to "no weights in git": its options
# and weights (~14 MB for the small profile's 2 x 512 cells) with stage_args.json (the args, the sha256 of what it
# read and of what it wrote), perplexity.json and stages.json. A fresh clone restores it into the stage's output
# instead of pretraining (restore_of_record); the stage's own checks then apply as to one made here (other args
# refused, other inputs pretrained again). Not the LM's softmax.hdf5 (50,000 x 128 floats, 25.6 MB: over the
# 20 MB a biLM of record may take), which the fine-tunings continue: a fine-tuning still to make pretrains again.
OF_RECORD_MAX_BYTES = 20_000_000
_KEPT = (*OUTPUTS, "perplexity.json", "stages.json", SETTINGS)  # SETTINGS last: written once the others are


def keep_of_record(kept: dict, archive: Path) -> None:
    """The finished pretraining whose output is the profile's biLM of record, copied into its record folder when
    that is in this profile's ``archive`` (RESULTS/bilm; another profile that reads the same record only restores
    it): portable records, and the options and weights as they are, rewritten only when they differ. ``kept``: the
    profile's "bilm_of_record" ({} without one)."""
    if not kept:
        return
    out, record = repo_path(kept["to"]), repo_path(kept["from"])
    if record.parent.resolve() != Path(archive).resolve():
        return
    if not (out / "perplexity.json").is_file() or not (out / SETTINGS).is_file():
        return
    size = sum((out / name).stat().st_size for name in OUTPUTS)
    if size > OF_RECORD_MAX_BYTES:
        print(f"warning: bilm_of_record: {out} holds {size / 1e6:.1f} MB of options and weights, over the "
              f"{OF_RECORD_MAX_BYTES / 1e6:.0f} MB a biLM of record may take in git: not kept in {record}",
              file=sys.stderr)
        return
    record.mkdir(parents=True, exist_ok=True)
    for name in _KEPT:
        if name in OUTPUTS:  # the bytes the runs read (and their record's sha256), not a portable rewrite
            if not (record / name).is_file() or sha256_of(record / name) != sha256_of(out / name):
                write_atomic(record / name, (out / name).read_bytes())
        elif (out / name).is_file():
            keep_portable(out / name, record / name)


def restore_of_record(kept: dict) -> None:
    """The profile's biLM of record copied into its stage's output when that holds no weights, after its files are
    checked against the sha256 its record keeps (a mismatch: one line naming both); then said in one line. ``kept``:
    the profile's "bilm_of_record" ({} without one)."""
    if not kept:
        return
    record, out = repo_path(kept["from"]), repo_path(kept["to"])
    if (out / "weights.hdf5").is_file() or not (record / "weights.hdf5").is_file():
        return
    recorded = _recorded(record)
    for name, digest, found in changed_writes({"writes": {n: None for n in OUTPUTS}, **recorded}, record):
        raise SpecError(f"bilm_of_record: {record / name} does not match its record in {record / SETTINGS} "
                        f"(sha256 {str(digest)[:12]}, found {found[:12]}): check it out again "
                        f"(git checkout -- {record}) or remove the profile's key 'bilm_of_record'")
    outputs = recorded["writes"]
    out.mkdir(parents=True, exist_ok=True)
    for name in _KEPT:
        if (record / name).is_file():
            write_atomic(out / name, (record / name).read_bytes())
    print(f"biLM of record: {out} restored from {record} (weights.hdf5 sha256 {outputs['weights.hdf5'][:12]}, "
          f"checked): not pretrained again", flush=True)
