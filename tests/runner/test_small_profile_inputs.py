"""The small profile's inputs: the real SRL (PropBank on the WSJ sample) and coreference (LitBank) data through the
configs' own readers and models, and the word-vectors stage (runner/stages/word_vectors.py) whose files stand in for
GloVe."""
import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO_ROOT, shared_data

pytestmark = pytest.mark.slow  # trains models or starts runners throughout

# srl_propbank_wsj/SOURCES.md and litbank_coref/SOURCES.md (the data's own counts)
SRL_PREDICATES = {"train": 7032, "dev": 1785, "test": 1590}
SRL_NO_PREDICATE = {"train": 59, "dev": 11, "test": 14}  # one all-"O" instance each (allennlp's SRL reader)
COREF_DOCUMENTS = {"train": 80, "dev": 10, "test": 10}
# gold counts of tasks/coref/README.md (Metric): clusters, mentions, singleton clusters, mentions wider than 10 words
# in every cluster and in clusters of 2+ mentions (litbank_coref/SOURCES.md gives the first four and the wide total)
COREF_GOLD = {"train": (6365, 23188, 4661, 394, 198), "dev": (776, 3053, 563, 60, 30), "test": (786, 2862, 539, 32, 19)}


def _reader(task: str, validation: bool = False, **knobs):
    """The dataset (or validation) reader exactly as jsonnet_configs/<task>.jsonnet builds it with these knobs."""
    from allennlp.common import Params
    from allennlp.common.plugins import import_plugins
    from allennlp.data import DatasetReader

    from runner.task_configs import task_config  # the config evaluated with the given knobs, as a run sees it
    from tasks.knobs import KNOBS

    import_plugins()
    config = task_config(task, {**KNOBS, **knobs})
    return DatasetReader.from_params(Params(config["validation_dataset_reader" if validation else "dataset_reader"]))


@pytest.mark.real_data
@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_srl_reader_reads_every_predicate_of_the_real_propbank_split(task_env, split):
    task_env(SIZE="small")
    path = shared_data("srl_propbank_wsj", split)
    instances = list(_reader("srl", SIZE="small").read(str(path)))
    with_verb = [i for i in instances if "B-V" in i["tags"].labels]
    assert (len(with_verb), len(instances) - len(with_verb)) == (SRL_PREDICATES[split], SRL_NO_PREDICATE[split])
    first = with_verb[0]
    tags = first["tags"].labels
    assert len(tags) == len(first["tokens"].tokens) and "B-V" in tags
    assert all(t == "O" or t[:2] in ("B-", "I-") for t in tags)


@pytest.mark.real_data
@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_coref_reader_reads_every_litbank_document(task_env, split):
    from tasks.coref.gold_counts import gold_counts

    path = shared_data("litbank_coref", split)
    reader = _reader("coref", validation=True, SIZE="small")  # whole documents (training cuts them to 50 sentences)
    instances = list(reader.read(str(path)))
    assert len(instances) == COREF_DOCUMENTS[split]
    counts = gold_counts((i["metadata"].metadata["clusters"] for i in instances), reader._max_span_width)
    assert reader._max_span_width == 10 and counts["documents"] == COREF_DOCUMENTS[split]
    names = ("clusters", "mentions", "singletons", "wide", "wide_in_2plus")
    assert tuple(counts[name] for name in names) == COREF_GOLD[split]


@pytest.mark.real_data
def test_srl_trains_a_few_batches_on_the_real_data(train_task):
    knobs = {f"{s.upper()}_PATH": str(shared_data("srl_propbank_wsj", d))
             for s, d in (("train", "train"), ("dev", "dev"), ("test", "test"))}
    model, run = train_task("srl", SIZE="tiny", NUM_EPOCHS=1, TRAIN_FRACTION="0.02", BATCHES_PER_EPOCH=4, **knobs)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["training_loss"] > 0 and 0.0 <= metrics["validation_f1-measure-overall"] <= 1.0


@pytest.mark.real_data
def test_coref_trains_a_few_batches_on_the_real_data(train_task):
    knobs = {"TRAIN_PATH": str(shared_data("litbank_coref", "train")),
             "DEV_PATH": str(shared_data("litbank_coref", "dev")), "TEST_PATH": ""}
    model, run = train_task("coref", SIZE="tiny", NUM_EPOCHS=1, TRAIN_FRACTION="0.05", **knobs)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["training_loss"] > 0 and 0.0 <= metrics["validation_coref_f1"] <= 1.0


# ---- the word-vectors ablation's knobs (WORD_VECTORS, ELMO_MIX=token_only)

@pytest.mark.parametrize("task", ["squad", "snli", "srl", "ner", "sst", "coref"])
def test_without_word_vectors_the_token_representation_is_elmo_alone(task_env, task):
    """WORD_VECTORS=false: a zero-width word embedding, and the encoder's input is exactly as wide as before less
    the word vectors (every config computes its input size from embedding_dim)."""
    from allennlp.common import Params
    from allennlp.common.plugins import import_plugins
    from allennlp.models import Model

    from tests.tasks.test_configs import sample_vocabulary

    import_plugins()
    vocab = sample_vocabulary(task)  # the bundled sample's (a CRF needs its labels)
    sizes = {}
    for vectors in ("true", "false"):
        task_env(ELMO="input", WORD_VECTORS=vectors, ELMO_MIX="token_only")
        params = Params.from_file(str(REPO_ROOT / "jsonnet_configs" / f"{task}.jsonnet"))
        model = Model.from_params(vocab=vocab, params=params.pop("model"))
        embedder = next(m for m in model.modules() if type(m).__name__ == "BasicTextFieldEmbedder")
        sizes[vectors] = (embedder.get_output_dim(), embedder._token_embedders["tokens"].get_output_dim())
    assert sizes["false"][1] == 0 and sizes["true"][1] > 0
    assert sizes["true"][0] - sizes["false"][0] == sizes["true"][1]


def test_without_word_vectors_and_without_elmo_at_the_input_the_knobs_are_refused():
    from tasks.knobs import knob_problems  # the rule's one place: allennlp and the runner check it before any run

    assert knob_problems({"ELMO": "output", "WORD_VECTORS": "false"}) == [
        "knob WORD_VECTORS = 'false': expected ELMO=input or both beside it, found ELMO='output'"]


def test_elmo_alone_trains(train_task):
    model, run = train_task("srl", ELMO="input", WORD_VECTORS="false", ELMO_MIX="token_only", NUM_EPOCHS=2)
    metrics = [json.loads((run / f"metrics_epoch_{e}.json").read_text()) for e in (0, 1)]
    assert metrics[1]["training_loss"] < metrics[0]["training_loss"]
    weights = json.loads((run / "elmo_mix_weights.json").read_text())
    assert "token_only" in json.dumps(weights)


# ---- the word vectors stage

def _corpus(path, lines=4000):
    rng = np.random.default_rng(0)
    animals, verbs = ["cat", "dog", "horse", "cow"], ["runs", "sleeps", "eats", "jumps"]
    cities, countries = ["Paris", "Rome", "Berlin"], ["France", "Italy", "Germany"]
    with open(path, "w") as f:
        for i in range(lines):
            if i % 2:
                f.write(f"The {rng.choice(animals)} {rng.choice(verbs)} in the field.\n")
            else:
                k = rng.integers(3)
                f.write(f"{cities[k]} is the capital of {countries[k]}, she said.\n")


def _vectors(tmp_path, *extra):
    return subprocess.run([sys.executable, "-m", "runner.stages.word_vectors", "--train", str(tmp_path / "corpus.txt"),
                           "--out", str(tmp_path / "out"), "--min-count", "1", "--epochs", "3", *extra],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


def test_vectors_stage_writes_glove_files_that_allennlp_reads_at_the_configured_dimension(tmp_path):
    from allennlp.data import Vocabulary
    from allennlp.modules.token_embedders.embedding import _read_embeddings_from_text_file

    _corpus(tmp_path / "corpus.txt")
    done = _vectors(tmp_path, "--dims", "50:lowercase", "20:cased")
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "out" / "vectors.json").read_text())
    assert set(record["files"]) == {"50", "20"} and record["corpus"]["cased"]["tokens"] > 30000
    lower = tmp_path / "out" / "vectors.50d.lowercase.txt"
    lines = lower.read_text().splitlines()
    words = [line.split(" ")[0] for line in lines]
    assert "paris" in words and "Paris" not in words and all(len(line.split(" ")) == 51 for line in lines)
    cased = (tmp_path / "out" / "vectors.20d.cased.txt").read_text().split()
    assert "Paris" in cased
    vocab = Vocabulary({"tokens": {"paris": 1, "cat": 1, "unseen-word": 1}})
    matrix = _read_embeddings_from_text_file(str(lower), 50, vocab, "tokens")
    row = dict((line.split(" ")[0], np.array(line.split(" ")[1:], dtype=np.float32)) for line in lines)
    assert np.allclose(matrix[vocab.get_token_index("paris", "tokens")].numpy(), row["paris"])
    assert np.allclose(matrix[vocab.get_token_index("cat", "tokens")].numpy(), row["cat"])
    # the distributional signal is there: an animal is nearer an animal than a capital
    unit = {w: v / np.linalg.norm(v) for w, v in row.items()}
    assert unit["cat"] @ unit["dog"] > unit["cat"] @ unit["paris"]


def test_vectors_are_the_same_bytes_when_made_again_and_refuse_held_out_text(tmp_path):
    _corpus(tmp_path / "corpus.txt", lines=1000)
    assert _vectors(tmp_path, "--dims", "16:cased").returncode == 0
    first = (tmp_path / "out" / "vectors.16d.cased.txt").read_bytes()
    (tmp_path / "out" / "vectors.16d.cased.txt").unlink()
    assert _vectors(tmp_path, "--dims", "16:cased").returncode == 0
    assert (tmp_path / "out" / "vectors.16d.cased.txt").read_bytes() == first
    heldout = tmp_path / "heldout"
    heldout.mkdir()
    (heldout / "text.txt").write_text("held out text\n")
    refused = subprocess.run([sys.executable, "-m", "runner.stages.word_vectors", "--train", str(heldout / "text.txt"),
                              "--out", str(tmp_path / "o")], cwd=REPO_ROOT, capture_output=True, text=True)
    assert refused.returncode == 2 and "held-out file" in refused.stderr and "Traceback" not in refused.stderr


def test_runner_stage_runs_once_and_is_skipped_when_done(tmp_path, monkeypatch, capsys):
    from runner.stages import word_vectors as vectors

    monkeypatch.chdir(REPO_ROOT)
    _corpus(tmp_path / "corpus.txt", lines=800)
    profile = {"vectors": {"out": str(tmp_path / "vec"), "train": [str(tmp_path / "corpus.txt")],
                           "dims": ["8:cased"], "args": ["--min-count", "1", "--epochs", "1"]}}
    out = vectors.prepare_vectors(profile["vectors"], quiet=True)
    assert (out / "vectors.8d.cased.txt").is_file() and len(json.loads((out / "stages.json").read_text())) == 1
    vectors.prepare_vectors(profile["vectors"], quiet=True)
    assert "word vectors: done" in capsys.readouterr().out
    assert len(json.loads((out / "stages.json").read_text())) == 1
    profile["vectors"]["args"] = ["--min-count", "1", "--epochs", "2"]  # other settings: made again
    vectors.prepare_vectors(profile["vectors"], quiet=True)
    assert len(json.loads((out / "stages.json").read_text())) == 2
    results = tmp_path / "results"
    vectors.write_report(profile["vectors"], True, results, ["- **command**: test"])
    assert "vectors.8d.cased.txt" in (results / "vectors.md").read_text()
    assert (results / "vectors" / "vectors.json").is_file()  # kept for a fresh clone, without the vector files
    import shutil

    shutil.rmtree(out)  # a fresh clone: only the archived record
    (results / "vectors.md").unlink()
    vectors.write_report(profile["vectors"], True, results, ["- **command**: test"])
    assert "vectors.8d.cased.txt" in (results / "vectors.md").read_text()
