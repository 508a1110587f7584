"""The preflight's checks of a transformer encoder (knob ENCODER, docs/encoders.md): that it loads with a fast
tokenizer, that the sampled texts fit its maximum length, and what its activation cache stores per word. One line
each, before any training; ELMo's biLM is checked in runner/preflight/checks.py."""
from typing import List, Optional, Tuple

from runner.preflight.task_setup import Problem


def encoder_problems(runs) -> List[Problem]:
    """Each transformer encoder (knob ENCODER) of the ELMo runs that cannot serve (elmo_module/transformer.py)."""
    from elmo_module.transformer import encoder_problem  # (torch, transformers behind it: loaded when this runs)

    found = {e: encoder_problem(e) for e in {r.knob_dict.get("ENCODER", "elmo") for r in runs if r.uses_elmo}}
    return [Problem(e, "", why.removeprefix(f"encoder {e}: "), "Give the directory save_pretrained wrote (knob "
                    "ENCODER: docs/encoders.md)")
            for e, why in sorted(found.items()) if why]


def length_problems(runs, samples: dict) -> List[Problem]:
    """A sampled text longer in word pieces than a transformer encoder's maximum (max_position_embeddings): one line
    before any training (the run would stop at it: elmo_module/transformer.py FrozenTransformer.forward). The sample's
    five longest texts in words are measured; a longer one further in the file still stops the run, or the cache."""
    from transformers import AutoConfig, AutoTokenizer  # (transformers: loaded for a transformer encoder only)

    from elmo_module.transformer import encoder_problem, model_source  # (torch behind it: as encoder_problems)

    problems = []
    for task, encoder in sorted({(r.task, r.knob_dict.get("ENCODER", "elmo")) for r in runs if r.uses_elmo}):
        if encoder == "elmo" or encoder.startswith("hf:") or encoder_problem(encoder):
            continue
        source = model_source(encoder)
        limit = int(getattr(AutoConfig.from_pretrained(source), "max_position_embeddings", 0) or 0)
        tokenizer = AutoTokenizer.from_pretrained(source)
        for split, sample in sorted(samples.get(task, {}).items()):
            lengths = [len(tokenizer(list(t), is_split_into_words=True)["input_ids"]) for t in sample.longest]
            if limit and lengths and max(lengths) > limit:
                problems.append(Problem(f"{task} {split}", f"texts of at most {limit} word pieces for {encoder} "
                                        f"(its max_position_embeddings)", f"a text of {max(lengths)} word pieces",
                                        "Use an encoder with longer inputs, or ELMo for this task (a transformer "
                                        "reads a text whole: docs/encoders.md)"))
    return problems


def transformer_layers(encoder: str) -> Optional[Tuple[int, int, int]]:
    """(layers, their size, bytes the activation cache stores per word: every hidden state in full, float16,
    elmo_module/transformer_cache.py) of a transformer, or None where not known (a hub name, or one that cannot
    serve: encoder_problems says so)."""
    from transformers import AutoConfig  # (transformers: loaded for a transformer encoder only)

    from elmo_module.transformer import encoder_problem, model_source  # (torch behind it: loaded when this runs)

    if encoder.startswith("hf:") or encoder_problem(encoder):
        return None
    config = AutoConfig.from_pretrained(model_source(encoder))
    layers, dim = config.num_hidden_layers + 1, config.hidden_size
    return layers, dim, 2 * layers * dim
