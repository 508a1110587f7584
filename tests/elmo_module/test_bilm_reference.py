"""Our biLM against allennlp's _ElmoBiLm / Elmo (float32, atol 1e-6) on random weights in the official layout."""
import pytest
import torch
from allennlp.modules.elmo import Elmo as AllennlpElmo
from allennlp.modules.elmo import _ElmoBiLm
from allennlp.modules.elmo import batch_to_ids as allennlp_batch_to_ids
from allennlp.nn.util import remove_sentence_boundaries

from elmo_module import Elmo, batch_to_ids, load_bilm
from tests.elmo_fixtures import SENTENCES, write_random_elmo

ARCHITECTURES = {
    "highway1": dict(n_highway=1),
    "highway2_262": dict(n_highway=2, n_characters=262),
    "highway2_261": dict(n_highway=2, n_characters=261, seed=3),
    "wide_filters": dict(filters=((1, 8), (2, 8), (3, 16), (4, 16), (5, 4), (7, 6)), seed=1),
    "three_layers": dict(n_layers=3, cell_dim=12, projection_dim=6, seed=2),
}
# consecutive batches of unequal sizes and lengths (stateful mode carries rows between them)
BATCHES = [SENTENCES[:3], SENTENCES[3:7], SENTENCES[1:2], SENTENCES[2:6], [["one"]]]


def test_character_ids_match_allennlp():
    ours, theirs = batch_to_ids(SENTENCES), allennlp_batch_to_ids(SENTENCES)
    assert torch.equal(ours, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("stateful", [True, False], ids=["stateful", "stateless"])
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_bilm_layers_equal_allennlp(tmp_path, arch, stateful):
    options, weights = write_random_elmo(tmp_path, **ARCHITECTURES[arch])
    ours = load_bilm(options, weights, stateful=stateful)
    theirs = _ElmoBiLm(str(options), str(weights))
    for batch in BATCHES:
        if not stateful:
            theirs._elmo_lstm.reset_states()
        ids = batch_to_ids(batch)
        with torch.no_grad():
            out = ours(ids)
            ref = theirs(ids)
        assert len(out.layers) == len(ref["activations"])
        for mine, full in zip(out.layers, ref["activations"]):
            expected, expected_mask = remove_sentence_boundaries(full, ref["mask"])
            assert torch.equal(out.mask, expected_mask)
            torch.testing.assert_close(mine, expected, atol=1e-6, rtol=0)


def test_stateful_differs_from_stateless(tmp_path):
    """The carried state matters (bilm-tf and allennlp carry the state between batches; their reference outputs are
    stateful), and reset_states() brings back the first output."""
    options, weights = write_random_elmo(tmp_path)
    bilm = load_bilm(options, weights, stateful=True)
    ids = batch_to_ids(SENTENCES[:3])
    with torch.no_grad():
        first = bilm(ids).layers[2]
        second = bilm(ids).layers[2]
        bilm.reset_states()
        again = bilm(ids).layers[2]
    assert (first - second).abs().max() > 1e-3
    torch.testing.assert_close(first, again, atol=0, rtol=0)


def test_elmo_mixes_equal_allennlp(tmp_path):
    options, weights = write_random_elmo(tmp_path, seed=5)
    theirs = AllennlpElmo(str(options), str(weights), num_output_representations=2, dropout=0.0)
    ours = Elmo(load_bilm(options, weights, stateful=True), num_mixes=2, dropout=0.0)
    with torch.no_grad():  # give both the same non-trivial mix weights
        for k, (mix, their_mix) in enumerate(zip(ours.mixes, theirs._scalar_mixes)):
            values = torch.tensor([0.3, -1.0, 0.7]) * (k + 1)
            mix.mix_weights.copy_(values)
            mix.gamma.fill_(1.5 + k)
            for p, v in zip(their_mix.scalar_parameters, values):
                p.fill_(float(v))
            their_mix.gamma.fill_(1.5 + k)
    for batch in BATCHES:
        ids = batch_to_ids(batch)
        with torch.no_grad():
            mixes, mask = ours(ids)
            ref = theirs(ids)
        assert torch.equal(mask, ref["mask"])
        for mine, expected in zip(mixes, ref["elmo_representations"]):
            torch.testing.assert_close(mine, expected, atol=1e-6, rtol=0)


def test_scratch_memory_is_reused_only_without_autograd_and_never_leaks_into_outputs(tmp_path):
    """The LSTM writes its big temporaries into memory kept between calls (elmo_module.lstm._scratch)."""
    from elmo_module.lstm import _scratch

    options, weights = write_random_elmo(tmp_path)
    bilm = load_bilm(options, weights, stateful=False)
    layer = bilm.forward_layers[0]
    like = torch.zeros(1)
    first = _scratch(layer, "t", (4, 6), like)
    assert _scratch(layer, "t", (3, 5), like).data_ptr() == first.data_ptr()  # smaller: same memory
    assert _scratch(layer, "t", (5, 6), like).numel() == 30  # larger: grown
    assert _scratch(layer, "t", (2, 2), like, layer.input_weight) is None  # autograd records the weight
    with torch.no_grad():
        assert _scratch(layer, "t", (2, 2), like, layer.input_weight) is not None

    with torch.no_grad():
        early = bilm(batch_to_ids(SENTENCES[5:6]))  # the longest batch first, then smaller ones reuse its memory
        kept = [output.clone() for output in early.layers]
        for batch in BATCHES:
            bilm(batch_to_ids(batch))
    for before, output in zip(kept, early.layers):
        assert torch.equal(before, output)
