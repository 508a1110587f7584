"""The frozen-biLM activation cache: a hit equals a fresh stateless biLM pass up to float16 rounding; each distinct
sentence is stored once; stale caches and caches of the old format are rejected, never misread."""
import json

import numpy as np
import pytest
import torch

from elmo_module import ElmoInputError, batch_to_ids, load_bilm
from elmo_module.activation_cache import ActivationCache, build_cache, bytes_per_token, file_checksum
from tests.conftest import REPO_ROOT as REPO
from tests.elmo_fixtures import SENTENCES, write_random_elmo

# float16 keeps 11 significant bits: round-to-nearest errs by at most half an ulp, 2**-11 of the value (below
# float16's smallest normal, 6.1e-5, by at most 2**-25 absolute). The cache ran the sentences in other batches than
# the check does; MKL's GEMM blocking depends on the batch's row count, so float32 results may differ in the last
# bit (~1e-7 here): 1e-6 absolute covers both small terms.
RTOL, ATOL = 2.0 ** -11, 1e-6


@pytest.fixture
def cached(tmp_path):
    options, weights = write_random_elmo(tmp_path, seed=21)
    bilm = load_bilm(options, weights, stateful=False)
    checksum = file_checksum(options, weights)
    directory = build_cache(bilm, SENTENCES + SENTENCES[:2], tmp_path / "cache", checksum, progress=False)
    return bilm, directory, checksum, (options, weights)


def _fresh(bilm, ids):
    with torch.no_grad():
        return bilm(ids)


def test_cache_hit_equals_float32_bilm_up_to_float16_rounding(cached):
    bilm, directory, checksum, _ = cached
    cache = ActivationCache(directory, checksum)
    assert cache.meta["dtype"] == "float16"
    worst = 0.0
    for batch in (SENTENCES[:3], SENTENCES[3:], [SENTENCES[2], SENTENCES[5]]):
        ids = batch_to_ids(batch)
        fresh = _fresh(bilm, ids)
        layers, mask = cache.lookup(ids)
        assert torch.equal(mask, fresh.mask)
        assert len(layers) == len(fresh.layers) == 3
        for got, expected in zip(layers, fresh.layers):
            assert got.dtype == torch.float32 and got.shape == expected.shape
            assert torch.equal(got, got.half().float())  # really stored as float16
            torch.testing.assert_close(got, expected, rtol=RTOL, atol=ATOL)
            worst = max(worst, float(((got - expected).abs() / expected.abs().clamp(min=1e-3)).max()))
    assert 1e-5 < worst <= RTOL * 1.01  # rounding happened, and stayed within half an ulp


def test_float32_cache_equals_bilm(tmp_path):
    """The layout alone (half of layer 0, the LSTM layers, index) loses nothing: float32 storage reads back exact."""
    options, weights = write_random_elmo(tmp_path, seed=3)
    bilm = load_bilm(options, weights, stateful=False)
    checksum = file_checksum(options, weights)
    cache = ActivationCache(build_cache(bilm, SENTENCES, tmp_path / "c32", checksum, progress=False,
                                        dtype="float32"), checksum)
    ids = batch_to_ids(SENTENCES[2:6])
    for got, expected in zip(cache.lookup(ids)[0], _fresh(bilm, ids).layers):
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


def test_repeated_sentence_is_stored_once_and_read_back_for_each(cached):
    bilm, directory, checksum, _ = cached
    cache = ActivationCache(directory, checksum)
    assert cache.meta["sentences"] == len(SENTENCES)  # SENTENCES[:2] came twice
    assert cache.meta["tokens"] == sum(len(s) for s in SENTENCES) == cache.vectors.shape[0]
    assert len(cache.index) == len(SENTENCES)
    ids = batch_to_ids([SENTENCES[0], SENTENCES[4], SENTENCES[0]])
    layers, _ = cache.lookup(ids)
    fresh = _fresh(bilm, batch_to_ids([SENTENCES[0]]))
    n = len(SENTENCES[0])
    for got, expected in zip(layers, fresh.layers):
        assert torch.equal(got[0, :n], got[2, :n])
        torch.testing.assert_close(got[2, :n], expected[0], rtol=RTOL, atol=ATOL)


def test_stored_bytes_per_token(cached):
    bilm, directory, _, _ = cached
    n_layers, dim = bilm.num_output_layers, bilm.options.output_dim
    assert bytes_per_token(n_layers, dim) == 2 * (dim // 2 + (n_layers - 1) * dim)
    assert bytes_per_token(3, 1024) == 5120  # the released biLM; 12,288 as float32 in full
    tokens = json.loads((directory / "meta.json").read_text())["tokens"]
    data = (directory / "vectors.npy").stat().st_size
    assert tokens * bytes_per_token(n_layers, dim) < data <= tokens * bytes_per_token(n_layers, dim) + 128  # header


def test_old_format_cache_is_refused_then_rebuilt(cached, tmp_path):
    """A cache as format 1 wrote it (float32 layers.npy of shape (tokens, layers, dim), no format in meta.json)."""
    from allennlp.common.checks import ConfigurationError

    from elmo_module.allennlp_adapter import ElmoTokenEmbedder

    bilm, _, checksum, (options, weights) = cached
    old = tmp_path / "old"
    old.mkdir()
    np.save(old / "layers.npy", np.ones((3, 3, bilm.options.output_dim), dtype=np.float32))
    (old / "index.json").write_text(json.dumps({"x": [0, 3]}))
    (old / "meta.json").write_text(json.dumps({"weights_checksum": checksum, "data": {}, "sentences": 1,
                                               "tokens": 3, "layers": 3, "dim": bilm.options.output_dim}))
    with pytest.raises(ElmoInputError, match=r"has format 1 \(float32 layers.npy.*rebuild it"):
        ActivationCache(old, checksum)
    with pytest.raises(ConfigurationError, match="has format 1") as error:
        ElmoTokenEmbedder(str(options), str(weights), cache_dir=str(old))
    assert "\n" not in str(error.value)
    build_cache(bilm, SENTENCES, old, checksum, progress=False, reuse=True)  # not reused: rebuilt
    assert not (old / "layers.npy").exists()
    ids = batch_to_ids(SENTENCES[:2])
    for got, expected in zip(ActivationCache(old, checksum).lookup(ids)[0], _fresh(bilm, ids).layers):
        torch.testing.assert_close(got, expected, rtol=RTOL, atol=ATOL)


def test_reuse_keeps_a_complete_cache_without_running_the_biLM(cached):
    bilm, directory, checksum, _ = cached
    before = (directory / "vectors.npy").stat().st_ino

    def fail(*args):
        raise AssertionError("the biLM ran")
    bilm.forward = fail
    assert build_cache(bilm, SENTENCES, directory, checksum, progress=False, reuse=True) == directory
    assert (directory / "vectors.npy").stat().st_ino == before


def test_cache_from_other_weights_is_rejected(cached, tmp_path):
    _, directory, _, _ = cached
    other_options, other_weights = write_random_elmo(tmp_path / "..", seed=22)
    with pytest.raises(ElmoInputError, match="stale activation cache .* built from biLM weights"):
        ActivationCache(directory, file_checksum(other_options, other_weights))


def test_sentence_not_in_cache_is_an_error_not_a_substitute(cached):
    _, directory, checksum, _ = cached
    cache = ActivationCache(directory, checksum)
    with pytest.raises(ElmoInputError, match="no entry for the sentence 'The cat sat on'"):
        cache.lookup(batch_to_ids([["The", "cat", "sat", "on"]]))


def test_a_cut_vectors_file_is_one_line_naming_the_cache(cached):
    """The audit's case: a cache cut short crashed with numpy's "mmap length is greater than file size", naming no
    cache file."""
    _, directory, checksum, _ = cached
    vectors = directory / "vectors.npy"
    vectors.write_bytes(vectors.read_bytes()[:vectors.stat().st_size // 2])
    with pytest.raises(ElmoInputError, match=f"^activation cache '{directory}': vectors.npy is not a complete array "
                                             f".*remove the directory to rebuild it$"):
        ActivationCache(directory, checksum)


def test_incomplete_cache_is_rejected(tmp_path):
    (tmp_path / "half").mkdir()
    np.save(tmp_path / "half" / "vectors.npy", np.zeros((1, 3), dtype=np.float16))
    with pytest.raises(ElmoInputError, match="missing or incomplete"):
        ActivationCache(tmp_path / "half", "x")


def test_embedder_with_cache_equals_embedder_running_the_bilm(cached):
    from elmo_module.allennlp_adapter import ElmoTokenEmbedder

    bilm, directory, _, (options, weights) = cached
    torch.manual_seed(0)
    live = ElmoTokenEmbedder(str(options), str(weights), dropout=0.0)
    torch.manual_seed(0)
    from_cache = ElmoTokenEmbedder(str(options), str(weights), dropout=0.0, cache_dir=str(directory))
    ids = batch_to_ids(SENTENCES[:4])
    with torch.no_grad():
        # at initialisation the mix is the mean of the layers (w = 0, gamma = 1): each layer's float16 error is at
        # most RTOL of its value, so the mix errs by at most RTOL * mean |layer|
        bound = RTOL * torch.stack([layer.abs() for layer in _fresh(bilm, ids).layers]).mean(dim=0) + ATOL
        assert ((live(ids) - from_cache(ids)).abs() <= bound).all()


def test_every_seed_of_a_task_shares_one_cache_and_random_windows_read_cached_sentences(tmp_path):
    """The runner builds one cache per task, data and biLM (runner/stages/schedule.py build_caches). Coref's reader
    carries the run's seed; the cache's key followed the seed of the first run needing it, so that a runner started with
    another run first built a second cache, and a run resumed from its checkpoint crashed on the changed path
    (2026-11-27). At SIZE=paper the training reader draws a random window of 50 sentences of each document every epoch:
    a cache of one such read missed the sentences of the next; it now holds every sentence of the whole training
    documents (the biLM sees each sentence alone)."""
    from runner.spec import Run
    from runner.stages.caches import instance_texts, task_readers
    from runner.stages.schedule import build_caches
    from tasks.knobs import KNOBS
    from tests.tasks.test_task_coref import _long_document

    def run(seed, **knobs):
        return Run("coref", tuple(sorted({**KNOBS, "ELMO": "input", "SEED": seed, "SIZE": "tiny", **knobs}.items())))

    caches = build_caches([run("1")], tmp_path)
    assert build_caches([run("2")], tmp_path) == caches
    assert len(list(tmp_path.glob("*/coref-*/meta.json"))) == 1

    document = str(_long_document(tmp_path, 60))  # 60 sentences, windows of 50
    bilm = {"ELMO_OPTIONS": "elmo_module/bundled/tiny_options.json",
            "ELMO_WEIGHTS": "elmo_module/bundled/tiny_weights.hdf5"}
    paper = run("1", SIZE="paper", TRAIN_PATH=document, DEV_PATH=document, TEST_PATH=document, **bilm)
    [directory] = build_caches([paper], tmp_path / "paper").values()
    cache = ActivationCache(directory, file_checksum(*(REPO / bilm[k] for k in ("ELMO_OPTIONS", "ELMO_WEIGHTS"))))
    reader, _, _ = task_readers("coref", paper.knob_dict)
    firsts = set()
    for _ in range(8):  # epochs: each reads other windows, every sentence of them in the cache
        [instance] = reader.read(document)
        texts = instance_texts(instance)
        assert len(texts) == 50
        firsts.add(texts[0][0])
        cache.lookup(batch_to_ids(texts))
    assert len(firsts) > 1


def test_sentences_run_through_the_biLM_alone_live_and_from_the_cache(tmp_path):
    """Coref's ELMo runs the biLM on each sentence of a document alone, as e2e-coref did (cache_elmo.py: a document's
    sentences as one batch), not on the document as one sequence. Reference: the biLM on each sentence by itself."""
    from allennlp.data import Batch, Instance, Token, Vocabulary
    from allennlp.data.fields import TextField

    from elmo_module.allennlp_adapter import ElmoCharactersIndexer, ElmoTokenEmbedder
    from runner.stages.caches import ELMO_KEY, instance_texts

    options, weights = write_random_elmo(tmp_path, seed=5)
    bilm = load_bilm(options, weights, stateful=False)
    documents = [SENTENCES[:3], SENTENCES[3:7]]
    indexer = ElmoCharactersIndexer(sentences=True)
    instances = [Instance({"text": TextField([Token(w, type_id=i + 1) for i, s in enumerate(d) for w in s],
                                             {ELMO_KEY: indexer})}) for d in documents]
    # what the runner's activation cache stores: each sentence (runner/stages/caches.py instance_texts)
    assert [t for instance in instances for t in instance_texts(instance)] == SENTENCES[:7]
    batch = Batch(instances)
    batch.index_instances(Vocabulary())
    tensors = batch.as_tensor_dict()["text"][ELMO_KEY]
    torch.manual_seed(0)
    live = ElmoTokenEmbedder(str(options), str(weights), dropout=0.0)
    layers, mask = live._sentence_layers(**tensors)
    for d, document in enumerate(documents):
        start = 0
        for sentence in document:
            alone = _fresh(bilm, batch_to_ids([sentence])).layers
            for k, layer in enumerate(alone):
                assert torch.allclose(layers[k][d, start:start + len(sentence)], layer[0], atol=1e-5), (d, k)
            start += len(sentence)
        assert not mask[d, start:].any() and mask[d, :start].all()
    whole = _fresh(bilm, batch_to_ids([sum(documents[1], [])])).layers  # the document as one sequence differs
    assert (whole[-1][0] - layers[-1][1, :len(whole[-1][0])]).abs().max() > 1e-3
    checksum = file_checksum(options, weights)
    directory = build_cache(bilm, SENTENCES[:7], tmp_path / "cache", checksum, progress=False)
    torch.manual_seed(0)
    from_cache = ElmoTokenEmbedder(str(options), str(weights), dropout=0.0, cache_dir=str(directory))
    with torch.no_grad():
        bound = RTOL * torch.stack([layer.abs() for layer in layers]).mean(dim=0) + ATOL
        assert ((live(**tensors) - from_cache(**tensors)).abs() <= bound).all()


def test_sentence_runs_split_where_the_number_changes():
    """The one sentence split that the embedder and the activation cache share: a new sentence at each change of
    number (a number met again later starts another sentence, as the reader never numbers that way)."""
    from elmo_module.allennlp_adapter import sentence_runs

    assert sentence_runs([1, 1, 2, 2, 2, 3]) == [(0, 2), (2, 3), (5, 1)]
    assert sentence_runs([4]) == [(0, 1)] and sentence_runs([]) == []
    assert sentence_runs([1, 2, 1]) == [(0, 1), (1, 1), (2, 1)]
