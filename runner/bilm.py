"""A profile's own biLM: pretraining on a text corpus, then one fine-tuned copy per task (PAPER.md Sec. 3.4:
"fine-tune the biLM on task data ... for one epoch"), both with ``python -m elmo_module pretrain|finetune``.

A profile asks for it with a ``bilm`` section::

    "bilm": {"pretrain": {"out": "artifacts/mini/bilm", "args": ["--options", "...", "--train", "...", ...]},
             "finetune": {"tasks": ["ner", "sst"], "out": "artifacts/mini/bilm-{task}", "args": ["--epochs", "1"]}}

and points its runs at the results (``ELMO_OPTIONS: artifacts/mini/bilm-ner/options.json``). Each stage is
resumable like the runs: pretraining continues from its checkpoint (``--resume``) until its ``--tokens`` or
``--epochs`` budget is spent; a fine-tuning is done once its ``perplexity.json`` exists. The fine-tuning text of a
task is the sentences its own dataset reader gives for the training (and dev) files, one per line, so any task
works without knowing its file format. Every command and its wall time go to ``OUT/stages.json``.
"""
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional

from runner.spec import REPO, SpecError, repo_path


def _option(args: List[str], name: str) -> Optional[str]:
    return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else None


def pretraining_done(out: Path, args: List[str]) -> bool:
    """True once OUT/perplexity.json records a spent --tokens or --epochs budget (a --minutes stop is not done)."""
    path = out / "perplexity.json"
    if not path.is_file():
        return False
    record = json.loads(path.read_text())
    tokens, epochs = _option(args, "--tokens"), _option(args, "--epochs")
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


def _call(command: List[str], out: Path, log: Path, what: str, show: bool = True, env: Dict[str, str] = None) -> None:
    """Run one stage; its output (progress bar included) goes to ``log`` and, if ``show``, to the terminal."""
    print(f"{what}: {' '.join(command)}\n  (log: {log})", flush=True)
    started = time.time()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as f:
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
        for chunk in iter(lambda: process.stdout.read1(4096), b""):
            f.write(chunk)
            f.flush()
            if show:
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
        returncode = process.wait()
    _record(out, command, time.time() - started, returncode)
    if returncode != 0:
        lines = [l for l in log.read_text(errors="replace").replace("\r", "\n").splitlines() if l.strip()]
        raise SpecError(f"{what} failed (exit {returncode}): {lines[-1] if lines else ''} -- log: {log}")


def task_text(task: str, knobs: Dict[str, str], directory: Path) -> Dict[str, Path]:
    """The task's training and dev sentences as whitespace-tokenized text files (one sentence per line)."""
    from runner.cache import read_task_sentences

    files = {}
    for split, key in (("train", "TRAIN_PATH"), ("dev", "DEV_PATH")):
        path = directory / f"{task}.{split}.txt"
        if not path.is_file():
            sentences = read_task_sentences(task, knobs, [key])
            partial = path.with_name(path.name + ".partial")
            partial.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text("".join(" ".join(s) + "\n" for s in sentences if s))
            os.replace(partial, path)
        files[split] = path
    return files


def prepare_bilm(profile: dict, task_knobs: Dict[str, Dict[str, str]], jobs: int = 1, device: str = "cpu",
                 gpus: List[str] = ()) -> None:
    """Run the profile's pretraining and fine-tuning stages that are not done yet (``jobs`` fine-tunings at a
    time, or one per GPU slot of ``gpus``). ``task_knobs``: the knobs of one run of each task (for its data files).
    ``device``: the stages' --device unless the profile's args name one."""
    spec = profile.get("bilm")
    if not spec:
        return
    python = [sys.executable, "-m", "elmo_module"]
    device_arg = lambda args: [] if "--device" in args else ["--device", "cuda" if device == "cuda" else "cpu"]
    pre = spec["pretrain"]
    out = repo_path(pre["out"])
    if pretraining_done(out, pre["args"]):
        print(f"biLM pretraining: done ({out})")
    else:
        resume = ["--resume"] if (out / "checkpoint.pt").is_file() else []
        _call([*python, "pretrain", *pre["args"], *device_arg(pre["args"]), "--out", str(out), *resume], out,
              out / "pretrain.log",
              "biLM pretraining")
        if not pretraining_done(out, pre["args"]):
            raise SpecError(f"biLM pretraining stopped before its budget (--minutes?); run again to resume it "
                            f"from {out / 'checkpoint.pt'}")
    fine = spec.get("finetune") or {}
    todo = []
    for task in fine.get("tasks", []):
        if task not in task_knobs:
            continue
        target = repo_path(fine["out"].format(task=task))
        if (target / "perplexity.json").is_file():
            print(f"biLM fine-tuning on {task}: done ({target})")
            continue
        shutil.rmtree(target, ignore_errors=True)  # an interrupted fine-tuning starts again
        text = task_text(task, task_knobs[task], target.parent / "text")
        todo.append(([*python, "finetune", "--from", str(out), "--train", str(text["train"]), "--dev",
                      str(text["dev"]), "--tokenize", "whitespace", *fine.get("args", []),
                      *device_arg(fine.get("args", [])), "--out", str(target)],
                     target, target.parent / f"finetune-{task}.log", f"biLM fine-tuning on {task}"))
    jobs = len(gpus) or jobs
    show = jobs <= 1 or len(todo) <= 1  # parallel progress bars would garble each other: logs only
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:  # one process each, `jobs` at a time
        pinned = [{"CUDA_VISIBLE_DEVICES": gpus[i % len(gpus)]} if gpus else {} for i in range(len(todo))]
        for future in [pool.submit(_call, *job, show, env) for job, env in zip(todo, pinned)]:
            future.result()

def _stages(out: Path) -> List[dict]:
    path = out / "stages.json"
    return json.loads(path.read_text()) if path.is_file() else []


def bilm_report(profile: dict) -> Optional[dict]:
    """What the profile's biLM stages produced (their perplexity.json and stages.json), for results/."""
    spec = profile.get("bilm")
    if not spec:
        return None
    out = repo_path(spec["pretrain"]["out"])
    report = {"pretrain": {"out": spec["pretrain"]["out"], "done": pretraining_done(out, spec["pretrain"]["args"]),
                           "stages": _stages(out)}, "finetune": {}}
    if (out / "perplexity.json").is_file():
        report["pretrain"]["perplexity"] = json.loads((out / "perplexity.json").read_text())
        report["pretrain"]["options"] = json.loads((out / "options.json").read_text())
    fine = spec.get("finetune") or {}
    for task in fine.get("tasks", []):
        target = repo_path(fine["out"].format(task=task))
        if (target / "perplexity.json").is_file():
            report["finetune"][task] = {"out": fine["out"].format(task=task), "stages": _stages(target),
                                        "perplexity": json.loads((target / "perplexity.json").read_text())}
    return report


def bilm_markdown(report: dict, provenance_lines: List[str]) -> str:
    pre = report["pretrain"]
    lines = ["# The profile's biLM: pretraining and fine-tuning perplexities", ""] + provenance_lines + [""]
    ppl = pre.get("perplexity")
    if not ppl:
        return "\n".join(lines + [f"Pretraining in `{pre['out']}` has not finished."]) + "\n"
    o = pre["options"]
    lines += [f"Pretrained biLM `{pre['out']}`: {o['lstm']['n_layers']} x {o['lstm']['dim']}-cell LSTMs, projection "
              f"{o['lstm']['projection_dim']}, char CNN filters {o['char_cnn']['filters']}, "
              f"{o['char_cnn']['n_highway']} highway; vocabulary {ppl['vocabulary_size']:,} words, "
              f"{ppl['train_tokens_per_epoch']:,} training tokens per epoch.", "",
              "| tokens trained | held-out tokens | forward ppl | backward ppl | average ppl |", "|---|---|---|---|---|"]
    lines += [f"| {h['tokens_trained']:,} | {h['tokens']:,} | {h['forward']:.1f} | {h['backward']:.1f} | "
              f"{h['average']:.1f} |" for h in ppl["history"]]
    last = ppl.get("last_run", {})
    lines += ["", f"Last training segment: {last.get('tokens', 0):,} tokens in {last.get('seconds', 0):,.0f} s "
              f"({last.get('tokens_per_second', 0):,.0f} tokens/s, {last.get('device')}, {last.get('threads')} "
              f"thread(s))."]
    if report["finetune"]:
        lines += ["", "Fine-tuned on each task's training sentences (dev perplexity picks the epoch, Sec. 3.4):", "",
                  "| task | biLM | dev ppl before (fwd / bwd / avg) | dev ppl after (fwd / bwd / avg) | epoch kept |",
                  "|---|---|---|---|---|"]
        for task, f in report["finetune"].items():
            b, a = f["perplexity"]["dev_before"], f["perplexity"]["dev"]
            lines.append(f"| {task} | `{f['out']}` | {b['forward']:.1f} / {b['backward']:.1f} / {b['average']:.1f} | "
                         f"{a['forward']:.1f} / {a['backward']:.1f} / {a['average']:.1f} | "
                         f"{f['perplexity']['best_epoch']} |")
    stages = [(pre["out"], s) for s in pre["stages"]] + [(f["out"], s) for f in report["finetune"].values()
                                                        for s in f["stages"]]
    if stages:
        lines += ["", "Commands the runner ran for these stages, with their wall times:", ""]
        lines += [f"- `{s['command']}` ({s['wall_time_s']:,.0f} s, exit {s['returncode']}, {s['date']})"
                  for _, s in stages]
    return "\n".join(lines) + "\n"
