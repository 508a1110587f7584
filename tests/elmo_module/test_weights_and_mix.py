"""Weight files (round trip, bad input) and the scalar mix (gradients of the lambda penalty and of gamma)."""
import codecs
import json

import h5py
import numpy as np
import pytest
import torch

from elmo_module import BiLmOptions, ElmoInputError, ScalarMix, batch_to_ids, load_bilm, save_bilm
from tests.elmo_fixtures import SENTENCES, write_random_elmo


def test_save_load_round_trip_is_exact(tmp_path):
    options, weights = write_random_elmo(tmp_path, n_characters=261, seed=11)
    bilm = load_bilm(options, weights)
    save_bilm(bilm, tmp_path / "out_options.json", tmp_path / "out_weights.hdf5")
    with h5py.File(weights) as original, h5py.File(tmp_path / "out_weights.hdf5") as written:
        names = []
        original.visit(lambda n: names.append(n) if isinstance(original[n], h5py.Dataset) else None)
        for name in names:
            assert np.array_equal(original[name][...], written[name][...]), name
    assert json.loads((tmp_path / "out_options.json").read_text()) == json.loads(options.read_text())
    again = load_bilm(tmp_path / "out_options.json", tmp_path / "out_weights.hdf5")
    ids = batch_to_ids(SENTENCES)
    with torch.no_grad():
        for x, y in zip(bilm(ids).layers, again(ids).layers):
            assert torch.equal(x, y)


def test_written_file_loads_in_allennlp(tmp_path):
    from allennlp.modules.elmo import _ElmoBiLm
    from allennlp.nn.util import remove_sentence_boundaries

    bilm = load_bilm(*write_random_elmo(tmp_path, seed=12))
    save_bilm(bilm, tmp_path / "o.json", tmp_path / "w.hdf5")
    theirs = _ElmoBiLm(str(tmp_path / "o.json"), str(tmp_path / "w.hdf5"))
    ids = batch_to_ids(SENTENCES[:4])
    with torch.no_grad():
        ref = theirs(ids)
        for mine, full in zip(bilm(ids).layers, ref["activations"]):
            torch.testing.assert_close(mine, remove_sentence_boundaries(full, ref["mask"])[0], atol=1e-6, rtol=0)


def test_missing_files_are_named(tmp_path):
    options, weights = write_random_elmo(tmp_path)
    with pytest.raises(ElmoInputError, match="options file '.*nope.json' does not exist"):
        load_bilm(tmp_path / "nope.json", weights)
    with pytest.raises(ElmoInputError, match="weight file '.*nope.hdf5' does not exist"):
        load_bilm(options, tmp_path / "nope.hdf5")


def test_non_hdf5_and_bad_json_are_named(tmp_path):
    options, weights = write_random_elmo(tmp_path)
    text = tmp_path / "notes.txt"
    text.write_text("not hdf5")
    with pytest.raises(ElmoInputError, match="notes.txt' is not a readable HDF5 file"):
        load_bilm(options, text)
    with pytest.raises(ElmoInputError, match="notes.txt' is not valid JSON"):
        load_bilm(text, weights)
    bad = json.loads(options.read_text())
    del bad["lstm"]["dim"]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ElmoInputError, match="missing key 'lstm.dim'"):
        load_bilm(tmp_path / "bad.json", weights)
    bad["lstm"]["dim"] = 16
    bad["char_cnn"]["n_characters"] = 300
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ElmoInputError, match="'char_cnn.n_characters' must be 261 or 262, found 300"):
        load_bilm(tmp_path / "bad.json", weights)


def test_shape_mismatch_names_dataset_and_shapes(tmp_path):
    options, weights = write_random_elmo(tmp_path, cell_dim=16)
    wrong = json.loads(options.read_text())
    wrong["lstm"]["dim"] = 32
    (tmp_path / "wrong.json").write_text(json.dumps(wrong))
    with pytest.raises(ElmoInputError) as error:
        load_bilm(tmp_path / "wrong.json", weights)
    message = str(error.value)
    assert "\n" not in message
    assert "dataset 'RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0' has shape (16, 64)" in message
    assert "expects (16, 128)" in message


@pytest.mark.parametrize("key, value, dataset", [
    ("lstm.n_layers", 1, "RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B"),
    ("char_cnn.n_highway", 0, "CNN_high_0/W_carry"),
])
def test_options_that_drop_a_trained_layer_are_refused(tmp_path, key, value, dataset):
    """The audit's case: options of fewer layers than the weights passed, and the biLM ran with a trained layer
    silently unused (wrong dimensions were caught, a dataset too many was not)."""
    from elmo_module.weights import layout_mismatches

    options, weights = write_random_elmo(tmp_path)
    fewer = json.loads(options.read_text())
    section, name = key.split(".")
    fewer[section][name] = value
    (tmp_path / "fewer.json").write_text(json.dumps(fewer))
    assert layout_mismatches(weights, BiLmOptions.load(options)) == []
    with pytest.raises(ElmoInputError, match=f"^weight file '.*': dataset '{dataset}' \\(shape .*\\) is a trained "
                                             f"layer that options '.*fewer.json' does not use"):
        load_bilm(tmp_path / "fewer.json", weights)


def test_nan_in_the_weights_is_named_with_its_dataset(tmp_path):
    from elmo_module.weights import nonfinite_dataset

    options, weights = write_random_elmo(tmp_path)
    assert nonfinite_dataset(weights, BiLmOptions.load(options)) is None
    with h5py.File(weights, "r+") as f:
        f["CNN_high_1/b_carry"][0] = np.nan
    assert nonfinite_dataset(weights, BiLmOptions.load(options)) == "CNN_high_1/b_carry"
    with pytest.raises(ElmoInputError, match="dataset 'CNN_high_1/b_carry' holds NaN or infinity"):
        load_bilm(options, weights)


def test_interrupted_save_leaves_no_file(tmp_path, monkeypatch):
    bilm = load_bilm(*write_random_elmo(tmp_path))
    import elmo_module.weights as w

    def broken(_bilm):
        raise RuntimeError("disk full")

    monkeypatch.setattr(w, "bilm_arrays", broken)
    with pytest.raises(RuntimeError):
        save_bilm(bilm, tmp_path / "x.json", tmp_path / "x.hdf5")
    assert not list(tmp_path.glob("x.*"))


def layers_and_mask(seed=0):
    g = torch.Generator().manual_seed(seed)
    layers = [torch.randn(2, 4, 3, generator=g, dtype=torch.float64) for _ in range(3)]
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    return layers, mask


def test_lambda_penalty_and_mix_gradients_match_finite_differences():
    layers, mask = layers_and_mask()
    lam, target = 0.7, torch.linspace(-1, 1, 3, dtype=torch.float64)
    mix = ScalarMix(3).double()
    with torch.no_grad():
        mix.mix_weights.copy_(torch.tensor([0.3, -0.2, 0.5]))
        mix.gamma.fill_(1.3)

    def loss():  # a task loss plus the lambda penalty, as training adds it (Sec. 3.2)
        return (mix(layers, mask) * target).sum() + lam * mix.penalty()

    loss().backward()
    for param in (mix.mix_weights, mix.gamma):
        numeric = torch.zeros_like(param)
        for i in range(param.numel()):
            with torch.no_grad():
                param.view(-1)[i] += 1e-6
                up = loss()
                param.view(-1)[i] -= 2e-6
                down = loss()
                param.view(-1)[i] += 1e-6
            numeric.view(-1)[i] = (up - down) / 2e-6
        torch.testing.assert_close(param.grad, numeric, atol=1e-7, rtol=1e-6)
    # and the module's own penalty is lambda-free sum w^2 with gradient 2w
    mix = ScalarMix(3)
    with torch.no_grad():
        mix.mix_weights.copy_(torch.tensor([0.3, -0.2, 0.5]))
    mix.penalty().backward()
    torch.testing.assert_close(mix.mix_weights.grad, 2 * torch.tensor([0.3, -0.2, 0.5]))
    assert mix.gamma.grad is None or mix.gamma.grad.abs().sum() == 0  # gamma is not penalised


@pytest.mark.parametrize("mode, layer", [("last_only", 2), ("token_only", 0)])
def test_one_layer_mixes_use_their_layer_with_trainable_gamma(mode, layer):
    """last_only: the top layer (Table 2); token_only: the context-independent token layer, the supplement's ELMo_0
    ablation. Both keep gamma trainable and have no mix weights to penalise."""
    layers, mask = layers_and_mask(1)
    mix = ScalarMix(3, mode=mode).double()
    assert [n for n, _ in mix.named_parameters()] == ["gamma"]
    with torch.no_grad():
        mix.gamma.fill_(2.5)
    out = mix(layers, mask)
    torch.testing.assert_close(out, 2.5 * layers[layer])
    torch.testing.assert_close(mix.normalized_weights(), torch.eye(3)[layer])
    out.sum().backward()
    torch.testing.assert_close(mix.gamma.grad, layers[layer].sum().reshape(1))
    assert mix.penalty() == 0


def test_average_is_fixed_uniform():
    layers, mask = layers_and_mask(2)
    mix = ScalarMix(3, mode="average").double()
    assert [n for n, _ in mix.named_parameters()] == ["gamma"]
    torch.testing.assert_close(mix(layers, mask), sum(layers) / 3)


def test_layer_norm_is_masked_over_the_whole_tensor():
    layers, mask = layers_and_mask(3)
    mix = ScalarMix(3, do_layer_norm=True).double()
    out = mix(layers, mask)
    expected = 0
    for layer in layers:
        kept = layer[mask].numpy()  # (n_tokens, dim): one mean/variance over all of it
        expected = expected + (layer - kept.mean()) / np.sqrt(kept.var() + 1e-12) / 3
    torch.testing.assert_close(out, expected)


def test_options_round_trip_keeps_training_keys():
    d = {"bidirectional": True, "n_tokens_vocab": 793471, "char_cnn": {"activation": "relu", "filters": [[1, 4]],
         "n_highway": 1, "embedding": {"dim": 4}, "n_characters": 261, "max_characters_per_token": 50},
         "lstm": {"use_skip_connections": True, "projection_dim": 4, "cell_clip": 3, "proj_clip": 3, "dim": 8,
                  "n_layers": 2}}
    assert BiLmOptions.from_dict(d).to_dict() == d


@pytest.mark.parametrize("key, value, message", [
    ("lstm.dim", "abc", "key 'lstm.dim' must be an integer >= 1, found 'abc'"),
    ("lstm.projection_dim", 4.5, "key 'lstm.projection_dim' must be an integer >= 1, found 4.5"),
    ("lstm.n_layers", 0, "key 'lstm.n_layers' must be an integer >= 1, found 0"),
    ("char_cnn.n_highway", -1, "key 'char_cnn.n_highway' must be an integer >= 0, found -1"),
    ("char_cnn.embedding.dim", True, "key 'char_cnn.embedding.dim' must be an integer >= 1, found True"),
    ("char_cnn.filters", [], "key 'char_cnn.filters' must be a non-empty list of [width, number] pairs, found []"),
    ("char_cnn.filters", [[1, 4], [60, 8]], "key 'char_cnn.filters[1]': the width must be an integer between 1 and "
                                            "50 (max_characters_per_token), found 60"),
])
def test_options_with_a_size_that_is_not_a_whole_number_or_too_small_are_named(tmp_path, key, value, message):
    """Before: int("abc") gave a bare ValueError, int(4.5) silently a smaller model, 0 layers no error at all."""
    d = json.loads(write_random_elmo(tmp_path)[0].read_text())
    node = d
    *parents, last = key.split(".")
    for name in parents:
        node = node[name]
    node[last] = value
    path = tmp_path / "bad_options.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ElmoInputError) as error:
        BiLmOptions.load(path)
    assert str(error.value) == f"{path}: {message}"


def test_options_with_a_byte_order_mark_load(tmp_path):
    options, _ = write_random_elmo(tmp_path)
    marked = tmp_path / "marked.json"
    marked.write_bytes(codecs.BOM_UTF8 + options.read_bytes())
    assert BiLmOptions.load(marked) == BiLmOptions.load(options)


@pytest.mark.parametrize("change, message", [
    (lambda lstm: lstm.update(use_skip_connections="false"),  # bool("false") was True: the residual kept
     "key 'lstm.use_skip_connections' must be true or false, found 'false'"),
    (lambda lstm: lstm.update(use_skip_conections=lstm.pop("use_skip_connections")),  # was: silently no residual
     "key 'lstm.use_skip_conections' is not a biLM option (did you mean 'use_skip_connections'?); expected keys of "
     "'lstm': cell_clip, dim, n_layers, proj_clip, projection_dim, use_skip_connections"),
    (lambda lstm: lstm.update(cell_clp=lstm.pop("cell_clip")),  # was: silently no clipping
     "key 'lstm.cell_clp' is not a biLM option (did you mean 'cell_clip'?)"),
    (lambda lstm: lstm.pop("proj_clip"), "missing key 'lstm.proj_clip'"),  # allennlp: options["lstm"]["proj_clip"]
    (lambda lstm: lstm.update(cell_clip="3"), "key 'lstm.cell_clip' must be a number > 0 or null (no clipping), "
                                              "found '3'"),
])
def test_options_read_as_strictly_as_the_official_loaders(tmp_path, change, message):
    """A string "false", a misspelt use_skip_connections or cell_clip each used to load as a different biLM (vectors
    off by up to 2.73) where allennlp refuses the file; now each is one line naming the key."""
    d = json.loads(write_random_elmo(tmp_path)[0].read_text())
    change(d["lstm"])
    path = tmp_path / "bad_options.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ElmoInputError) as error:
        BiLmOptions.load(path)
    assert str(error.value).startswith(f"{path}: {message}")


def test_options_clip_null_means_no_clipping(tmp_path):
    d = json.loads(write_random_elmo(tmp_path)[0].read_text())
    d["lstm"]["cell_clip"] = None  # as bilm-tf reads it (allennlp passes None on to its LSTM: no clipping)
    assert BiLmOptions.from_dict(d).cell_clip is None
