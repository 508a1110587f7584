"""A task's config as a run sees it: its jsonnet evaluated with the run's knobs, its nodes, and where in it the ELMo
embedder is. Read by the preflight, the freshness of runs, the resume of a run and the activation caches (so here,
below all of them)."""
from typing import Dict, Optional

from runner.paths import REPO


def task_config(task: str, knobs: Dict[str, str]) -> dict:
    """The task's jsonnet config evaluated with the run's knobs."""
    from allennlp.common import Params  # (allennlp: loaded only when a config is evaluated)

    return Params.from_file(str(REPO / "jsonnet_configs" / f"{task}.jsonnet"), ext_vars=dict(knobs)).as_dict()


def config_nodes(node, path="config"):
    """Every dict of a config with its path (``config.model.text_field_embedder``), depth first."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from config_nodes(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from config_nodes(value, f"{path}[{i}]")


def elmo_embedder(config) -> Optional[dict]:
    """The elmo_module token embedder's settings, wherever a task config (or allennlp's saved config.json) put it."""
    stack = [config]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "elmo_module":
                return node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None
