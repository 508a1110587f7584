"""Build (or find) the frozen-biLM activation cache of one task's data (see elmo_module/activation_cache.py).

The sentences are whatever the task's own dataset readers give to the ELMo indexer, so the runner needs no task
knowledge: it reads the config with the run's knobs, builds its readers and reads train, dev and test.
"""
import hashlib
import json
from pathlib import Path
from typing import Dict, Iterator, List

from runner.spec import REPO

ELMO_KEY = "elmo_module"  # the token-indexer key of jsonnet_configs/elmo.libsonnet


def _texts(field) -> Iterator[List[str]]:
    from allennlp.data.fields import ListField, TextField

    if isinstance(field, TextField) and ELMO_KEY in field.token_indexers:
        yield [t.text for t in field.tokens]
    elif isinstance(field, ListField):
        for f in field.field_list:
            yield from _texts(f)


def ensure_cache(task: str, knobs: Dict[str, str], cache_root: Path) -> Path:
    from allennlp.common import Params
    from allennlp.common.util import import_module_and_submodules
    from allennlp.data import DatasetReader

    for package in ("tasks", "elmo_module.allennlp_adapter"):  # what `allennlp train --include-package` imports
        import_module_and_submodules(package)

    from elmo_module.activation_cache import build_cache, file_checksum
    from elmo_module.weights import load_bilm

    # every sentence of the full data (no training subsample), read as an ELMo run reads it
    env = {**knobs, "ELMO": "input", "TRAIN_FRACTION": "1.0", "ELMO_CACHE": ""}
    params = Params.from_file(str(REPO / "jsonnet_configs" / f"{task}.jsonnet"), ext_vars=env).as_dict()
    options = _embedder_files(params)
    reader_params = params["dataset_reader"]
    paths = [params[k] for k in ("train_data_path", "validation_data_path", "test_data_path") if params.get(k)]
    weights_sum = file_checksum(*options)
    data_sum = file_checksum(*[REPO / p for p in paths])
    identity = json.dumps([data_sum, reader_params, params.get("validation_dataset_reader")], sort_keys=True)
    key = hashlib.sha256(identity.encode()).hexdigest()[:16]
    directory = cache_root / weights_sum[:16] / f"{task}-{key}"
    if (directory / "meta.json").is_file():
        return directory
    reader = DatasetReader.from_params(Params(reader_params))
    validation = params.get("validation_dataset_reader")
    validation_reader = DatasetReader.from_params(Params(validation)) if validation else reader
    sentences = []
    for i, path in enumerate(paths):
        for instance in (reader if i == 0 else validation_reader).read(path):
            for field in instance.fields.values():
                sentences.extend(_texts(field))
    bilm = load_bilm(*options, stateful=False)
    return build_cache(bilm, sentences, directory, weights_sum, data={"files": paths, "sha256": data_sum})


def _embedder_files(params: dict):
    """(options_file, weight_file) of the elmo_module embedder, wherever the task config put it."""
    stack = [params["model"]]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "elmo_module":
                return REPO / node["options_file"], REPO / node["weight_file"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    raise ValueError("no 'elmo_module' token embedder in the task config")
