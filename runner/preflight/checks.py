"""The preflight: read and check every input of a profile's runs without training, then print either a numbered list
of problems (each naming the file, what was expected, what was found and what to do) or the plan.

``./run_all.sh --profile paper --check`` runs it alone (with a short GPU timing for the plan); every profile runs it
before any work. What it checks, in order: files and directories the runs name (profile 'requires' says where to get
each); the GPU a 'cuda' profile (or a CUDA_DEVICE knob) asks for (elmo_module.device.cuda_problem); per task, the GloVe
file's dimension against the embedding_dim of the task's config evaluated with the run's knobs; the first records of
every data file through the task's own reader (built from the config as runner/stages/caches.py builds it), and for
CoNLL-2012 trees their language and release (tasks/srl/conll2012_format.py); the biLM weights against their options
(shapes from the hdf5 metadata, nothing loaded); free disk against the activation caches it would write. The plan's GPU
hours come from runner/preflight/gpu_estimate.py; what both read of the runs (a task's config, a data file's sample) is
runner/preflight/task_setup.py.
"""
import gzip
import logging
import re
import shutil
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from elmo_module import device as devices  # through the module: tests fake its answers
from elmo_module.activation_cache import bytes_per_token
from elmo_module.options import BiLmOptions
from runner.paths import REPO, VARIABLE, data_hint, expand, repo_path
from runner.preflight.encoders import encoder_problems, length_problems, transformer_layers
from runner.preflight.gpu_estimate import gpu_plan
from runner.preflight.task_setup import Problem, bilm_sources, first_line, gpu_index, sample_file
from runner.profile import Profile, SpecError
from runner.settings import Settings
from runner.spec import bilm_outputs
from runner.stages.bilm_stages import pretraining_done, stage_options, stages_pending
from runner.stages.caches import instance_texts, no_cache_reason, task_readers
from runner.stages.schedule import check_bfloat16
from runner.stages.word_vectors import file_name, vectors_pending
from runner.task_configs import config_nodes, task_config

DATA_KNOBS = ("TRAIN_PATH", "DEV_PATH", "TEST_PATH")




def _variables(raw: str) -> str:
    names = [m.group(1) for m in VARIABLE.finditer(raw)]
    return " or ".join(names) if names else "the knob"


# ---------------------------------------------------------------- files that are not there

def missing_files(profile: Profile, runs, exclude: List[Path]) -> List[Problem]:
    """One problem per unset variable or missing path, naming it once with every task and knob that needs it."""
    hints = profile.requires  # "KNOB" or "task.KNOB" -> where to get it
    needs = defaultdict(dict)  # unset variables or missing path -> {"task KNOB": the knob's value}
    for run in runs:
        for name in (*DATA_KNOBS, "ELMO_OPTIONS", "ELMO_WEIGHTS", "GLOVE_PATH"):
            value = run.knob_dict.get(name, "")
            if not value or (name.startswith("ELMO_") and not run.reads_bilm):
                continue
            if value.startswith("hf:"):  # tasks/hub_data.py: for `allennlp train` by hand
                needs[value][f"{run.task} {name}"] = value
                continue
            path = repo_path(value)
            if any(path.is_relative_to(d) for d in exclude) or ("${" not in value and path.exists()):
                continue
            unset = [m.group(1) for m in VARIABLE.finditer(value)]
            needs[",".join(unset) or value][f"{run.task} {name}"] = value
    fine = profile.finetune
    # the official weights the biLM stages fine-tune (runner/stages/bilm_stages.py)
    if isinstance(fine.get("from"), dict):
        for part in ("options", "weights"):
            value = expand(str(fine["from"].get(part, "")))
            unset = [m.group(1) for m in VARIABLE.finditer(value)]
            if value and (unset or not repo_path(value).exists()):
                needs[",".join(unset) or value][f"biLM fine-tuning ({', '.join(fine.get('tasks', []))}) "
                                                f"ELMO_{part.upper()}"] = value
    problems = []
    for key, users in needs.items():
        task, name = next(iter(users)).rsplit(" ", 1)
        unset = key.split(",") if "${" in next(iter(users.values())) else []
        same_variable = [h for h in hints.values() for v in unset if h.startswith(f"set {v} ")]
        same_task = [hints[f"{task}.{k}"] for k in DATA_KNOBS if name in DATA_KNOBS and f"{task}.{k}" in hints]
        hint = hints.get(f"{task}.{name}", hints.get(name, (same_variable or same_task or [f"set {name}"])[0]))
        if unset and not hint.startswith(f"set {unset[0]} ") and same_variable:
            hint = same_variable[0]  # the hint of the variable itself, not of another file of the same knob
        values = sorted(set(users.values()))
        what = ", ".join(sorted(users)) + (" (data files or directories)" if name in DATA_KNOBS else "")
        found = f"environment variable {', '.join(unset)} is not set" if unset else "nothing there"
        if key.startswith("hf:"):
            found, hint = ("a Hugging Face hub split, which only `allennlp train` run by hand reads "
                           "(tasks/hub_data.py)",
                           "the runner reads local files (its preflight, checksums and activation caches do): save "
                           "the split in the task's file format and give its path")
        problems.append(Problem(", ".join(values), f"the {what}", found, hint[0].upper() + hint[1:]))
    return problems


def stage_files(profile: Profile) -> List[Problem]:
    """The training text of the profile's own stages still to run (biLM pretraining's --train and --heldout files,
    the word vectors' ``train`` patterns): a missing one would stop the runner only when its stage starts."""
    import glob


    needed, pre, flag = [], profile.pretrain, None
    if pre and not pretraining_done(repo_path(pre["out"]), pre["args"]):
        for arg in pre["args"]:
            flag = arg if arg.startswith("--") else flag
            if flag in ("--train", "--heldout") and not arg.startswith("--"):
                needed.append((f"biLM pretraining's {flag} file", expand(arg)))
    if vectors_pending(profile.vectors):
        needed += [("word vectors' training text (vectors.train)", expand(p)) for p in profile.vectors["train"]]
    hints = {value: data_hint(value) or "give an existing file" for _, value in needed}
    return [Problem(value, f"the {what}", "nothing there", hints[value][0].upper() + hints[value][1:])
            for what, value in needed
            if not (glob.glob(value, root_dir=REPO) if glob.has_magic(value) else repo_path(value).exists())]


# ---------------------------------------------------------------- the GPU


def gpu_problems(profile: Profile, runs) -> List[Problem]:
    index = gpu_index(profile.device, runs)
    if index is None:
        return []
    reason = devices.cuda_problem(index)
    if reason is None:
        return []
    return [Problem(f"GPU {index}", f"a CUDA GPU that torch runs kernels on (profile '{profile.name}' has "
                                    f"\"device\": \"{profile.device}\", CUDA_DEVICE {index})",
                    reason, "Run on a machine with such a GPU, or add --device cpu to check the inputs (and run) "
                            "here on the CPU")]


# ---------------------------------------------------------------- the task config, GloVe


def glove_dimension(path: Path) -> Tuple[Optional[int], str]:
    """(the vector size of a GloVe text file from its first lines, a description of what was read). A later line of
    another size is not seen here: allennlp skips such a line with a warning in the run's log (its word then gets a
    random vector, as a word missing from the file does)."""
    opener = gzip.open if path.suffix == ".gz" else open
    sizes = Counter()
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for line_number, line in enumerate(f, start=1):
            fields = line.rstrip("\n").split(" ")
            if len(fields) > 2:  # a word2vec-style header ("400000 100") has two
                sizes[len(fields) - 1] += 1
            if line_number >= 20:
                break
    if not sizes:
        return None, "no line of 'word v1 v2 ...' in its first 20 lines"
    size, count = sizes.most_common(1)[0]
    return size, f"{size}-d vectors ({count} of its first lines have {size + 1} space-separated fields)"


NONFINITE = re.compile(rb"[ \t][-+]?(?:nan|inf(?:inity)?)(?=[ \t\r\n]|$)", re.IGNORECASE)  # a value, not a word
FULL_SCAN_BYTES = 256 * 1024 * 1024  # a larger GloVe file (840B: 5.6 GB) is checked on its first this many bytes


def glove_nonfinite(path: Path) -> Optional[str]:
    """Where a GloVe text file holds a NaN or infinite value (allennlp reads them as such: the run's loss is then
    NaN), or None: the whole file up to FULL_SCAN_BYTES, else its first FULL_SCAN_BYTES (a regular expression
    over the bytes, ~1 s per GB)."""
    opener = gzip.open if path.suffix == ".gz" else open
    line, tail, read = 1, b"", 0
    with opener(path, "rb") as f:
        while read < FULL_SCAN_BYTES:
            block = f.read(1 << 24)
            if not block:
                break
            read += len(block)
            data = tail + block
            cut = data.rfind(b"\n") + 1 if len(block) == 1 << 24 else len(data)  # whole lines only, but at the end
            match = NONFINITE.search(data, 0, cut)
            if match:
                at = line + data.count(b"\n", 0, match.start())
                return f"the value {match.group().strip().decode()} at line {at}"
            line, tail = line + data.count(b"\n", 0, cut), data[cut:]
    return None


def _stage_vectors(profile: Profile, path: Path) -> Optional[Tuple[Optional[int], str]]:
    """(dimension, what) of a GloVe path that the profile's word-vectors stage will write
    (runner/stages/word_vectors.py), read from the stage's dims; (None, what) for a file there that the stage does not
    make; None for any other path."""
    spec = profile.vectors
    if not spec or path.parent != repo_path(spec["out"]):
        return None

    made = {file_name(int(d.split(":")[0]), d.split(":")[1]): int(d.split(":")[0]) for d in spec.get(
        "dims", ["300:cased", "100:lowercase", "50:lowercase"])}
    if path.name in made:
        return made[path.name], f"{made[path.name]}-d vectors (what the word-vectors stage makes there: its dims)"
    return None, f"a file the word-vectors stage does not make (it makes {', '.join(made)})"


def glove_problems(profile: Profile, task: str, config: dict) -> List[Problem]:
    problems = []
    for where, node in config_nodes(config["model"], "model"):
        if not node.get("pretrained_file"):
            continue
        path = repo_path(str(node["pretrained_file"]))
        expected = int(node["embedding_dim"])
        found, what = _stage_vectors(profile, path) or (None, None)
        if what is None and not path.is_file():
            continue  # reported as missing
        if what is None:
            try:
                found, what = glove_dimension(path)
                nonfinite = glove_nonfinite(path)
            except OSError as e:
                found, what, nonfinite = None, f"an unreadable file ({first_line(e)})", None
            if nonfinite and found == expected:
                problems.append(Problem(str(path), "finite numbers (a NaN or infinite vector makes the run's loss "
                                        "NaN)", nonfinite, "Use another GloVe file, or make the vectors again"))
        if found != expected:
            raw = profile.raw_knob(task, "GLOVE_PATH")
            hints = profile.requires
            hint = hints.get(f"{task}.GLOVE_PATH", hints.get("GLOVE_PATH", ""))  # the file the profile names
            fix = (hint[0].upper() + hint[1:] if hint else f"Set {_variables(raw)} to a {expected}-d GloVe text "
                   f"file (tasks/{task}/README.md says which)")
            problems.append(Problem(str(path), f"{expected}-d GloVe vectors ({task} config {where}.embedding_dim, "
                                               f"SIZE {config_size(profile, task)})", what, fix))
    return problems


def stage_corpus_problems(profile: Profile) -> List[Problem]:
    """The text the profile's own stages train on (the word vectors' --train; the biLM pretraining's --train and
    --heldout): each file there, UTF-8, with some text (elmo_module.pretraining.corpus.text_problem reads it whole,
    fast). The stage would otherwise fail on it after the runs were planned (the vectors with a traceback)."""
    import glob

    from elmo_module.pretraining.corpus import text_problem  # (torch/allennlp behind it: loaded when this runs)

    stages = []
    if profile.vectors:
        stages.append(("word vectors", [("--train", profile.vectors.get("train", []))]))
    pre = profile.pretrain
    if pre:
        options = stage_options(pre.get("args", []))
        stages.append(("biLM pretraining", [(n, options.get(n, [])) for n in ("--train", "--heldout")]))
    problems = []
    for stage, lists in stages:
        for flag, patterns in lists:
            for pattern in map(expand, patterns):
                matches = sorted(glob.glob(pattern, root_dir=REPO)) if glob.has_magic(pattern) else [pattern]
                if not matches or not repo_path(matches[0]).is_file():
                    problems.append(Problem(pattern, f"a text file for the {stage} stage's {flag}", "nothing there",
                                            "Fix the profile's path"))
                for match in matches if matches and repo_path(matches[0]).is_file() else ():
                    found = text_problem(repo_path(match))
                    if found:
                        problems.append(Problem(f"the {stage} stage's {flag}", "", found,
                                                "Convert the file to UTF-8 (iconv -f latin1 -t utf-8) or give "
                                                "another"))
    return problems


def config_size(profile: Profile, task: str) -> str:
    return profile.raw_knob(task, "SIZE") or "paper"


# ---------------------------------------------------------------- data files through the task's reader


@dataclass
class DataSample:
    instances: int = 0  # estimated for the whole file or tree
    tokens: int = 0  # of the distinct texts the ELMo indexer sees (what the activation cache stores)
    files: int = 1
    skipped_languages: Optional[Dict[str, int]] = None
    longest: Tuple[Tuple[str, ...], ...] = ()  # the sample's longest texts (a transformer's maximum length: lengths)


def _conll2012_sample(task: str, path: Path, split: str) -> Tuple[List[Problem], Optional[Path], float, dict]:
    from allennlp.common.checks import ConfigurationError

    from tasks.coref.reader import EXPECTED_RELEASE as COREF_RELEASE  # (allennlp behind it: loaded when this runs)
    from tasks.srl.conll2012_format import (  # (torch/allennlp behind it: loaded when this runs)
        RELEASES,
        release_of,
        scan_conll2012,
    )
    from tasks.srl.reader import EXPECTED_RELEASE as SRL_RELEASE  # (torch/allennlp behind it: loaded when this runs)

    expected = {"srl": SRL_RELEASE, "coref": COREF_RELEASE}[task]
    try:
        files, skipped = scan_conll2012(str(path))
    except ConfigurationError as e:
        found = first_line(e).split(": ", 1)[-1]
        return [Problem(str(path), "", f"the {task} {split} data: {found}", f"See tasks/{task}/README.md, 'Data'")
                ], None, 0, {}
    problems = []
    other = Counter(release_of(f) for f in files if release_of(f) != expected)
    if other:
        example = next(f for f in files if release_of(f) != expected)
        problems.append(Problem(str(path), f"{RELEASES[expected]}, the release {task} expects",
                                f"{sum(other.values())} file(s) of release {', '.join(sorted(other))} (e.g. {example})",
                                f"Point {task} at its release (tasks/{task}/README.md, 'Data')"))
    total = sum(Path(f).stat().st_size for f in files)
    first = Path(files[0])
    return problems, first, total / max(1, first.stat().st_size), {"files": len(files), "skipped": skipped}


def data_problems(task: str, knobs: Dict[str, str], scratch: Path) -> Tuple[List[Problem], Dict[str, DataSample]]:
    """Reads a sample of each data file through the task's readers (the training reader for TRAIN_PATH)."""

    train_reader, validation_reader, reader_type = task_readers(task, knobs)
    readers = {"TRAIN_PATH": train_reader, "DEV_PATH": validation_reader, "TEST_PATH": validation_reader}
    problems, samples = [], {}
    for split in DATA_KNOBS:
        value = knobs.get(split, "")
        path = repo_path(value)
        if not value or value.startswith("hf:") or "${" in value or not path.exists():
            continue  # empty: the bundled sample (checked by the tests); missing: reported already
        extra = {}
        directory = scratch / f"{task}-{split}"
        directory.mkdir(parents=True, exist_ok=True)
        if task in ("srl", "coref"):
            found, sample, scale, extra = _conll2012_sample(task, path, split)
            problems += found
            if sample is None:
                continue
        else:
            sample, scale = sample_file(path, directory)
        shown = path if sample.parent == directory else sample  # a prefix copy: name the user's file
        release_log = logging.getLogger("tasks.srl.conll2012_format")  # its release warning is a problem above:
        release_log.disabled = True  # not the same line twice, once before the list
        try:
            instances = list(readers[split].read(str(sample)))
        except Exception as e:  # whatever the reader raises is the problem to report
            message = first_line(e).replace(str(sample), str(shown)).removeprefix(f"{shown}: ")
            problems.append(Problem(str(shown), "", f"the {task} {split} data (reader {reader_type}): {message}",
                                    f"Check the file against tasks/{task}/README.md, 'Data'"))
            continue
        finally:
            release_log.disabled = False
        texts = {tuple(t) for instance in instances for t in instance_texts(instance)}
        samples[split] = DataSample(instances=round(len(instances) * scale),
                                    tokens=round(sum(len(t) for t in texts) * scale),
                                    files=extra.get("files", 1), skipped_languages=extra.get("skipped"),
                                    longest=tuple(sorted(texts, key=len)[-5:]))
    return problems, samples


# ---------------------------------------------------------------- biLM weights


def bilm_options_for(profile: Profile, options_path: str, exclude: List[Path]):
    """The BiLmOptions behind an ELMO_OPTIONS value; for a biLM the profile will write, the options it starts from."""

    path = repo_path(options_path)
    if any(path.is_relative_to(d) for d in exclude):
        pre = (profile.pretrain or {}).get("args", [])
        sources = [o for o, _ in bilm_sources(profile.finetune)] or \
                  ([pre[pre.index("--options") + 1]] if "--options" in pre else [])
        if not sources:
            return None
        path = repo_path(sources[0])
    try:
        return BiLmOptions.load(path)
    except Exception:
        return None


def weights_problems(profile: Profile, runs, exclude: List[Path]) -> List[Problem]:
    from elmo_module.weights import (  # (torch/allennlp behind it: loaded when this runs)
        layout_mismatches,
        mismatch_text,
        nonfinite_dataset,
    )

    pairs = {(r.knob_dict["ELMO_OPTIONS"], r.knob_dict["ELMO_WEIGHTS"]) for r in runs if r.reads_bilm}
    pairs |= set(bilm_sources(profile.finetune))
    problems = []
    for options_path, weights_path in sorted(pairs):
        options_path = options_path or "elmo_module/bundled/tiny_options.json"
        weights_path = weights_path or "elmo_module/bundled/tiny_weights.hdf5"
        o, w = repo_path(options_path), repo_path(weights_path)
        if any(p.is_relative_to(d) for p in (o, w) for d in exclude) or not (o.is_file() and w.is_file()):
            continue  # written by the profile's biLM stages, or reported missing
        fix = "Use the options file released with these weights (same name stem, see https://allennlp.org/elmo)"
        try:
            options = BiLmOptions.load(o)
        except Exception as e:  # a misspelt key, a wrong type: the line names the key
            problems.append(Problem(str(o), "", first_line(e).removeprefix(f"{o}: ").removeprefix(
                f"options file '{o}' "), "Fix that key (the official options files: https://allennlp.org/elmo)"))
            continue
        try:
            wrong = layout_mismatches(w, options)
            nonfinite = None if wrong else nonfinite_dataset(w, options)
        except Exception as e:  # not an hdf5 file, or one cut short
            message = first_line(e).replace(f"weight file '{w}' ", "a file that ")
            problems.append(Problem(str(w), "a complete hdf5 weights file", message,
                                    "Download the weights again (a broken download is the usual cause): "
                                    "https://allennlp.org/elmo"))
            continue
        if nonfinite:
            problems.append(Problem(str(w), "finite weights", f"NaN or infinity in dataset '{nonfinite}'",
                                    "A diverged or damaged biLM: pretrain it again with a lower --lr, or download "
                                    "the weights again"))
        if wrong and wrong[0][1] is None:
            problems.append(Problem(str(w), f"options that read every trained layer of these weights ({o.name}: "
                                            f"{options.n_layers} LSTM layers, {options.n_highway} highway layers)",
                                    mismatch_text(*wrong[0], o.name).split(" (expected")[0], fix))
        elif wrong:
            name, shape, found = wrong[0]
            problems.append(Problem(str(w), f"dataset '{name}' of shape {shape} (from {o.name}: lstm dim "
                                            f"{options.cell_dim}, projection {options.projection_dim}, filters "
                                            f"{options.n_filters}, {options.n_layers} layers)",
                                    f"{'no such dataset' if found is None else f'shape {found}'}"
                                    f"{f' ({len(wrong) - 1} more datasets disagree)' if len(wrong) > 1 else ''}", fix))
    return problems


# ---------------------------------------------------------------- activation caches and disk

def _directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def _stored_layers(profile: Profile, knobs: Dict[str, str], exclude: List[Path]) -> Optional[Tuple[int, int, int]]:
    """(layers, their size, bytes the cache stores per token) of a run's encoder, or None where not known yet: a
    biLM's (half its token layer: elmo_module/activation_cache.py row_width) or a transformer's (encoders.py)."""
    encoder = knobs.get("ENCODER", "elmo")
    if encoder != "elmo":
        return transformer_layers(encoder)
    options = bilm_options_for(profile, knobs["ELMO_OPTIONS"] or "elmo_module/bundled/tiny_options.json", exclude)
    if options is None:
        return None
    return options.n_layers + 1, options.output_dim, bytes_per_token(options.n_layers + 1, options.output_dim)


def cache_plan(profile: dict, runs, samples: Dict[str, Dict[str, DataSample]], cache_dir: Path,
               exclude: List[Path]) -> Tuple[Dict[str, Tuple[int, str]], int, int]:
    """({task, or task (encoder): (estimated cache bytes, how they were computed)}, free bytes for them, bytes the
    cache directory already holds)."""

    sizes = {}
    for task, encoder in sorted({(r.task, r.knob_dict.get("ENCODER", "elmo")) for r in runs if r.uses_elmo}):
        run = next(r for r in runs if r.task == task and r.uses_elmo and r.knob_dict.get("ENCODER", "elmo") == encoder)
        name = task if encoder == "elmo" else f"{task} ({encoder})"  # a cache per task and encoder
        layers = _stored_layers(profile, run.knob_dict, exclude)
        if layers is None or not samples.get(task) or no_cache_reason(task, run.knob_dict):
            continue
        tokens = sum(s.tokens for s in samples[task].values())
        per_token = layers[2]  # the stored format (float16)
        sizes[name] = (tokens * per_token, f"{tokens:,} distinct-text tokens x {per_token:,} B "
                                           f"({layers[0]} layers x {layers[1]}, float16)")
    existing = _directory_bytes(cache_dir)
    anchor = cache_dir
    while not anchor.exists():
        anchor = anchor.parent
    return sizes, shutil.disk_usage(anchor).free, existing


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


# ---------------------------------------------------------------- everything

def preflight(profile: Profile, runs, cells, cache_dir: Path, use_cache: bool, measure: bool = False
              ) -> Tuple[List[Problem], List[str]]:
    """(problems, plan lines). ``measure``: time a few training batches per task on the GPU for the plan."""
    from allennlp.common.util import import_module_and_submodules

    for package in ("tasks", "elmo_module.allennlp_adapter"):  # the readers and models, as `allennlp train`
        import_module_and_submodules(package)
    exclude = bilm_outputs(profile)
    problems = missing_files(profile, runs, exclude) + stage_files(profile)
    problems += gpu_problems(profile, runs)
    problems += stage_corpus_problems(profile)
    samples: Dict[str, Dict[str, DataSample]] = {}
    with tempfile.TemporaryDirectory(prefix="preflight-") as scratch:
        for task in sorted({r.task for r in runs}):
            # (the data as the biLM's readers give it: a transformer encoder's indexer loads its tokenizer, checked
            # apart by encoder_problems)
            knobs = {**next(r for r in runs if r.task == task).knob_dict, "ENCODER": "elmo"}
            try:
                config = task_config(task, knobs)
            except Exception as e:  # a config that does not evaluate: the first line says why
                problems.append(Problem(f"jsonnet_configs/{task}.jsonnet", "a config that evaluates with the "
                                        "profile's knobs", first_line(e), "Fix the knob it names"))
                continue
            problems += glove_problems(profile, task, config)
            found, samples[task] = data_problems(task, knobs, Path(scratch))
            problems += found
        problems += weights_problems(profile, runs, exclude) + encoder_problems(runs) + length_problems(runs, samples)
        sizes, free, existing = cache_plan(profile, runs, samples, cache_dir, exclude) if use_cache else ({}, 0, 0)
        need = sum(b for b, _ in sizes.values())
        if use_cache and need > free + existing:
            problems.append(Problem(str(cache_dir), f"{_gb(need)} of disk for the activation caches "
                                    f"({', '.join(f'{t} {_gb(b)}' for t, (b, _) in sizes.items())}, estimated)",
                                    f"{_gb(free)} free (and {_gb(existing)} of caches already there)",
                                    "Free space, give --cache-dir on a larger disk, or run with --no-cache (the biLM "
                                    "then runs inside every ELMo run)"))
        plan = plan_lines(profile, runs, cells, samples, sizes, free, cache_dir, use_cache)
        if not problems:
            plan += gpu_plan(profile, runs, samples, Path(scratch), measure)
    return problems, plan


def plan_lines(profile, runs, cells, samples, sizes, free, cache_dir: Path, use_cache: bool) -> List[str]:
    lines = [f"plan of profile '{profile.name}': {len(runs)} runs"]
    per_task = defaultdict(lambda: defaultdict(set))
    for cell in cells:
        if cell.run in runs:
            per_task[cell.task][cell.sweep].add(cell.run)
    for task in sorted(per_task):
        sweeps = ", ".join(f"{s} {len(r)}" for s, r in sorted(per_task[task].items()))
        lines.append(f"  {task}: {sum(r.task == task for r in runs)} runs ({sweeps}; shared runs are trained once)")
    spec = profile.bilm
    if spec:
        lines.append("biLM stages:")
        if "pretrain" in spec:
            lines.append(f"  pretrain -> {spec['pretrain']['out']}")
        fine = spec.get("finetune") or {}
        start = bilm_sources(fine)
        # prepare_bilm fine-tunes only for tasks with a run in the plan (runner/stages/bilm_stages.py); the others are
        # named as such
        planned = {r.task for r in runs}
        for task in [t for t in fine.get("tasks", []) if t in planned]:
            origin = f"from {start[0][1]}" if start else "from the pretrained biLM"
            lines.append(f"  fine-tune on {task}'s training text {origin} -> {fine['out'].format(task=task)}")
        skipped = [t for t in fine.get("tasks", []) if t not in planned]
        if skipped:
            lines.append(f"  (not fine-tuned: {', '.join(skipped)}, no run of {'it' if len(skipped) == 1 else 'them'} "
                         "in this plan)")
    lines.append("data (sizes estimated from the records read):")
    for task in sorted(samples):
        if not samples[task]:
            lines.append(f"  {task}: the bundled sample (tasks/{task}/sample_data)")
        for split, s in samples[task].items():
            languages = ", ".join(f"{lang} {n}" for lang, n in sorted((s.skipped_languages or {}).items()))
            skipped = f"; skipped non-English: {languages}" if s.skipped_languages else ""
            files = f"{s.files} files, " if s.files > 1 else ""
            lines.append(f"  {task} {split}: {files}~{s.instances:,} instances, ~{s.tokens:,} distinct-text tokens"
                         f"{skipped}")
    if use_cache:
        lines.append(f"activation caches in {cache_dir}: "
                     + (", ".join(f"{t} ~{_gb(b)} ({how})" for t, (b, how) in sizes.items()) or "none")
                     + f"; total ~{_gb(sum(b for b, _ in sizes.values()))}, {_gb(free)} free")
    else:
        lines.append("activation caches: off (the biLM runs inside every ELMo run)")
    return lines


def run_preflight(profile: Profile, runs, cells, settings: Settings) -> Optional[int]:
    """The runner's gate: prints the problems (exit status 2) or the plan; 0 after --check; None to go on."""
    import sys

    use_cache = settings.cache
    problems, plan = preflight(profile, runs, cells, settings.cache_dir, use_cache, measure=settings.check)
    if problems:
        print(f"error: profile '{profile.name}': {len(problems)} problem(s) with its inputs, nothing was run:",
              file=sys.stderr)
        for i, problem in enumerate(problems, start=1):
            print(f"  {i}. {problem}", file=sys.stderr)
        return 2
    if settings.check:
        plan += bfloat16_note(profile, runs)
    print("\n".join(plan), flush=True)
    return 0 if settings.check else None


def bfloat16_note(profile: Profile, runs) -> List[str]:
    """--check: the refusal the runner would give for bfloat16 on this CPU (runner/stages/schedule.py check_bfloat16),
    as a note: which runs are finished is known only once the archive is restored, so every run of the plan counts
    here."""

    device = profile.device
    try:
        check_bfloat16(profile, runs, stages_pending(profile, {r.task: r.knob_dict for r in runs}), device)
    except SpecError as e:
        return [f"bfloat16, refused when a stage or run that asks for it is still to do: {e}"]
    return []
