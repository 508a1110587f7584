"""Read and write the biLM in the official layout: ``options.json`` + hdf5 (not in the paper: the layout that
allennlp's weight loaders in modules/elmo.py and modules/elmo_lstm.py read, with bilm-tf's dataset names).

Files written here load in allennlp's ``Elmo`` and bilm-tf, and theirs load here. Every dataset's shape is checked
against the options before anything is copied, so a mismatch names the dataset, the expected and the found shape.
"""
import os
import re
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch

from elmo_module.bilm import ElmoBiLm
from elmo_module.errors import ElmoInputError
from elmo_module.options import BiLmOptions
from elmo_module.precision import check_precision

N_CHARS_IN_FILE = 261  # ids 0..260 before the +1 masking shift


def _lstm_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def _layout(options: BiLmOptions) -> Iterator[Tuple[str, tuple]]:
    """Every dataset the official file holds for these options, with its shape."""
    d, n, p, c = options.char_embed_dim, options.n_filters, options.projection_dim, options.cell_dim
    yield "char_embed", (N_CHARS_IN_FILE, d)
    for i, (width, number) in enumerate(options.filters):
        yield f"CNN/W_cnn_{i}", (1, width, d, number)
        yield f"CNN/b_cnn_{i}", (number,)
    for k in range(options.n_highway):
        for part in ("transform", "carry"):
            yield f"CNN_high_{k}/W_{part}", (n, n)
            yield f"CNN_high_{k}/b_{part}", (n,)
    if n != p:
        yield "CNN_proj/W_proj", (n, p)
        yield "CNN_proj/b_proj", (p,)
    for direction in (0, 1):
        for layer in range(options.n_layers):
            prefix = _lstm_prefix(direction, layer)
            yield f"{prefix}/W_0", (2 * p, 4 * c)
            yield f"{prefix}/B", (4 * c,)
            yield f"{prefix}/W_P_0", (c, p)


def _param_map(bilm: ElmoBiLm) -> Iterator[Tuple[str, torch.Tensor, str]]:
    """(dataset, parameter, how) for every parameter; ``how`` says how the TF array maps onto it."""
    enc = bilm.token_encoder
    for i, conv in enumerate(enc.convs):
        yield f"CNN/W_cnn_{i}", conv.weight, "conv"
        yield f"CNN/b_cnn_{i}", conv.bias, "copy"
    n = enc.options.n_filters
    for k, highway in enumerate(enc.highways):
        yield f"CNN_high_{k}/W_transform", highway.weight[:n], "t"
        yield f"CNN_high_{k}/b_transform", highway.bias[:n], "copy"
        yield f"CNN_high_{k}/W_carry", highway.weight[n:], "t"
        yield f"CNN_high_{k}/b_carry", highway.bias[n:], "copy"
    if isinstance(enc.projection, torch.nn.Linear):
        yield "CNN_proj/W_proj", enc.projection.weight, "t"
        yield "CNN_proj/b_proj", enc.projection.bias, "copy"
    for direction, stack in enumerate((bilm.forward_layers, bilm.backward_layers)):
        for layer, cell in enumerate(stack):
            prefix = _lstm_prefix(direction, layer)
            yield f"{prefix}/B", cell.bias, "copy"
            yield f"{prefix}/W_P_0", cell.projection, "t"


def _open(path, mode="r"):
    import h5py

    path = Path(path)
    if mode == "r" and not path.is_file():
        raise ElmoInputError(f"weight file '{path}' does not exist")
    try:
        return h5py.File(path, mode)
    except OSError as e:
        raise ElmoInputError(f"weight file '{path}' is not a readable HDF5 file ({str(e).splitlines()[0]})") from None


# The datasets of the biLM's own layers: one in the file that the options do not read is a trained layer they would
# drop (lstm.n_layers 1, or char_cnn.n_highway 0, with weights of two), silently, at every forward
_LAYER_DATASET = re.compile(r"^(CNN/[Wb]_cnn_\d+|CNN_high_\d+/.+|CNN_proj/.+"
                            r"|RNN_\d+/RNN/MultiRNNCell/Cell\d+/LSTMCell/.+)$")


def layout_mismatches(weights_path, options: BiLmOptions) -> List[Tuple[str, Optional[tuple], Optional[tuple]]]:
    """(dataset, shape the options need or None if they do not use it, shape in the file or None if absent) for
    every dataset of the layout that disagrees, then every layer's dataset in the file that the options do not read;
    reads only the file's metadata (a preflight checks the 374 MB official file without loading it)."""
    layout = dict(_layout(options))
    stored = []
    with _open(weights_path) as f:
        found = {name: tuple(f[name].shape) if name in f else None for name in layout}
        f.visititems(lambda name, item: stored.append((name, tuple(item.shape))) if hasattr(item, "shape") else None)
    return ([(name, shape, found[name]) for name, shape in layout.items() if found[name] != shape]
            + [(name, None, shape) for name, shape in stored if name not in layout and _LAYER_DATASET.match(name)])


def mismatch_text(name: str, shape: Optional[tuple], found: Optional[tuple], options_source: str) -> str:
    """One dataset of layout_mismatches, as its line says it."""
    if shape is None:
        return (f"dataset '{name}' (shape {found}) is a trained layer that {options_source} does not use (expected "
                f"options that read every layer of the weights: lstm.n_layers, char_cnn.n_highway, char_cnn.filters)")
    if found is None:
        return f"dataset '{name}' is missing (expected shape {shape} from {options_source})"
    return f"dataset '{name}' has shape {found} but {options_source} expects {shape}"


def nonfinite_dataset(weights_path, options: BiLmOptions) -> Optional[str]:
    """The first dataset of the layout holding NaN or infinity (a diverged or damaged biLM), else None."""
    with _open(weights_path) as f:
        for name, _ in _layout(options):
            if name in f and not np.isfinite(f[name][...]).all():
                return name
    return None


def read_arrays(weights_path, options: BiLmOptions, options_source: str = "options") -> Dict[str, np.ndarray]:
    """All datasets of the layout as float32 arrays, after checking that each exists with the expected shape."""
    for name, shape, found in layout_mismatches(weights_path, options)[:1]:
        raise ElmoInputError(f"weight file '{weights_path}': {mismatch_text(name, shape, found, options_source)}")
    with _open(weights_path) as f:
        arrays = {name: np.asarray(f[name][...], dtype=np.float32) for name, _ in _layout(options)}
    for name, array in arrays.items():
        if not np.isfinite(array).all():
            raise ElmoInputError(f"weight file '{weights_path}': dataset '{name}' holds NaN or infinity (expected "
                                 f"finite weights: a diverged or damaged biLM)")
    return arrays


def load_bilm(options_path, weights_path, stateful: bool = False, precision: str = "float32") -> ElmoBiLm:
    """An ``ElmoBiLm`` with the weights of an official (or our) ``options.json`` + hdf5 pair; ``precision`` is its
    forward's (``elmo_module.precision``: the weights stay float32)."""
    check_precision(precision, None, what="precision")  # the device is known at the first forward
    options = BiLmOptions.load(options_path)
    arrays = read_arrays(weights_path, options, options_source=f"options '{options_path}'")
    bilm = ElmoBiLm(options, stateful=stateful, precision=precision)
    with torch.no_grad():
        bilm.token_encoder.char_embed[1:] = torch.from_numpy(arrays["char_embed"])
        for name, param, how in _param_map(bilm):
            a = arrays[name]
            if how == "conv":  # (1, width, dim, n) -> (n, dim, width)
                a = a[0].transpose(2, 1, 0)
            elif how == "t":
                a = a.T
            param.copy_(torch.from_numpy(np.ascontiguousarray(a)))
        for direction, stack in enumerate((bilm.forward_layers, bilm.backward_layers)):
            for layer, cell in enumerate(stack):
                w = arrays[f"{_lstm_prefix(direction, layer)}/W_0"]  # (input + projection, 4C), input rows first
                cell.input_weight.copy_(torch.from_numpy(np.ascontiguousarray(w[:options.projection_dim].T)))
                cell.state_weight.copy_(torch.from_numpy(np.ascontiguousarray(w[options.projection_dim:].T)))
    return bilm


def bilm_arrays(bilm: ElmoBiLm) -> Dict[str, np.ndarray]:
    """The inverse of ``load_bilm``: every dataset of the official layout, from the module's parameters."""
    arrays = {"char_embed": bilm.token_encoder.char_embed[1:].detach().cpu().numpy()}
    for name, param, how in _param_map(bilm):
        a = param.detach().cpu().numpy()
        if how == "conv":
            a = a.transpose(2, 1, 0)[None]
        elif how == "t":
            a = a.T
        arrays[name] = a
    for direction, stack in enumerate((bilm.forward_layers, bilm.backward_layers)):
        for layer, cell in enumerate(stack):
            w = torch.cat([cell.input_weight, cell.state_weight], dim=1).t()
            arrays[f"{_lstm_prefix(direction, layer)}/W_0"] = w.detach().cpu().numpy()
    return arrays


def save_bilm(bilm: ElmoBiLm, options_path, weights_path, extra_arrays: Dict[str, np.ndarray] = None) -> None:
    """Write options.json and the hdf5 in the official layout. Each file is written beside its target and renamed
    into place, so an interrupted save never leaves a file that looks complete."""
    arrays = {**bilm_arrays(bilm), **(extra_arrays or {})}
    weights_path, options_path = Path(weights_path), Path(options_path)
    tmp = weights_path.with_name(weights_path.name + ".partial")
    try:
        with _open(tmp, "w") as f:
            for name, a in arrays.items():
                f.create_dataset(name, data=np.ascontiguousarray(a, dtype=np.float32))
        os.replace(tmp, weights_path)
    finally:
        tmp.unlink(missing_ok=True)
    tmp = options_path.with_name(options_path.name + ".partial")
    bilm.options.save(tmp)
    os.replace(tmp, options_path)
