"""The frozen-biLM activation cache: a hit equals a fresh stateless biLM pass; stale caches are rejected."""
import numpy as np
import pytest
import torch

from elmo_module import ElmoInputError, batch_to_ids, load_bilm
from elmo_module.activation_cache import ActivationCache, build_cache, file_checksum
from tests.elmo_fixtures import SENTENCES, write_random_elmo


@pytest.fixture
def cached(tmp_path):
    options, weights = write_random_elmo(tmp_path, seed=21)
    bilm = load_bilm(options, weights, stateful=False)
    checksum = file_checksum(options, weights)
    directory = build_cache(bilm, SENTENCES + SENTENCES[:2], tmp_path / "cache", checksum, progress=False)
    return bilm, directory, checksum, (options, weights)


def test_cache_hit_equals_fresh_bilm_pass(cached):
    bilm, directory, checksum, _ = cached
    cache = ActivationCache(directory, checksum)
    assert cache.meta["sentences"] == len(SENTENCES)  # duplicates stored once
    for batch in (SENTENCES[:3], SENTENCES[3:], [SENTENCES[2], SENTENCES[5]]):
        ids = batch_to_ids(batch)
        with torch.no_grad():
            fresh = bilm(ids)
        layers, mask = cache.lookup(ids)
        assert torch.equal(mask, fresh.mask)
        for got, expected in zip(layers, fresh.layers):
            # the cache ran these sentences in other batches; MKL's GEMM blocking depends on the batch's row
            # count, so the last float32 bit may differ -- nothing more
            torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


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


def test_incomplete_cache_is_rejected(tmp_path):
    (tmp_path / "half").mkdir()
    np.save(tmp_path / "half" / "layers.npy", np.zeros((1, 3, 4), dtype=np.float32))
    with pytest.raises(ElmoInputError, match="missing or incomplete"):
        ActivationCache(tmp_path / "half", "x")


def test_embedder_with_cache_equals_embedder_running_the_bilm(cached):
    from elmo_module.allennlp_adapter import ElmoTokenEmbedder

    _, directory, _, (options, weights) = cached
    torch.manual_seed(0)
    live = ElmoTokenEmbedder(str(options), str(weights), dropout=0.0)
    torch.manual_seed(0)
    from_cache = ElmoTokenEmbedder(str(options), str(weights), dropout=0.0, cache_dir=str(directory))
    ids = batch_to_ids(SENTENCES[:4])
    with torch.no_grad():
        torch.testing.assert_close(live(ids), from_cache(ids), atol=1e-6, rtol=0)
