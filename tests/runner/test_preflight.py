"""The preflight (runner/preflight/checks.py) on a complete stand-in for the paper profile's inputs, in their real
formats and layouts, named through the paper profile's environment variables: it passes; with one planted defect it
names that defect; and every paper-size config trains on the stand-ins (the check that the GloVe dimension a profile
gives matches what each task's config needs, which the paper profile once got wrong for NER and SRL)."""
import json
import math
import os
import shutil
import subprocess
import sys
from collections import namedtuple
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from runner.profile import load_profile
from runner.spec import expand_cells, load_sweeps, unique_runs
from tasks.knobs import KNOBS
from tests.elmo_fixtures import write_random_elmo

REPO = Path(__file__).resolve().parents[2]
OFFICIAL = "elmo_2x4096_512_2048cnn_2xhighway"
CHINESE = ("新华社", "北京", "今天", "发表", "。")


def _glove(path: Path, dim: int, words) -> None:
    rng = np.random.default_rng(dim)
    path.write_text("".join(f"{w} {' '.join(f'{x:.4f}' for x in rng.standard_normal(dim))}\n" for w in words),
                    encoding="utf-8")


def _sample_words():
    words = set()
    for path in (REPO / "tasks").glob("*/sample_data/**/*"):
        if path.is_file():
            words |= set(path.read_text(encoding="utf-8").replace('"', " ").replace("(", " ").replace(")", " ").split())
    return sorted(w for w in words if " " not in w)[:400]


def _chinese(conll_text: str) -> str:
    """The same annotation with Chinese words: a document of the chinese/ part of the tree."""
    lines = []
    for i, line in enumerate(conll_text.splitlines()):
        columns = line.split()
        if len(columns) > 11 and not line.startswith("#"):
            columns[3] = CHINESE[i % len(CHINESE)]
            line = "   ".join(columns)
        lines.append(line)
    return "\n".join(lines) + "\n"


def _conll_tree(root: Path, splits, suffix: str, sources: Path) -> None:
    """root/data/<split>/data/<language>/annotations/nw/<source>/00/<doc><suffix> for every language, with the
    sample documents of ``sources`` (English) and a Chinese and an Arabic copy of each."""
    for split, source_split in splits.items():
        for n, doc in enumerate(sorted((sources / source_split).rglob("*gold_conll"))):
            text = doc.read_text(encoding="utf-8")
            for language in ("english", "chinese", "arabic"):
                folder = root / "data" / split / "data" / language / "annotations" / "nw" / "xinhua" / "00"
                folder.mkdir(parents=True, exist_ok=True)
                body = text if language == "english" else _chinese(text)
                (folder / f"doc_{n:04d}{suffix}").write_text(body, encoding="utf-8")


def build_stand_in(root: Path) -> dict:
    """Every input of the paper profile, small, in the real formats; returns the environment variables."""
    samples = REPO / "tasks"
    env = {}
    elmo = root / "elmo"
    elmo.mkdir(parents=True)
    write_random_elmo(elmo, filters=((1, 4), (2, 8)), projection_dim=8, cell_dim=16)
    (elmo / "options.json").rename(elmo / f"{OFFICIAL}_options.json")
    (elmo / "weights.hdf5").rename(elmo / f"{OFFICIAL}_weights.hdf5")
    env["ELMO_DIR"] = elmo
    words = _sample_words()
    for name, dim in (("GLOVE_840B_300D", 300), ("GLOVE_6B_100D", 100), ("GLOVE_6B_50D", 50)):
        _glove(root / f"glove.{dim}d.txt", dim, words + [w.lower() for w in words])
        env[name] = root / f"glove.{dim}d.txt"
    copies = {"SQUAD_DIR": ("squad", {"train-v1.1.json": "train.json", "dev-v1.1.json": "dev.json"}),
              "SNLI_DIR": ("snli", {f"snli_1.0_{s}.jsonl": f"{s}.jsonl" for s in ("train", "dev", "test")}),
              "CONLL2003_DIR": ("ner", {"eng.train": "train.txt", "eng.testa": "dev.txt", "eng.testb": "test.txt"}),
              "SST_DIR": ("sst", {f"{s}.txt": f"{s}.txt" for s in ("train", "dev", "test")})}
    for variable, (task, names) in copies.items():
        folder = root / variable.lower()
        folder.mkdir()
        for target, source in names.items():
            shutil.copy(samples / task / "sample_data" / source, folder / target)
        env[variable] = folder
    # SRL: the CoNLL-formatted OntoNotes 5.0 release v12; coref: the CoNLL-2012 shared-task release v4
    v12 = root / "conll-formatted-ontonotes-5.0-12" / "conll-formatted-ontonotes-5.0"
    _conll_tree(v12, {"train": "train", "development": "dev", "conll-2012-test": "test"}, ".gold_conll",
                samples / "srl" / "sample_data")
    env["ONTONOTES_V12_DIR"] = v12
    v4 = root / "conll-2012"
    _conll_tree(v4 / "v4", {"train": "train", "development": "dev", "test": "test"}, ".v4_gold_conll",
                samples / "coref" / "sample_data")
    env["CONLL2012_DIR"] = v4
    return {k: str(v) for k, v in env.items()}


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    root = tmp_path_factory.mktemp("paper_inputs")
    return root, build_stand_in(root)


def paper_runs(sweeps=None, **profile_changes):
    """The paper profile's runs, on CPU (the GPU check has its own case)."""
    profile, path = load_profile("paper")
    # Runs of tasks with a fine-tuned biLM read it from the biLM stage's output
    # (tests/runner/test_bilm_finetune_stage.py); here they read the (stand-in) official weights that stage starts
    # from, which have the same layout.
    task_knobs = {task: {k: v for k, v in knobs.items() if not v.startswith("artifacts/")}
                  for task, knobs in profile.task_knobs.items()}
    changes = {k: tuple(v) if k in ("sweeps", "tasks") else v for k, v in profile_changes.items()}
    changes = {"device": "cpu", **changes}  # on CPU unless a case asks for another device
    profile = replace(profile, knobs={**profile.knobs, "CUDA_DEVICE": "-1"}, task_knobs=task_knobs,
                      **changes, **({"sweeps": tuple(sweeps)} if sweeps else {}))
    cells = expand_cells(profile, load_sweeps(profile, path))
    return profile, unique_runs(cells), cells


def check(tmp_path, monkeypatch, env, tasks=None, **profile_changes):
    """The preflight of the paper profile's Table 1 runs (of ``tasks``, default all)."""
    from runner.preflight.checks import preflight

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    profile, runs, cells = paper_runs(["table1"], **profile_changes)
    runs = [r for r in runs if tasks is None or r.task in tasks]
    return preflight(profile, runs, cells, tmp_path / "cache", use_cache=True)


@pytest.mark.slow
def test_preflight_passes_on_the_stand_in_and_plans(stand_in, tmp_path, monkeypatch):
    _, env = stand_in
    problems, plan = check(tmp_path, monkeypatch, env)
    assert problems == []
    text = "\n".join(plan)
    for task in ("squad", "snli", "srl", "coref", "ner", "sst"):
        assert f"  {task}: " in text
    # the trees hold chinese/ and arabic/ beside english/: read English only, and say what was skipped
    assert "srl TRAIN_PATH: 2 files" in text and "skipped non-English: arabic 2, chinese 2" in text
    assert "activation caches in" in text and "GPU hours: not estimated (the runs are to run on the CPU)" in text


@pytest.mark.slow
def test_readers_read_english_only_and_warn_on_the_other_release(stand_in, caplog):
    from allennlp.common.util import import_module_and_submodules

    import_module_and_submodules("tasks")
    from tasks.coref.reader import CheckedCorefReader
    from tasks.srl.reader import CheckedSrlReader

    _, env = stand_in
    srl_words = {w for i in CheckedSrlReader().read(env["ONTONOTES_V12_DIR"] + "/data/train")
                 for w in (t.text for t in i["tokens"].tokens)}
    assert srl_words and not srl_words & set(CHINESE)
    coref_words = {t.text for i in CheckedCorefReader(max_span_width=5).read(env["CONLL2012_DIR"] + "/v4/data/train")
                   for t in i["text"].tokens}
    assert coref_words and not coref_words & set(CHINESE)
    assert "release" not in caplog.text
    list(CheckedSrlReader().read(env["CONLL2012_DIR"] + "/v4/data/train"))  # SRL given the shared-task release
    assert "SRL expects the CoNLL-formatted OntoNotes 5.0 release v12" in caplog.text and "found 1 file(s) of " \
           "release v4" in caplog.text


def _replace(path: Path, old: str, new: str) -> None:
    path.write_text(path.read_text().replace(old, new, 1))


def _remove_english(env, root):
    shutil.rmtree(Path(env["ONTONOTES_V12_DIR"]) / "data" / "train" / "data" / "english")


def _v4_files_for_srl(env, root):
    for path in (Path(env["ONTONOTES_V12_DIR"]) / "data" / "train").rglob("*.gold_conll"):
        path.rename(path.with_name(path.name.replace(".gold_conll", ".v4_gold_conll")))


def _wrong_weights(env, root):
    options = Path(env["ELMO_DIR"]) / f"{OFFICIAL}_options.json"
    _replace(options, '"dim": 16', '"dim": 32')


def _bad_ner_line(env, root):
    _replace(Path(env["CONLL2003_DIR"]) / "eng.train", "Keller NNP I-NP I-PER", "Keller NNP I-PER")


def _cut_large_squad(env, root):
    """A 30 MB download cut short: over the size the preflight samples (it parsed it itself and blamed the config)."""
    path = Path(env["SQUAD_DIR"]) / "train-v1.1.json"
    document = json.loads(path.read_text())
    text = json.dumps({**document, "data": document["data"] * 2000})
    assert len(text) > 2 * 4 * 256 * 1024
    path.write_text(text[:len(text) // 2])


def _misspelt_options_key(env, root):
    _replace(Path(env["ELMO_DIR"]) / f"{OFFICIAL}_options.json", "use_skip_connections", "use_skip_conections")


def _one_layer_options(env, root):  # the weights have two: a trained layer the options would drop
    path = Path(env["ELMO_DIR"]) / f"{OFFICIAL}_options.json"
    options = json.loads(path.read_text())
    options["lstm"]["n_layers"] = 1
    path.write_text(json.dumps(options))


def _nan_weights(env, root):
    import h5py

    with h5py.File(Path(env["ELMO_DIR"]) / f"{OFFICIAL}_weights.hdf5", "r+") as f:
        f["CNN_high_0/W_carry"][0, 0] = float("nan")


def _cut_weights(env, root):
    path = Path(env["ELMO_DIR"]) / f"{OFFICIAL}_weights.hdf5"
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def _skeletons(env, root):  # the release before skeleton2conll.sh filled in the words
    for path in (Path(env["ONTONOTES_V12_DIR"]) / "data" / "train").rglob("*.gold_conll"):
        path.rename(path.with_name(path.name.replace("_conll", "_skel")))


def _cut_tree(env, root):
    path = Path(env["SST_DIR"]) / "train.txt"
    lines = path.read_text().split("\n")
    lines[1] = lines[1][:-3]
    path.write_text("\n".join(lines))


# defect -> (the task whose runs are checked (the passing case above checks all), plant it: (env, root) -> env
# changes, what the one problem must say)
DEFECTS = {
    "missing_file": ("sst", lambda env, root: (Path(env["SST_DIR"]) / "dev.txt").unlink(),
                     ["sst_dir/dev.txt", "nothing there"]),
    "unset_variable": ("snli", lambda env, root: {"SNLI_DIR": None},
                       ["environment variable SNLI_DIR is not set", "snli", "https://nlp.stanford.edu/projects/snli/"]),
    "unreadable_file": ("ner", _bad_ner_line, ["eng.train: the ner TRAIN_PATH data (reader conll2003_checked): "
                                               "line 4: expected 4 columns"]),
    "glove_dimension": ("ner", lambda env, root: {"GLOVE_6B_50D": env["GLOVE_6B_100D"]},
                        ["glove.100d.txt", "expected 50-d GloVe vectors (ner config", "100-d vectors", "GLOVE_6B_50D"]),
    "only_other_languages": ("srl", _remove_english, ["data/train: the srl TRAIN_PATH data: expected English",
                                                      "found only non-English ones (2 arabic, 2 chinese); the English "
                                                      "part of the release is missing here"]),
    "other_release": ("srl", _v4_files_for_srl, ["data/train", "release v12 (conll-formatted-ontonotes-5.0",
                                                 "the release srl expects", "2 file(s) of release v4",
                                                 "v4_gold_conll"]),
    "weights_disagree_with_options": ("ner", _wrong_weights, [f"{OFFICIAL}_weights.hdf5", "lstm dim 32",
                                                              "found shape (16, 64)"]),
    # more broken inputs, each a problem naming the file
    "large_json_cut_short": ("squad", _cut_large_squad, ["squad_dir/train-v1.1.json: the squad TRAIN_PATH data",
                                                         "text cut short inside a JSON value", "get the file again"]),
    "misspelt_options_key": ("ner", _misspelt_options_key, [f"{OFFICIAL}_options.json: key "
                                                            "'lstm.use_skip_conections' is not a biLM option",
                                                            "Fix that key"]),
    "options_drop_a_layer": ("ner", _one_layer_options, [f"{OFFICIAL}_weights.hdf5: expected options that read every "
                                                         "trained layer", "1 LSTM layers",
                                                         "dataset 'RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B'"]),
    "nan_in_weights": ("ner", _nan_weights, [f"{OFFICIAL}_weights.hdf5: expected finite weights",
                                             "NaN or infinity in dataset 'CNN_high_0/W_carry'"]),
    "weights_cut_short": ("ner", _cut_weights, [f"{OFFICIAL}_weights.hdf5: expected a complete hdf5 weights file",
                                                "truncated file", "Download the weights again"]),
    "skeleton_files": ("srl", _skeletons, ["data/train: the srl TRAIN_PATH data", "6 *_skel file(s)",
                                           "run skeleton2conll.sh"]),
    "glove_of_another_size": ("snli", lambda env, root: {"GLOVE_840B_300D": env["GLOVE_6B_100D"]},
                              ["expected 300-d GloVe vectors", "Set GLOVE_840B_300D to glove.840B.300d.txt"]),
    "sst_tree_cut": ("sst", _cut_tree, ["sst_dir/train.txt: the sst TRAIN_PATH data (reader sst_checked): line 2: "
                                        "expected a PTB-format tree, found an unparseable one (expected ')' but got "
                                        "'end-of-string' at column"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_preflight_names_each_planted_defect(stand_in, tmp_path, monkeypatch, defect):
    root, env = stand_in
    copy = tmp_path / "inputs"
    shutil.copytree(root, copy)
    env = {k: v.replace(str(root), str(copy)) for k, v in env.items()}
    task, plant, expected = DEFECTS[defect]
    changes = plant(env, copy) or {}
    for name, value in changes.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
            env.pop(name)
        else:
            env[name] = value
    problems, _ = check(tmp_path, monkeypatch, env, tasks=[task])
    assert len(problems) == 1, "\n".join(map(str, problems))
    line = str(problems[0])
    for part in expected:
        assert part in line, line
    assert "\n" not in line


@pytest.mark.slow
def test_cr_only_files_with_a_byte_order_mark_read_as_the_plain_ones(stand_in, tmp_path, monkeypatch):
    """Every task reader on its data with a UTF-8 byte-order mark and old-Mac line ends (\\r only), which
    allennlp's readers read as lines (universal newlines): no problem, and as many instances and tokens as the plain
    files. (A CR-only file was one line: NER's 'expected 4 columns'.)"""
    root, env = stand_in
    copy = tmp_path / "inputs"
    shutil.copytree(root, copy)
    env = {k: v.replace(str(root), str(copy)) for k, v in env.items()}
    for variable in ("SQUAD_DIR", "SNLI_DIR", "CONLL2003_DIR", "SST_DIR", "ONTONOTES_V12_DIR", "CONLL2012_DIR"):
        for path in Path(env[variable]).rglob("*"):
            if path.is_file():
                path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r"))
    plain_problems, plain = check(tmp_path / "plain", monkeypatch, stand_in[1])
    problems, plan = check(tmp_path, monkeypatch, env)
    assert plain_problems == [] and problems == [], "\n".join(map(str, problems))
    data = [line for line in plan if "instances" in line]
    assert len(data) == 17 and data == [line for line in plain if "instances" in line]


@pytest.mark.slow
def test_preflight_refuses_a_full_disk(stand_in, tmp_path, monkeypatch):
    import runner.preflight.checks

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(runner.preflight.checks.shutil, "disk_usage", lambda path: usage(10, 10, 0))
    problems, _ = check(tmp_path, monkeypatch, stand_in[1], tasks=["ner"])
    assert len(problems) == 1 and "of disk for the activation caches" in str(problems[0])
    assert str(tmp_path / "cache") in str(problems[0]) and "--no-cache" in str(problems[0])


@pytest.mark.slow
def test_preflight_refuses_a_cuda_profile_without_a_usable_gpu(stand_in, tmp_path, monkeypatch):
    import elmo_module.device

    reason = "GPU 0 (NVIDIA H100, compute capability 9.0) cannot run this torch's kernels: built for sm_37 sm_75"
    monkeypatch.setattr(elmo_module.device, "cuda_problem", lambda index=0: reason)
    problems, _ = check(tmp_path, monkeypatch, stand_in[1], tasks=["ner"], device="cuda")
    assert len(problems) == 1 and str(problems[0]).startswith("GPU 0: expected a CUDA GPU")
    assert reason in str(problems[0])


@pytest.mark.slow
def test_check_flag_prints_the_plan_and_runs_nothing(stand_in, tmp_path, monkeypatch, capsys):
    from runner.__main__ import main

    for name, value in stand_in[1].items():
        monkeypatch.setenv(name, value)
    profile, _, _ = paper_runs(["table1"], tasks=["ner", "srl"])
    (tmp_path / "p.json").write_text(json.dumps(profile.to_json()))
    assert main(["--profile", str(tmp_path / "p.json"), "--check", "--runs-dir", str(tmp_path / "runs"),
                 "--cache-dir", str(tmp_path / "cache"), "--results-dir", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert "plan of profile 'paper'" in out and "srl TRAIN_PATH: 2 files" in out and not (tmp_path / "runs").exists()
    # only the fine-tunings the runner will make (runs of ner and srl: ner's); it once listed squad's, snli's, sst's too
    assert "fine-tune on ner's training text" in out and "fine-tune on snli's" not in out
    assert "(not fine-tuned: squad, snli, sst, no run of them in this plan)" in out


@pytest.mark.slow
def test_paper_check_on_cpu_passes_on_the_stand_in(stand_in, tmp_path):
    """`--profile paper --check` used to read the profile's "device": "cuda" and CUDA_DEVICE 0 whatever --device
    said, so a CPU machine (where one checks the inputs before renting GPUs) always failed with "GPU 0: expected a
    CUDA GPU". The real paper profile and the real command, in its own process, on the stand-in."""
    env = {**os.environ, **stand_in[1], "CUDA_VISIBLE_DEVICES": ""}  # no GPU, whatever this machine has
    for knob in KNOBS:
        env.pop(knob, None)
    done = subprocess.run([sys.executable, "-m", "runner", "--profile", "paper", "--check", "--device", "cpu",
                           "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results"),
                           "--cache-dir", str(tmp_path / "cache")], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "plan of profile 'paper'" in done.stdout and "fine-tune on snli's training text" in done.stdout
    assert "GPU hours: not estimated (the runs are to run on the CPU)" in done.stdout
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_gpu_problem_names_the_device_flag(stand_in, tmp_path, monkeypatch):
    import elmo_module.device

    monkeypatch.setattr(elmo_module.device, "cuda_problem", lambda index=0: "no CUDA GPU is visible")
    problems, _ = check(tmp_path, monkeypatch, stand_in[1], tasks=["ner"], device="cuda")
    assert "add --device cpu to check the inputs (and run) here" in str(problems[0])


@pytest.mark.slow
def test_time_training_batches_measures_a_config(stand_in, monkeypatch):
    """The GPU-hour estimate's timing, run here on CPU on a tiny config (the plan runs it only on a GPU)."""
    from runner.preflight.gpu_estimate import time_training_batches

    _, env = stand_in
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _, runs, _ = paper_runs(["table1"])
    knobs = {**next(r for r in runs if r.task == "ner").knob_dict, "SIZE": "tiny", "ELMO": "input"}
    seconds = time_training_batches("ner", knobs, Path(env["CONLL2003_DIR"]) / "eng.train", "cpu", batches=2)
    assert 0 < seconds < 10


PLACEMENTS = ("none", "input", "output", "both")


@pytest.mark.slow
@pytest.mark.parametrize("task,placement", [(t, p) for t in ("squad", "snli", "srl", "coref", "ner", "sst")
                                            for p in PLACEMENTS])
def test_every_paper_size_config_trains_on_the_stand_in(stand_in, tmp_path, monkeypatch, task, placement):
    """The knobs of the paper profile's Table 1 run (GloVe, data paths, SIZE paper) with each ELMo placement: one
    epoch over the stand-in data on CPU with the small stand-in biLM."""
    from allennlp.commands.train import train_model_from_file
    from allennlp.common.plugins import import_plugins

    _, env = stand_in
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _, runs, _ = paper_runs(["table1"])
    knobs = next(r for r in runs if r.task == task).knob_dict
    assert knobs["SIZE"] == "paper" and knobs["GLOVE_PATH"]
    # SST_PHRASES=false: whole sentences only (the same model, 15x fewer stand-in training instances)
    knobs = {**knobs, "ELMO": placement, "NUM_EPOCHS": "1", "CUDA_DEVICE": "-1", "WANDB": "false", "ELMO_CACHE": "",
             "SST_PHRASES": "false"}
    monkeypatch.chdir(REPO)
    for name, value in knobs.items():
        monkeypatch.setenv(name, value)
    for name in ("ALLENNLP_CACHE_ROOT", "NLTK_DATA"):
        (tmp_path / name).mkdir()
        monkeypatch.setenv(name, str(tmp_path / name))
    import_plugins()
    train_model_from_file(str(REPO / "jsonnet_configs" / f"{task}.jsonnet"), str(tmp_path / "run"),
                          overrides=json.dumps({"evaluate_on_test": False}))  # training and validation suffice
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert math.isfinite(metrics["training_loss"])


@pytest.mark.parametrize("task, batch", [("snli", 32), ("ner", 64)])
def test_gpu_hour_estimate_counts_an_epoch_of_batches_per_epoch(task, batch):
    """The plan's GPU hours multiply each run's epoch by its epochs: BATCHES_PER_EPOCH makes that epoch N batches of
    the config's batch size (sampler or plain), whatever TRAIN_FRACTION is."""
    from runner.preflight.gpu_estimate import instances_per_epoch
    from runner.task_configs import task_config
    from tasks.knobs import KNOBS

    knobs = {**KNOBS, "SIZE": "paper", "TRAIN_FRACTION": "0.001"}
    assert instances_per_epoch(task_config(task, knobs), knobs, 550_000) == pytest.approx(550)
    knobs["BATCHES_PER_EPOCH"] = "172"
    assert instances_per_epoch(task_config(task, knobs), knobs, 550_000) == 172 * batch
