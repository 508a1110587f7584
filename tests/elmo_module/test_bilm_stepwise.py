"""Our biLM against a step-by-step float64 reference written from the TF cell equations (arXiv:1802.05365v2
Sec. 3.4, p. 4; the cell with cell and projection clip as bilm-tf's LSTMCell).

allennlp refuses biLMs without the residual connection, so this reference is the check for
``use_skip_connections: false``; it also runs with the residual, where allennlp agrees with us too.
"""
import h5py
import numpy as np
import pytest
import torch

from elmo_module import batch_to_ids, load_bilm
from elmo_module.characters import token_to_ids
from tests.elmo_fixtures import SENTENCES, write_random_elmo
from tests.elmo_module.test_bilm_reference import BATCHES


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


class StepwiseBiLm:
    """One token, one time step at a time, straight from the hdf5 arrays."""

    def __init__(self, weights_path, n_layers, filters, n_highway, skip, clip):
        with h5py.File(weights_path) as f:
            self.a = {}
            f.visititems(lambda name, obj: self.a.__setitem__(name, obj[...].astype(np.float64))
                         if isinstance(obj, h5py.Dataset) else None)
        self.n_layers, self.filters, self.n_highway, self.skip, self.clip = n_layers, filters, n_highway, skip, clip
        self.rows = {}  # batch row -> carried (h, c) per (layer, direction)

    def token(self, ids):
        emb = np.vstack([np.zeros((1, self.a["char_embed"].shape[1])), self.a["char_embed"]])[ids]
        pooled = []
        for i, (width, _number) in enumerate(self.filters):
            w, b = self.a[f"CNN/W_cnn_{i}"][0], self.a[f"CNN/b_cnn_{i}"]
            conv = [sum(emb[p + k] @ w[k] for k in range(width)) + b for p in range(len(ids) - width + 1)]
            pooled.append(np.maximum(np.max(conv, axis=0), 0))
        x = np.concatenate(pooled)
        for k in range(self.n_highway):
            g = sigmoid(x @ self.a[f"CNN_high_{k}/W_carry"] + self.a[f"CNN_high_{k}/b_carry"])
            t = np.maximum(x @ self.a[f"CNN_high_{k}/W_transform"] + self.a[f"CNN_high_{k}/b_transform"], 0)
            x = g * t + (1 - g) * x
        return x @ self.a["CNN_proj/W_proj"] + self.a["CNN_proj/b_proj"]

    def cell(self, x, h, c, direction, layer):
        prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
        z = np.concatenate([x, h]) @ self.a[f"{prefix}/W_0"] + self.a[f"{prefix}/B"]
        i, j, f, o = np.split(z, 4)
        c = np.clip(sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(j), -self.clip, self.clip)
        h = np.clip((sigmoid(o) * np.tanh(c)) @ self.a[f"{prefix}/W_P_0"], -self.clip, self.clip)
        return h, c

    def sentence(self, tokens, row, stateful):
        ids = [token_to_ids(t) for t in ["<S>", *tokens, "</S>"]]
        xs = [self.token(np.array(i)) for i in ids]
        cell_dim = self.a["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0"].shape[0]
        zero = (np.zeros(xs[0].shape), np.zeros(cell_dim))
        carried = self.rows.get(row, {}) if stateful else {}
        layers, final = [[np.concatenate([x, x]) for x in xs]], {}
        inputs = {0: xs, 1: xs}
        for layer in range(self.n_layers):
            outs = {}
            for direction in (0, 1):
                h, c = carried.get((layer, direction), zero)
                order = range(len(xs)) if direction == 0 else reversed(range(len(xs)))
                out = [None] * len(xs)
                for t in order:
                    h, c = self.cell(inputs[direction][t], h, c, direction, layer)
                    out[t] = h + inputs[direction][t] if self.skip and layer > 0 else h
                outs[direction] = out
                final[(layer, direction)] = (h, c)
            layers.append([np.concatenate([f, b]) for f, b in zip(outs[0], outs[1])])
            inputs = outs
        self.rows[row] = final
        return [np.array(layer[1:-1]).reshape(len(tokens), -1) for layer in layers]


@pytest.mark.parametrize("stateful", [True, False], ids=["stateful", "stateless"])
@pytest.mark.parametrize("skip", [False, True], ids=["no_residual", "residual"])
@pytest.mark.parametrize("autograd", [False, True], ids=["no_grad", "autograd"])
def test_bilm_equals_stepwise_reference(tmp_path, skip, stateful, autograd):
    """With and without autograd (pretraining runs the same layers with gradients flowing)."""
    filters = ((1, 4), (2, 6), (4, 8))
    options, weights = write_random_elmo(tmp_path, filters=filters, n_highway=2, skip=skip, seed=7)
    ours = load_bilm(options, weights, stateful=stateful)
    ours.requires_grad_(autograd)
    reference = StepwiseBiLm(weights, n_layers=2, filters=filters, n_highway=2, skip=skip, clip=3.0)
    for batch in BATCHES:
        with torch.set_grad_enabled(autograd):
            out = ours(batch_to_ids(batch))
        assert out.layers[2].requires_grad == autograd
        for row, sentence in enumerate(batch):
            expected = reference.sentence(sentence, row, stateful)
            for k, layer in enumerate(expected):
                got = out.layers[k][row, :len(sentence)].detach().double().numpy()
                np.testing.assert_allclose(got, layer, atol=2e-6, rtol=0, err_msg=f"layer {k} row {row}")
                assert not out.layers[k][row, len(sentence):].any(), "padding must stay zero"


def test_skip_connection_changes_output(tmp_path):
    """The residual flag is not ignored: the same weights give a different top layer without it."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = load_bilm(*write_random_elmo(tmp_path / "a", skip=True))
    b = load_bilm(*write_random_elmo(tmp_path / "b", skip=False))
    ids = batch_to_ids(SENTENCES[:2])
    with torch.no_grad():
        assert torch.equal(a(ids).layers[1], b(ids).layers[1])
        assert (a(ids).layers[2] - b(ids).layers[2]).abs().max() > 1e-2


def test_char_cnn_trims_only_repeated_padding(tmp_path):
    """The token layer drops tail character positions (speed); it must agree with the reference over all 50."""
    filters = ((1, 4), (3, 6), (7, 8))
    options, weights = write_random_elmo(tmp_path, filters=filters, n_highway=1, seed=4)
    encoder = load_bilm(options, weights).token_encoder
    reference = StepwiseBiLm(weights, n_layers=2, filters=filters, n_highway=1, skip=True, clip=3.0)
    short = torch.tensor([token_to_ids(t) for t in ["a", "bb", "naïve", "<S>"]])
    long = torch.tensor([token_to_ids(t) for t in ["a", "x" * 60]])
    assert encoder._trim(short).size(1) == len("naïve".encode()) + 2 + 7  # longest word, BOW/EOW, widest filter
    assert encoder._trim(long).size(1) == 50
    for ids in (short, long):
        with torch.no_grad():
            got = encoder(ids).double().numpy()
        expected = np.stack([reference.token(row.numpy()) for row in ids])
        np.testing.assert_allclose(got, expected, atol=2e-6, rtol=0)


def test_token_cache_recomputes_only_new_words_and_forgets_on_any_parameter_change(tmp_path):
    options, weights = write_random_elmo(tmp_path, seed=6)
    encoder = load_bilm(options, weights).token_encoder
    computed = []
    plain_forward = encoder.forward
    encoder.forward = lambda ids: computed.append(len(ids)) or plain_forward(ids)
    words = [["the", "cat", "sat"], ["the", "dog"]]
    ids = batch_to_ids(words)
    with torch.no_grad():
        vectors, index = encoder.encode_distinct(ids)
        assert computed == [5]  # the, cat, sat, dog and the all-zero padding position
        again, index_again = encoder.encode_distinct(batch_to_ids([["dog", "the", "ran"]]))
        assert computed == [5, 1]  # only "ran" is new
        torch.testing.assert_close(again[index_again[0, :2]], vectors[index[1, [1, 0]]], atol=1e-6, rtol=0)
        encoder.projection.bias.add_(1.0)  # an in-place change, as an optimiser step or load_weights makes
        changed, changed_index = encoder.encode_distinct(ids)
        assert computed == [5, 1, 5]
        torch.testing.assert_close(changed[changed_index], plain_forward(ids.view(-1, 50)).view(2, 3, -1))
    # autograd recording through the token layer: no cache, the vectors carry gradients
    trained, _ = encoder.encode_distinct(ids)
    assert trained.requires_grad and computed[-1] == 5
    encoder.cache_size = 2
    with torch.no_grad():
        encoder.encode_distinct(batch_to_ids([["a", "b", "c", "d"]]))
    assert len(encoder._cache) == 2
