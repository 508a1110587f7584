"""A Hugging Face transformer under ELMo's protocol (elmo_module/transformer.py, the ``transformer_mix`` embedder):
every hidden state mixed (the embedding layer's too), frozen, in eval mode, word pieces pooled to words, in every
task config. The transformers are tiny random BERT and RoBERTa models the tests write themselves."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from elmo_module.transformer import pool_words
from tests.conftest import REPO_ROOT

CONFIGS = sorted(path.stem for path in (REPO_ROOT / "jsonnet_configs").glob("*.jsonnet"))
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def sample_words() -> list:
    """The bundled samples' words, lowercased (a vocabulary in which most words are one piece and some several)."""
    words = set()
    for path in (REPO_ROOT / "tasks").glob("*/sample_data/*"):
        if path.is_file() and path.stat().st_size < 2_000_000:
            words.update(w.lower() for w in path.read_text(errors="ignore").split() if w.isalpha() and len(w) < 12)
    return sorted(words)


def tiny_transformer(out: Path, kind: str = "bert", dropout: float = 0.1, max_positions: int = 4096) -> Path:
    """A random 2-layer transformer with a fast tokenizer, saved as save_pretrained saves it."""
    from transformers import BertConfig, BertModel, BertTokenizerFast, RobertaConfig, RobertaModel, RobertaTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    sizes = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                 hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    words = [w for w in sample_words() if len(w) > 3][:1500]
    if kind == "bert":
        letters = sorted(set("".join(words)) | set("0123456789"))
        vocab = SPECIAL + letters + [f"##{c}" for c in letters] + [w for w in words if w not in letters]
        (out / "vocab.txt").write_text("\n".join(vocab) + "\n")
        tokenizer = BertTokenizerFast(vocab_file=str(out / "vocab.txt"), do_lower_case=True)
        model = BertModel(BertConfig(vocab_size=len(vocab), max_position_embeddings=max_positions, **sizes))
    else:
        from tokenizers import ByteLevelBPETokenizer

        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator([" ".join(words)] * 3, vocab_size=600, min_frequency=1,
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        bpe.save_model(str(out))
        tokenizer = RobertaTokenizerFast(vocab_file=str(out / "vocab.json"), merges_file=str(out / "merges.txt"))
        model = RobertaModel(RobertaConfig(vocab_size=tokenizer.vocab_size, max_position_embeddings=4098,
                                           pad_token_id=1, **sizes))
    tokenizer.save_pretrained(str(out))
    model.save_pretrained(str(out))
    return out


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return tiny_transformer(tmp_path_factory.mktemp("bert") / "tiny-bert")


@pytest.fixture
def knobs(task_env):
    from allennlp.common.plugins import import_plugins

    import_plugins()
    return task_env


def test_words_take_their_first_piece_or_the_mean_of_their_pieces():
    pieces = torch.arange(12, dtype=torch.float).view(1, 6, 2)  # [CLS] a b1 b2 b3 [SEP]: piece i is (2i, 2i+1)
    offsets = torch.tensor([[[1, 1], [2, 4], [0, 0]]])  # word "a" = piece 1, word "b" = pieces 2-4, then padding
    mask = torch.tensor([[True, True, False]])
    assert pool_words(pieces, offsets, mask, "first").tolist() == [[[2, 3], [4, 5], [0, 0]]]
    assert pool_words(pieces, offsets, mask, "mean").tolist() == [[[2, 3], [6, 7], [0, 0]]]


@pytest.mark.parametrize("task", CONFIGS)
@pytest.mark.parametrize("placement", ["input", "output", "both"])
def test_every_task_config_takes_a_transformer_with_a_mix_over_every_hidden_state(knobs, bert, task, placement):
    from allennlp.data import DatasetReader
    from allennlp.models import Model

    from tests.tasks.test_configs import config_params, sample_vocabulary

    vocab = sample_vocabulary(task)
    knobs(ELMO=placement, ENCODER=str(bert), SIZE="tiny")
    params = config_params(task)
    DatasetReader.from_params(params.pop("dataset_reader"))  # with its indexer of the encoder's word pieces
    model = Model.from_params(vocab=vocab, params=params.pop("model"))
    mixes = [m for m in model.modules() if type(m).__name__ == "ScalarMix"]
    assert [m.placement for m in mixes] == {"input": ["input"], "output": ["output"],
                                           "both": ["input", "output"]}[placement]
    assert all(m.mix_weights.numel() == 2 + 1 for m in mixes)  # num_hidden_layers + 1: the embedding layer too
    [embedder] = [m for m in model.modules() if type(m).__name__ == "TransformerMixEmbedder"]
    assert not any(p.requires_grad for p in embedder.elmo.bilm.parameters())


def test_the_transformer_stays_in_eval_mode_while_the_task_model_trains(knobs, tmp_path):
    """allennlp's mismatched embedder keeps the transformer's dropout on while the task model trains: with dropout
    0.5 two passes then differ. Here they are the same."""
    from allennlp.data import Token, Vocabulary
    from allennlp.data.token_indexers import PretrainedTransformerMismatchedIndexer

    from elmo_module.allennlp_adapter import TransformerMixEmbedder

    model = tiny_transformer(tmp_path / "dropout-bert", dropout=0.5)
    indexer = PretrainedTransformerMismatchedIndexer(str(model))
    words = [Token(w) for w in "the president said on monday that".split()]
    indexed = indexer.as_padded_tensor_dict(indexer.tokens_to_indices(words, Vocabulary()),
                                            indexer.get_padding_lengths(indexer.tokens_to_indices(words, Vocabulary())))
    batch = {k: v.unsqueeze(0) for k, v in indexed.items()}
    embedder = TransformerMixEmbedder(str(model), dropout=0.0)
    embedder.train()
    assert not embedder.elmo.bilm.model.training
    first, second = embedder(**batch), embedder(**batch)
    assert first.shape == (1, len(words), 16) and torch.equal(first, second)


def test_a_roberta_tokenizer_gives_each_word_its_pieces(knobs, tmp_path):
    from allennlp.data import Token, Vocabulary
    from allennlp.data.token_indexers import PretrainedTransformerMismatchedIndexer

    from elmo_module.allennlp_adapter import TransformerMixEmbedder

    model = tiny_transformer(tmp_path / "tiny-roberta", kind="roberta")
    indexer = PretrainedTransformerMismatchedIndexer(str(model))
    words = [Token(w) for w in "the president said on monday that".split()]
    tokens = indexer.tokens_to_indices(words, Vocabulary())
    assert len(tokens["offsets"]) == len(words)
    batch = {k: v.unsqueeze(0) for k, v in indexer.as_padded_tensor_dict(
        tokens, indexer.get_padding_lengths(tokens)).items()}
    mixed = TransformerMixEmbedder(str(model), pooling="mean")(**batch)
    assert mixed.shape == (1, len(words), 16) and torch.isfinite(mixed).all()


def test_an_encoder_that_is_not_a_transformer_is_one_line(knobs, tmp_path):
    from allennlp.common.checks import ConfigurationError

    from elmo_module.allennlp_adapter import TransformerMixEmbedder

    with pytest.raises(ConfigurationError, match=rf"^encoder {tmp_path}: expected a transformer's directory "
                                                 r"\(config.json, weights and tokenizer, as save_pretrained writes "
                                                 r"them\) or hf:NAME, found a directory without config.json$"):
        TransformerMixEmbedder(str(tmp_path))


@pytest.mark.slow
def test_a_task_trains_with_a_frozen_transformer_whose_weights_do_not_change(bert, tmp_path):
    """NER trained two epochs with the tiny BERT at both placements: the loss falls, and every parameter of the
    transformer in the trained model equals the saved transformer's."""
    from transformers import AutoModel

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "ELMO": "both", "ENCODER": str(bert), "SIZE": "tiny",
           "NUM_EPOCHS": "3", "WANDB": "false"}
    done = subprocess.run([sys.executable, "-m", "allennlp", "train", "jsonnet_configs/ner.jsonnet", "-s",
                           str(tmp_path / "model")], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    epochs = [json.loads((tmp_path / "model" / f"metrics_epoch_{i}.json").read_text()) for i in range(3)]
    assert epochs[-1]["training_loss"] < epochs[0]["training_loss"]
    trained = torch.load(tmp_path / "model" / "best.th", map_location="cpu")
    prefix = "text_field_embedder.token_embedder_elmo_module.elmo.bilm.model."
    original = AutoModel.from_pretrained(str(bert)).state_dict()
    kept = {k[len(prefix):]: v for k, v in trained.items() if k.startswith(prefix)}
    assert kept and set(kept) <= set(original)
    assert all(torch.equal(kept[k], original[k]) for k in kept)
    mix = json.loads((tmp_path / "model" / "elmo_mix_weights.json").read_text())
    assert sorted(len(m["weights"]) for m in mix.values()) == [3, 3]


@pytest.mark.slow
@pytest.mark.parametrize("task", [t for t in CONFIGS if t != "ner"])  # (NER: the test above, two epochs)
def test_every_other_task_trains_with_the_tiny_bert(bert, tmp_path, task):
    """`allennlp train` of each task's config with ENCODER = the tiny BERT at the input: it trains an epoch to a
    finite loss and writes its dev metrics, and the mix in the model has num_hidden_layers + 1 = 3 weights."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "ELMO": "input", "ENCODER": str(bert), "SIZE": "tiny",
           "NUM_EPOCHS": "1", "WANDB": "false"}
    done = subprocess.run([sys.executable, "-m", "allennlp", "train", f"jsonnet_configs/{task}.jsonnet", "-s",
                           str(tmp_path / "model")], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((tmp_path / "model" / "metrics_epoch_0.json").read_text())
    assert torch.isfinite(torch.tensor(metrics["training_loss"])) and any(k.startswith("validation_") for k in metrics)
    mix = json.loads((tmp_path / "model" / "elmo_mix_weights.json").read_text())
    assert [len(m["weights"]) for m in mix.values()] == [3]


@pytest.mark.slow
def test_a_profile_with_an_encoder_column_trains_it_beside_elmo_and_the_baseline(bert, tmp_path):
    """Table 1 with a third column, the tiny BERT at the input: the runner trains it (its directory checksummed as
    the run's input, its pooled layers cached), the table has its cell beside ELMo's and the baseline's, and the
    claims compare it with both, as claims of ours."""
    from tests.runner.test_runner import runner_command, runner_env

    columns = [{"label": "baseline", "knobs": {"ELMO": "none"}}, {"label": "ELMo", "knobs": {"ELMO": "input"}},
               {"label": "tiny BERT", "knobs": {"ELMO": "input", "ENCODER": str(bert)}}]
    profile = {"name": "t", "sweeps": ["table1"], "tasks": ["ner"], "knobs": {"SIZE": "tiny", "NUM_EPOCHS": "1"},
               "sweep_overrides": {"table1": {"seeds": {"default": 1}, "columns": columns}}}
    done = subprocess.run(runner_command(tmp_path, profile, "--no-wandb"), cwd=REPO_ROOT, env=runner_env(tmp_path),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "activation cache for ner" in done.stdout + done.stderr  # the transformer's pooled layers, built once
    results = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/*/result.json")]
    [encoded] = [r for r in results if r["knobs"]["ENCODER"] != "elmo"]
    assert encoded["knobs"]["ENCODER"] in encoded["reads"]  # the transformer's directory, not the biLM's files
    assert not any(p.endswith(".hdf5") for p in encoded["reads"])
    assert len(encoded["mix_weights"]) == 1 and len(next(iter(encoded["mix_weights"].values()))["weights"]) == 3
    table = (tmp_path / "results" / "table1.md").read_text()
    assert "tiny BERT (ours)" in table and "ELMo" in table and "baseline" in table
    assert "tiny BERT (paper)" not in table  # the paper has no such column
    claims = {c["id"]: c for c in json.loads((tmp_path / "results" / "claims.json").read_text())["claims"]}
    for other in ("baseline", "ELMo"):  # ours, in a family of their own, never against the paper
        claim = claims[f"encoders.ner.tiny BERT>{other}"]
        assert claim["family"] == "encoders (ours)" and claim["ours_only"] and not claim["against_paper"]
        assert claim["paper"].startswith("— (ours")
    assert claims["table1.ner"]["family"] == "Table 1"


@pytest.mark.slow  # starts a runner
def test_the_preflight_names_an_encoder_that_cannot_serve_in_one_line(bert, tmp_path):
    """An encoder directory without config.json: one line of --check, before any training."""
    from tests.runner.test_runner import runner_command, runner_env

    columns = [{"label": "none", "knobs": {"ELMO": "input", "ENCODER": str(tmp_path)}},
               {"label": "tiny", "knobs": {"ELMO": "input", "ENCODER": str(bert)}}]
    profile = {"name": "t", "sweeps": ["table1"], "tasks": ["ner"], "knobs": {"SIZE": "tiny"},
               "sweep_overrides": {"table1": {"seeds": {"default": 1}, "columns": columns}}}
    done = subprocess.run(runner_command(tmp_path, profile, "--check", "--no-wandb"), cwd=REPO_ROOT,
                          env={**runner_env(tmp_path), "TRANSFORMERS_OFFLINE": "1"}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == (f"error: profile 't': 1 problem(s) with its inputs, nothing was run:\n  1. {tmp_path}: "
                           f"expected a transformer's directory (config.json, weights and tokenizer, as "
                           f"save_pretrained writes them) or hf:NAME, found a directory without config.json. Give "
                           f"the directory save_pretrained wrote (knob ENCODER: docs/encoders.md)\n")


@pytest.mark.slow
def test_the_preflight_names_a_text_over_the_encoders_maximum_in_one_line(tmp_path):
    """A BERT of at most 10 positions and NER's sampled sentences, longer in word pieces: --check names the task, the
    split, the maximum and the length found, one line, before any training."""
    from tests.runner.test_runner import runner_command, runner_env

    short = tiny_transformer(tmp_path / "short-bert", max_positions=10)
    data = {k: str(REPO_ROOT / "tasks" / "ner" / "sample_data" / f"{name}.txt")
            for k, name in (("TRAIN_PATH", "train"), ("DEV_PATH", "dev"), ("TEST_PATH", "test"))}
    columns = [{"label": "short", "knobs": {"ELMO": "input", "ENCODER": str(short)}}]
    profile = {"name": "t", "sweeps": ["table1"], "tasks": ["ner"], "knobs": {"SIZE": "tiny", **data},
               "sweep_overrides": {"table1": {"seeds": {"default": 1}, "columns": columns}}}
    done = subprocess.run(runner_command(tmp_path, profile, "--check", "--no-wandb"), cwd=REPO_ROOT,
                          env={**runner_env(tmp_path), "TRANSFORMERS_OFFLINE": "1"}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if "word pieces" in line]
    assert lines and all(line.strip().split(". ", 1)[1].startswith("ner ") for line in lines), done.stderr
    assert "expected texts of at most 10 word pieces" in lines[0] and "(its max_position_embeddings)" in lines[0]
    assert int(lines[0].split("found a text of ")[1].split()[0]) > 10
    assert not list(tmp_path.glob("runs/ner/*/log.txt"))


def test_a_tokenizer_without_word_offsets_is_named(bert, monkeypatch):
    """A slow tokenizer gives no word offsets, which pool the word pieces to words."""
    import transformers

    from elmo_module.transformer import encoder_problem

    assert encoder_problem(str(bert)) is None and encoder_problem("elmo") is None
    slow = type("Slow", (), {"is_fast": False})()
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: slow)
    assert encoder_problem(str(bert)) == (f"encoder {bert}: expected a fast tokenizer (tokenizer.json: it gives each "
                                          f"word's word pieces), found a slow one only")


def test_an_encoder_inside_an_installed_package_is_found_without_importing_it(knobs, bert, tmp_path, monkeypatch):
    """pkg:PACKAGE/SUBDIR: the way the optional all-MiniLM-L6-v2 package is named (requirements-minilm.lock)."""
    import shutil

    from allennlp.models import Model

    from elmo_module.transformer import model_source
    from tests.tasks.test_configs import config_params, sample_vocabulary

    package = tmp_path / "site" / "fake_encoder_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('never imported')\n")
    shutil.copytree(bert, package / "model")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert model_source("pkg:fake_encoder_pkg/model") == str(package / "model")
    knobs(ELMO="input", ENCODER="pkg:fake_encoder_pkg/model")
    model = Model.from_params(vocab=sample_vocabulary("ner"), params=config_params("ner").pop("model"))
    assert [m.mix_weights.numel() for m in model.modules() if type(m).__name__ == "ScalarMix"] == [3]
    with pytest.raises(Exception, match=r"^encoder pkg:no_such_pkg/model: expected an installed package "
                                        r"'no_such_pkg', found none"):
        model_source("pkg:no_such_pkg/model")


def _transformer_run(task: str, bert: Path, pooling: str = "first", **more):
    from runner.spec import Run
    from tasks.knobs import KNOBS

    knobs = {**KNOBS, "ELMO": "input", "SIZE": "tiny", "ENCODER": str(bert), "ENCODER_POOLING": pooling, **more}
    return Run(task, tuple(sorted(knobs.items())))


@pytest.mark.parametrize("task,pooling", [("ner", "first"), ("snli", "mean")])
def test_the_transformer_cache_equals_the_live_encoder(knobs, bert, tmp_path, task, pooling):
    """The runner's cache of a task's texts for the tiny BERT (runner/stages/schedule.py build_caches), read back for
    the batches the task's reader gives: each layer equals the live frozen transformer's up to float16's rounding.
    The batches here are other than the builder's (another padding): the cache is keyed by each text's pieces."""
    from allennlp.data import Batch, Vocabulary

    from elmo_module.transformer import FrozenTransformer
    from elmo_module.transformer_cache import TransformerCache, encoder_identity
    from runner.stages.caches import task_readers
    from runner.stages.schedule import build_caches

    run = _transformer_run(task, bert, pooling)
    [directory] = build_caches([run], tmp_path).values()
    meta = json.loads((Path(directory) / "meta.json").read_text())
    assert meta["kind"] == "transformer" and meta["layers"] == 3 and meta["dim"] == 16
    cache = TransformerCache(directory, encoder_identity(str(bert), pooling))
    live = FrozenTransformer(str(bert), pooling)
    _, reader, _ = task_readers(task, run.knob_dict)
    instances = list(reader.read(run.knob_dict["DEV_PATH"] or _bundled(task, "validation_data_path")))[:12]
    vocabulary = Vocabulary.from_instances(instances)
    batch = Batch(instances)
    batch.index_instances(vocabulary)
    tensors = batch.as_tensor_dict()
    fields = [v["elmo_module"] for v in tensors.values() if isinstance(v, dict) and "elmo_module" in v]
    assert fields
    for f in fields:
        expected, mask = live(f["token_ids"], f["wordpiece_mask"], f["offsets"], f["mask"], f.get("type_ids"))
        got, got_mask = cache.lookup(f["token_ids"], f["wordpiece_mask"], f["offsets"], f["mask"])
        assert torch.equal(mask, got_mask) and len(got) == len(expected) == 3
        for e, g in zip(expected, got):
            assert torch.allclose(e, g, rtol=2 ** -10, atol=1e-4), (e - g).abs().max()


def _bundled(task: str, key: str) -> str:
    from runner.execution.freshness import bundled_data

    return bundled_data(task)[{"validation_data_path": "DEV_PATH"}[key]]


def test_a_transformer_cache_of_other_files_or_pooling_is_refused(knobs, bert, tmp_path):
    """The cache's identity is the encoder's files and the pooling: a weight file changed (one byte) or the other
    pooling reads another cache, and opening this one with either is refused naming it."""
    import shutil

    from elmo_module.errors import ElmoInputError
    from elmo_module.transformer_cache import TransformerCache, encoder_identity
    from runner.stages.schedule import build_caches

    [directory] = build_caches([_transformer_run("ner", bert)], tmp_path / "caches").values()
    with pytest.raises(ElmoInputError, match="stale activation cache"):
        TransformerCache(directory, encoder_identity(str(bert), "mean"))
    other = shutil.copytree(bert, tmp_path / "other-bert")
    weights = other / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(ElmoInputError, match="stale activation cache"):
        TransformerCache(directory, encoder_identity(str(other), "first"))
    [elsewhere] = build_caches([_transformer_run("ner", other)], tmp_path / "caches").values()
    assert elsewhere != directory


def test_bfloat16_the_transformers_pass_and_its_cache(knobs, bert, tmp_path, monkeypatch):
    """ELMO_PRECISION=bfloat16 with a transformer: the embedder's pass in bfloat16 autocast agrees with float32 to
    bfloat16's precision (8 significant bits) and differs from it (the autocast is on); its cache is another directory
    than float32's, and the float32 embedder refuses it. On a CPU without bfloat16 kernels the first forward is one
    line (elmo_module/precision.py), unless ELMO_ALLOW_SLOW_BFLOAT16=1, which this test sets to check the numbers."""
    from allennlp.common.checks import ConfigurationError

    from elmo_module import precision
    from elmo_module.allennlp_adapter import TransformerMixEmbedder
    from elmo_module.transformer_cache import text_key
    from runner.stages.schedule import build_caches

    monkeypatch.setenv(precision.ALLOW_SLOW, "1")
    precision._check_cpu.cache_clear()
    run = _transformer_run("ner", bert)
    half = _transformer_run("ner", bert, ELMO_PRECISION="bfloat16")
    [full_dir] = build_caches([run], tmp_path).values()
    [half_dir] = build_caches([half], tmp_path).values()
    assert full_dir != half_dir and json.loads((Path(half_dir) / "meta.json").read_text())["precision"] == "bfloat16"
    with pytest.raises(ConfigurationError, match="holds the biLM's layers computed in bfloat16"):
        TransformerMixEmbedder(str(bert), dropout=0.0, cache_dir=half_dir)
    inputs = _pieces(bert, [["the", "studies", "of", "vocabulary"], ["a", "game"]])
    torch.manual_seed(0)
    full = TransformerMixEmbedder(str(bert), dropout=0.0)
    torch.manual_seed(0)
    bf16 = TransformerMixEmbedder(str(bert), dropout=0.0, precision="bfloat16")
    with torch.no_grad():
        a, b = full(**inputs), bf16(**inputs)
    assert not torch.equal(a, b) and torch.allclose(a, b, rtol=2 ** -7, atol=2 ** -6), (a - b).abs().max()
    assert text_key(inputs["token_ids"][0, :3], inputs["offsets"][0, :1]) != text_key(
        inputs["token_ids"][0, :3], inputs["offsets"][0, :2])
    monkeypatch.delenv(precision.ALLOW_SLOW)
    monkeypatch.setattr(precision, "cpu_has_bfloat16", lambda: False)
    precision._check_cpu.cache_clear()
    with pytest.raises(ConfigurationError, match="has no bfloat16 kernels") as error:
        bf16(**inputs)
    assert "\n" not in str(error.value)
    precision._check_cpu.cache_clear()


def _pieces(bert: Path, texts: list) -> dict:
    """What allennlp's mismatched indexer gives the embedder for ``texts``, as one padded batch."""
    from allennlp.data import Token, Vocabulary

    from elmo_module.allennlp_adapter import TransformerPiecesIndexer
    from elmo_module.transformer_cache import padded

    indexer, vocabulary = TransformerPiecesIndexer(str(bert)), Vocabulary()
    items = [indexer.tokens_to_indices([Token(w) for w in words], vocabulary) for words in texts]
    token_ids, wordpiece_mask, offsets, mask, type_ids = padded(items, "cpu")
    return dict(token_ids=token_ids, mask=mask, offsets=offsets, wordpiece_mask=wordpiece_mask, type_ids=type_ids)
