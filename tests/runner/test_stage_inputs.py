"""The profile's own stages (word vectors, biLM pretraining and fine-tuning, the fine-tuning's task text) are keyed
on the bytes they read, as runs are: a changed corpus or task file makes the stage again and the runs that read its
old output are stale; an output that no longer matches its own record is refused in one line (--redo-stale too); a
diverged pretraining is no finished stage; bad stage corpora, a GloVe file of the wrong dimension or with NaNs are
caught by --check."""
import copy
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runner.profile import Profile, SpecError
from runner.stages.bilm_stages import check_stage_outputs, prepare_bilm
from tasks.knobs import KNOBS
from tests.elmo_module.test_pretrain import TINY_OPTIONS, grammar_lines
from tests.runner.test_runner import PROFILE, runner_command, runner_env
from tests.runner.test_small_profile_inputs import _corpus

pytestmark = pytest.mark.slow  # trains models or starts runners throughout

REPO = Path(__file__).resolve().parents[2]
NER_SAMPLE = REPO / "tasks" / "ner" / "sample_data" / "train.txt"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_runner(tmp_path, profile, *extra):
    return subprocess.run(runner_command(tmp_path, profile, *extra), cwd=REPO, env=runner_env(tmp_path),
                          capture_output=True, text=True, timeout=900)


def test_word_vectors_follow_their_corpus_and_a_cut_vectors_file_is_refused_under_redo_stale(tmp_path):
    """Before: 400 lines appended to the corpus, then a seed added: "word vectors: done", the new run read the
    vectors of the old corpus, nothing stale; the vectors file cut to half its lines: --redo-stale retrained the
    runs on the cut file although vectors.json recorded its words and sha256."""
    corpus = tmp_path / "corpus.txt"
    _corpus(corpus, lines=600)
    vectors = tmp_path / "vectors" / "vectors.50d.lowercase.txt"
    profile = copy.deepcopy(PROFILE)
    profile["vectors"] = {"out": str(tmp_path / "vectors"), "train": [str(corpus)], "dims": ["50:lowercase"],
                          "args": ["--min-count", "1", "--epochs", "1"]}
    profile["task_knobs"] = {"ner": {"GLOVE_PATH": str(vectors)}}
    first = run_runner(tmp_path, profile, "--baselines-only")
    assert first.returncode == 0, first.stderr[-2000:]
    (result,) = (tmp_path / "runs").glob("ner/*/result.json")
    assert json.loads(result.read_text())["reads"][str(vectors)] == sha(vectors)

    kept = vectors.read_bytes()
    lines = kept.splitlines(keepends=True)
    vectors.write_bytes(b"".join(lines[:len(lines) // 2]))
    cut = run_runner(tmp_path, profile, "--baselines-only", "--redo-stale")
    assert cut.returncode == 2 and "Traceback" not in cut.stderr, cut.stderr[-2000:]
    error = cut.stderr.strip().splitlines()[-1]
    assert error.startswith(f"error: word vectors: {vectors} does not match its record in "
                            f"{tmp_path / 'vectors' / 'vectors.json'} ({len(lines):,} words, sha256 "), error
    assert f"found {len(lines) // 2:,} lines" in error and f"remove {tmp_path / 'vectors'}" in error
    assert result.is_file() and not result.with_name("result.stale.json").exists()  # nothing retrained

    vectors.write_bytes(kept)
    with open(corpus, "a") as f:
        f.write("The horse sleeps near the river, she said.\n" * 400)
    profile["sweep_overrides"]["table1"]["seeds"]["default"] = 2  # a seed added
    again = run_runner(tmp_path, profile, "--baselines-only")
    assert f"word vectors: made again ({corpus} changed since they were made)" in again.stdout, again.stdout
    assert sha(vectors) != sha256_bytes(kept)
    assert again.returncode == 2 and "1 finished runs read files that have changed since" in again.stderr
    assert f": {vectors}" in again.stderr


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _typed(profile: dict) -> Profile:
    """The profile as the runner holds it once loaded (its stages' functions take the typed Profile)."""
    return Profile(**{"sweeps": ("table1",), **profile})


def _bilm_profile(tmp_path, lr: str = None) -> dict:
    (tmp_path / "train.txt").write_text(grammar_lines(300, 0))
    (tmp_path / "heldout.txt").write_text(grammar_lines(20, 1))
    (tmp_path / "options.json").write_text(json.dumps(TINY_OPTIONS))
    return {"name": "t", "device": "cpu", "bilm": {
        "pretrain": {"out": str(tmp_path / "bilm"),
                     "args": ["--options", str(tmp_path / "options.json"), "--train", str(tmp_path / "train.txt"),
                              "--heldout", str(tmp_path / "heldout.txt"), "--tokens", "2000", "--batch-size", "8",
                              "--unroll", "10", "--threads", "1", *(["--lr", lr] if lr else [])]},
        "finetune": {"tasks": ["ner"], "out": str(tmp_path / "bilm-{task}"),
                     "args": ["--batch-size", "4", "--unroll", "5", "--threads", "1"]}}}


def test_a_changed_pretraining_corpus_or_task_file_makes_the_stages_again_and_a_cut_weights_file_is_refused(
        tmp_path, capsys):
    profile = _bilm_profile(tmp_path)
    ner_train = tmp_path / "ner.train.conll"
    ner_train.write_bytes(NER_SAMPLE.read_bytes())
    knobs = {"ner": {**KNOBS, "SIZE": "tiny", "TRAIN_PATH": str(ner_train)}}
    pretrained, tuned = tmp_path / "bilm" / "weights.hdf5", tmp_path / "bilm-ner" / "weights.hdf5"
    prepare_bilm(_typed(profile), knobs, quiet=True)
    first = sha(pretrained), sha(tuned)
    capsys.readouterr()
    prepare_bilm(_typed(profile), knobs, quiet=True)
    out = capsys.readouterr().out
    assert "biLM pretraining: done" in out and "biLM fine-tuning on ner: done" in out

    with open(tmp_path / "train.txt", "a") as f:  # the pretraining corpus grows
        f.write(grammar_lines(100, 7, order=("o", "v", "s")))
    prepare_bilm(_typed(profile), knobs, quiet=True)
    out = capsys.readouterr().out
    assert f"biLM pretraining: {tmp_path / 'train.txt'} changed since {tmp_path / 'bilm'} was made: " \
           f"pretrained again" in out, out
    assert f"{pretrained} changed since {tmp_path / 'bilm-ner'} was made: fine-tuned again" in out
    second = sha(pretrained), sha(tuned)
    assert second[0] != first[0] and second[1] != first[1]  # so the runs that read them are stale

    # the task's training file changes (same path): its text and the fine-tuning are made again, not reused
    text = tmp_path / "text" / "ner.train.txt"
    assert "Zanzibar" not in text.read_text()
    with open(ner_train, "a") as f:
        f.write("\nZanzibar NNP I-NP I-LOC\nwins VBZ I-VP O\n")
    prepare_bilm(_typed(profile), knobs, quiet=True)
    out = capsys.readouterr().out
    assert f"{ner_train} changed since {tmp_path / 'bilm-ner'} was made: fine-tuned again" in out, out
    assert "biLM pretraining: done" in out and "Zanzibar wins" in text.read_text()
    assert sha(tuned) != second[1] and sha(pretrained) == second[0]

    tuned.write_bytes(tuned.read_bytes()[:1000])  # a cut weights file: refused, not reused
    with pytest.raises(SpecError, match=rf"^biLM fine-tuning \(bilm-ner\): {tuned} does not match its record in "
                                        rf"{tmp_path / 'bilm-ner' / 'stage_args.json'} \(sha256 [0-9a-f]{{12}}, "
                                        rf"found [0-9a-f]{{12}}, 1,000 bytes\): remove {tmp_path / 'bilm-ner'}"):
        check_stage_outputs(profile["bilm"])


def test_redo_stale_after_a_task_file_changed_fine_tunes_again_before_training_the_stale_runs(tmp_path):
    """Before: with every run finished no stage was looked at, so --redo-stale trained the stale ELMo run again on
    the biLM fine-tuned on the old training file."""
    ner_train = tmp_path / "ner.train.conll"
    ner_train.write_bytes(NER_SAMPLE.read_bytes())
    official = REPO / "elmo_module" / "bundled"
    tuned = tmp_path / "bilm-ner"
    profile = copy.deepcopy(PROFILE)
    profile["bilm"] = {"finetune": {"from": {"options": str(official / "tiny_options.json"),
                                             "weights": str(official / "tiny_weights.hdf5")},
                                    "tasks": ["ner"], "out": str(tmp_path / "bilm-{task}"),
                                    "args": ["--batch-size", "4", "--unroll", "5", "--threads", "1"]}}
    profile["task_knobs"] = {"ner": {"TRAIN_PATH": str(ner_train), "ELMO_OPTIONS": str(tuned / "options.json"),
                                     "ELMO_WEIGHTS": str(tuned / "weights.hdf5")}}
    first = run_runner(tmp_path, profile)
    assert first.returncode == 0, first.stderr[-2000:]

    def elmo_result():
        (path,) = [p for p in (tmp_path / "runs").glob("ner/*/result.json")
                   if json.loads(p.read_text())["knobs"]["ELMO"] != "none"]
        return json.loads(path.read_text())

    old = sha(tuned / "weights.hdf5")
    assert elmo_result()["reads"][str(tuned / "weights.hdf5")] == old
    with open(ner_train, "a") as f:
        f.write("\nZanzibar NNP I-NP I-LOC\nwins VBZ I-VP O\n")
    stale = run_runner(tmp_path, profile)
    assert stale.returncode == 2 and "2 finished runs read files that have changed since" in stale.stderr
    again = run_runner(tmp_path, profile, "--redo-stale")
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"biLM fine-tuning on ner: {ner_train} changed since {tuned} was made: fine-tuned again" in again.stdout
    weights = tuned / "weights.hdf5"
    assert sha(weights) != old and elmo_result()["reads"][str(weights)] == sha(weights)


def test_a_diverged_pretraining_is_no_finished_stage(tmp_path):
    profile = _bilm_profile(tmp_path, lr="1e4")
    with pytest.raises(SpecError) as error:
        prepare_bilm(_typed(profile), {"ner": {**KNOBS, "SIZE": "tiny"}}, quiet=True)
    assert str(error.value).startswith("biLM pretraining failed (exit 2): error: pretraining diverged: held-out "
                                       "perplexity forward inf"), str(error.value)
    assert "\n" not in str(error.value) and not (tmp_path / "bilm" / "perplexity.json").exists()
    assert not (tmp_path / "bilm-ner").exists()


@pytest.mark.parametrize("content, found", [(b"", "no text (empty files, or blank lines only)"),
                                            ("ok\nCaf\xe9 au lait\n".encode("latin-1"),
                                             ":2: not valid UTF-8 (byte 0xe9 at column 4)")])
def test_the_vectors_stage_on_an_empty_or_latin1_corpus_is_one_line(tmp_path, content, found):
    (tmp_path / "corpus.txt").write_bytes(content)
    done = subprocess.run([sys.executable, "-m", "runner.stages.word_vectors", "--train", str(tmp_path / "corpus.txt"),
                           "--out", str(tmp_path / "out"), "--dims", "8:cased", "--min-count", "1"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: ") and found in done.stderr
    assert not (tmp_path / "out" / "vectors.json").exists()


def test_check_names_bad_stage_corpora_a_stage_vectors_dimension_and_nan_vectors(tmp_path):
    (tmp_path / "latin1.txt").write_bytes("ok\nCaf\xe9 au lait\n".encode("latin-1"))
    (tmp_path / "empty.txt").write_bytes(b"\n  \n")
    profile = _bilm_profile(tmp_path)
    profile["bilm"]["pretrain"]["args"][5] = str(tmp_path / "empty.txt")  # --heldout
    profile.update({k: v for k, v in PROFILE.items() if k not in profile})
    profile["vectors"] = {"out": str(tmp_path / "vectors"), "train": [str(tmp_path / "latin1.txt")],
                          "dims": ["100:lowercase"]}  # NER's config wants 50-d vectors
    profile["task_knobs"] = {"ner": {"GLOVE_PATH": str(tmp_path / "vectors" / "vectors.100d.lowercase.txt")}}
    check = run_runner(tmp_path, profile, "--check")
    assert check.returncode == 2 and "Traceback" not in check.stderr, check.stderr[-2000:]
    assert "3 problem(s)" in check.stderr, check.stderr
    assert f"the word vectors stage's --train: {tmp_path / 'latin1.txt'}:2: not valid UTF-8 (byte 0xe9)" in check.stderr
    assert f"the biLM pretraining stage's --heldout: {tmp_path / 'empty.txt'}: no text" in check.stderr
    assert (f"{tmp_path / 'vectors' / 'vectors.100d.lowercase.txt'}: expected 50-d GloVe vectors (ner config "
            in check.stderr and "found 100-d vectors (what the word-vectors stage makes there" in check.stderr)

    glove = tmp_path / "glove.50d.txt"
    rows = [f"{w} " + " ".join(["0.125"] * 50) for w in ("the", "a", "EU", "rejects", "German", "call")]
    rows[4] = rows[4].replace("0.125", "nan", 1).replace(" 0.125", " 0.125", 1)
    glove.write_text("\n".join(rows) + "\n")
    nan = copy.deepcopy(PROFILE)
    nan["task_knobs"] = {"ner": {"GLOVE_PATH": str(glove)}}
    check = run_runner(tmp_path, nan, "--check")
    assert check.returncode == 2 and "1 problem(s)" in check.stderr, check.stderr[-2000:]
    assert f"{glove}: expected finite numbers" in check.stderr and "found the value nan at line 5" in check.stderr


@pytest.mark.skipif(__import__("platform").machine().lower() not in ("x86_64", "amd64"), reason="x86-64 kernels")
def test_word_vectors_are_the_same_bytes_under_another_blas_kernel(tmp_path):
    """OpenBLAS picks its kernels per CPU model, and gensim's word2vec sums through them: the same corpus gave other
    vectors on an AVX-512 machine than on an AVX2 one. OPENBLAS_CORETYPE=Prescott (the baseline x86-64 kernel) stands
    in for another CPU here: it gave other bytes than this CPU's own choice before the stage pinned its kernel."""
    import random

    rng = random.Random(1)
    words = [f"w{i}" for i in range(400)]
    (tmp_path / "corpus.txt").write_text("".join(
        " ".join(rng.choice(words[:rng.randint(20, 400)]) for _ in range(rng.randint(5, 25))) + "\n"
        for _ in range(6000)))
    made = {}
    for kernel in ("", "Prescott"):  # this CPU's own choice, and another
        out = tmp_path / f"vectors-{kernel or 'own'}"
        env = {**runner_env(tmp_path), "OPENBLAS_CORETYPE": kernel}
        done = subprocess.run([sys.executable, "-m", "runner.stages.word_vectors", "--train",
                               str(tmp_path / "corpus.txt"), "--out", str(out), "--dims", "50:lowercase",
                               "--epochs", "1"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        made[kernel] = sha(out / "vectors.50d.lowercase.txt")
    assert made[""] == made["Prescott"]
    assert json.loads((out / "vectors.json").read_text())["settings"]["blas_kernel"] in ("Haswell", "Prescott")


def test_the_bilm_of_record_is_restored_checked_and_pretrained_again_where_it_cannot_serve(tmp_path, capsys):
    """A fresh clone re-made the small profile's pretraining (2.2 h on one thread) although the same bytes could be
    kept with its results; the kept biLM is restored instead, checked against its record, and stands in for the
    stage only where it can: the fine-tunings continue the LM's softmax, which it does not keep."""
    from runner.stages.bilm_stages import archive_bilm, restore_of_record

    profile = _bilm_profile(tmp_path)
    record, out = tmp_path / "results" / "bilm" / "bilm", tmp_path / "bilm"
    profile["bilm_of_record"] = {"from": str(record), "to": str(out)}
    ner_train = tmp_path / "ner.train.conll"
    ner_train.write_bytes(NER_SAMPLE.read_bytes())
    knobs = {"ner": {**KNOBS, "SIZE": "tiny", "TRAIN_PATH": str(ner_train)}}
    prepare_bilm(_typed(profile), knobs, quiet=True)
    archive_bilm(_typed(profile), tmp_path / "results" / "bilm")  # as the small profile keeps it
    made = sha(out / "weights.hdf5")
    assert sha(record / "weights.hdf5") == made and not (record / "softmax.hdf5").exists()
    stages = json.loads((out / "stages.json").read_text())

    shutil.rmtree(out)  # a fresh clone: artifacts/ is not in git
    capsys.readouterr()
    restore_of_record(profile["bilm_of_record"])
    assert capsys.readouterr().out == (f"biLM of record: {out} restored from {record} (weights.hdf5 sha256 "
                                       f"{made[:12]}, checked): not pretrained again\n")
    prepare_bilm(_typed(profile), knobs, quiet=True)  # the fine-tuning is done: the restored biLM serves as the stage
    assert "biLM pretraining: done" in capsys.readouterr().out
    assert sha(out / "weights.hdf5") == made and len(json.loads((out / "stages.json").read_text())) == len(stages)

    shutil.rmtree(out)
    shutil.rmtree(tmp_path / "bilm-ner")  # a fine-tuning to make: it needs the softmax, so the biLM is pretrained
    restore_of_record(profile["bilm_of_record"])
    prepare_bilm(_typed(profile), knobs, quiet=True)
    assert "holds no softmax.hdf5 (a biLM of record keeps its weights only), which the fine-tuning on ner " \
           "continues: pretrained again" in capsys.readouterr().out
    assert (out / "softmax.hdf5").is_file() and sha(out / "weights.hdf5") == made  # (deterministic on one CPU)

    shutil.rmtree(out)
    (record / "weights.hdf5").write_bytes((record / "weights.hdf5").read_bytes()[:1000])  # a cut copy: refused
    with pytest.raises(SpecError, match=rf"^bilm_of_record: {record / 'weights.hdf5'} does not match its record in "
                                        rf"{record / 'stage_args.json'} \(sha256 {made[:12]}, found [0-9a-f]{{12}}\)"):
        restore_of_record(profile["bilm_of_record"])
    assert not out.exists()
