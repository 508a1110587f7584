"""Random biLM weights written straight into the official layout with h5py (independent of elmo_module's writer),
and sentences that exercise the character mapping."""
import json

import h5py
import numpy as np

SENTENCES = [
    ["The", "cat", "sat", "."],
    ["Ünïcödé", "naïve", "café", "日本語", "tokens"],
    ["x"],
    ["a" * 70, "supercalifragilisticexpialidocious-and-then-some-more-characters-to-pass-fifty", "end"],
    ["Short", "one"],
    ["A", "much", "longer", "sentence", "with", "many", "words", "in", "it", ",", "eleven", "plus", "more"],
    ["<S>", "looks", "like", "a", "boundary", "</S>"],
]


def write_random_elmo(directory, filters=((1, 4), (2, 8), (3, 8)), n_highway=2, projection_dim=8, cell_dim=16,
                      n_layers=2, n_characters=262, skip=True, char_dim=5, seed=0, clip=3.0):
    rng = np.random.default_rng(seed)
    options = {
        "lstm": {"use_skip_connections": skip, "projection_dim": projection_dim, "cell_clip": clip,
                 "proj_clip": clip, "dim": cell_dim, "n_layers": n_layers},
        "char_cnn": {"activation": "relu", "filters": [list(f) for f in filters], "n_highway": n_highway,
                     "embedding": {"dim": char_dim}, "n_characters": n_characters,
                     "max_characters_per_token": 50},
    }
    n_filters = sum(n for _, n in filters)

    def rand(*shape, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0] if len(shape) > 1 else 4)
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    weights_path, options_path = directory / "weights.hdf5", directory / "options.json"
    with h5py.File(weights_path, "w") as f:
        f["char_embed"] = rand(261, char_dim, scale=1.0)
        for i, (w, n) in enumerate(filters):
            f[f"CNN/W_cnn_{i}"] = rand(1, w, char_dim, n, scale=0.5)
            f[f"CNN/b_cnn_{i}"] = rand(n, scale=0.1)
        for k in range(n_highway):
            for part in ("transform", "carry"):
                f[f"CNN_high_{k}/W_{part}"] = rand(n_filters, n_filters)
                f[f"CNN_high_{k}/b_{part}"] = rand(n_filters, scale=0.1)
        # keeps the token layer O(1), like the released model, so an absolute 1e-6 is a few float32 ulps
        f["CNN_proj/W_proj"] = rand(n_filters, projection_dim, scale=0.5 / np.sqrt(n_filters))
        f["CNN_proj/b_proj"] = rand(projection_dim, scale=0.1)
        for d in (0, 1):
            for layer in range(n_layers):
                prefix = f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
                f[f"{prefix}/W_0"] = rand(2 * projection_dim, 4 * cell_dim)
                f[f"{prefix}/B"] = rand(4 * cell_dim, scale=0.1)
                f[f"{prefix}/W_P_0"] = rand(cell_dim, projection_dim)
    options_path.write_text(json.dumps(options))
    return options_path, weights_path
