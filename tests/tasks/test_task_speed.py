"""The rearranged computations of the SQuAD and coreference models (docs/speed.md, "SQuAD and coreference
training"): each gives the numbers of the computation it replaces (to float rounding, or exactly where it says so)
on a tiny input, in training mode with dropout, and the replaced computation is gone from the step."""
import copy

import pytest
import torch

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow  # trains models or starts runners throughout

COREF_SAMPLE = str(REPO_ROOT / "tasks" / "coref" / "sample_data" / "train")


def _coref_model_and_batch(speaker_genre: bool, tmp_path):
    from allennlp.common import Params
    from allennlp.common.plugins import import_plugins
    from allennlp.data import Batch, DatasetReader, Vocabulary
    from allennlp.models import Model

    import_plugins()
    config = Params.from_file(str(REPO_ROOT / "jsonnet_configs" / "coref.jsonnet"))  # SIZE=tiny
    reader_params, params = config.pop("dataset_reader"), config.pop("model")
    reader_params["speaker_genre"], params["speaker_genre_features"] = speaker_genre, speaker_genre
    instances = list(DatasetReader.from_params(reader_params).read(COREF_SAMPLE))[:1]
    vocab = Vocabulary.from_instances(instances)
    torch.manual_seed(3)
    model = Model.from_params(vocab=vocab, params=params)
    batch = Batch(instances)
    batch.index_instances(vocab)
    return model, batch.as_tensor_dict()


def _train_step(model, tensors, seed=5):
    """Loss, scores and parameter gradients of one training forward and backward, dropout drawn from ``seed``."""
    model.train()
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    output = model(**tensors)
    output["loss"].backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return output, grads


@pytest.mark.parametrize("speaker_genre", [False, True])
def test_coref_split_pair_scorer_and_separate_gathers_give_allennlp_models_numbers(task_env, tmp_path, speaker_genre):
    from tasks.coref.model import use_allennlp_paths

    model, tensors = _coref_model_and_batch(speaker_genre, tmp_path)
    reference = copy.deepcopy(model)
    use_allennlp_paths(reference)
    fast, fast_grads = _train_step(model, tensors)
    slow, slow_grads = _train_step(reference, tensors)
    assert torch.equal(fast["top_spans"], slow["top_spans"])
    assert torch.equal(fast["predicted_antecedents"], slow["predicted_antecedents"])
    assert fast["loss"].item() == pytest.approx(slow["loss"].item(), rel=1e-5)
    assert set(fast_grads) == set(slow_grads)
    for name, grad in slow_grads.items():
        torch.testing.assert_close(fast_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_coref_windowed_attention_head_gives_allennlp_values_and_gradients(task_env, tmp_path):
    from allennlp.modules.span_extractors import SelfAttentiveSpanExtractor

    from tasks.coref.model import WindowedSpanExtractor

    torch.manual_seed(0)
    words = torch.randn(2, 9, 6, requires_grad=True)
    # one-word spans, spans ending on the last word, the same span twice, a padding span as the model relus it
    spans = torch.tensor([[[0, 0], [1, 3], [5, 8], [4, 5], [8, 8]], [[0, 2], [3, 3], [5, 7], [5, 7], [0, 0]]])
    ours = WindowedSpanExtractor(input_dim=6)
    theirs = copy.deepcopy(ours)
    theirs.__class__ = SelfAttentiveSpanExtractor
    results = []
    for extractor in (ours, theirs):
        words.grad = None
        extractor.zero_grad()
        out = extractor(words, spans)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        results.append((out, words.grad.clone(), extractor._global_attention._module.weight.grad.clone()))
    for mine, allennlps in zip(*results):
        torch.testing.assert_close(mine, allennlps, rtol=1e-6, atol=1e-6)


def test_coref_step_builds_neither_the_pair_concatenation_nor_the_gather_of_every_spans_words(task_env, tmp_path):
    """What the rearrangement removes: the antecedent feedforward's first layer on the (spans x antecedents x
    3 span_dim + features) concatenation, and the attention head's (spans x width x dim) gather of words that
    its backward kept."""
    model, tensors = _coref_model_and_batch(False, tmp_path)
    first_layer_inputs = []
    first = model._antecedent_feedforward._module._linear_layers[0]
    first.register_forward_hook(lambda module, inputs, output: first_layer_inputs.append(inputs[0].shape))
    spans = tensors["spans"]
    widest = int((spans[..., 1] - spans[..., 0]).max()) + 1
    words_dim = model._attentive_span_extractor.get_input_dim()
    saved = []
    model.train()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(tuple(t.shape[-3:])) or t, lambda t: t):
        model(**tensors)
    assert first_layer_inputs == []
    assert (spans.size(1), widest, words_dim) not in saved


def _gru_step(encoder, inputs, mask, grad_out):
    x = inputs.clone().requires_grad_(True)
    out = encoder(x, mask)
    (out * grad_out[..., : out.size(-1)]).sum().backward()
    return out, x.grad, {name: p.grad for name, p in encoder.named_parameters()}


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("hidden", [32, 16])
def test_gru_recurrence_gives_torchs_outputs_and_gradients(bidirectional, hidden):
    """Bit for bit at the small SQuAD model's 32 cells on an AVX2 CPU; else to rounding: torch's sigmoid and tanh
    kernels take the last elements of a row in scalar code, and which elements those are depends on the row's length
    and the CPU's vector width."""
    from tasks.unpacked_rnn import UnpackedGru

    torch.manual_seed(3)
    fused = UnpackedGru(input_size=7, hidden_size=hidden, bidirectional=bidirectional)
    plain = copy.deepcopy(fused)
    plain.fused_recurrence = False
    lengths = torch.tensor([9, 4, 1, 0, 9, 6])
    mask = torch.arange(9)[None] < lengths[:, None]
    inputs, grad_out = torch.randn(6, 9, 7), torch.randn(6, 9, 2 * hidden)
    got, expected = _gru_step(fused, inputs, mask, grad_out), _gru_step(plain, inputs, mask, grad_out)
    if hidden == 32 and torch.backends.cpu.get_cpu_capability() == "AVX2":  # (an AVX-512 CPU's kernels group the
        assert torch.equal(got[0], expected[0])  # row otherwise: to rounding there, as measured on 2026-12-06)
    torch.testing.assert_close(got[0], expected[0], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(got[1], expected[1], atol=1e-6, rtol=1e-5)
    assert got[2].keys() == expected[2].keys()
    for name, grad in expected[2].items():
        torch.testing.assert_close(got[2][name], grad, atol=1e-5, rtol=1e-5, msg=name)


def test_gru_recurrence_is_one_autograd_node_not_a_few_per_step():
    from tasks.unpacked_rnn import UnpackedGru

    encoder = UnpackedGru(input_size=7, hidden_size=16, bidirectional=True)
    steps = 40
    out = encoder(torch.randn(2, steps, 7, requires_grad=True), torch.ones(2, steps, dtype=torch.bool))
    seen, stack = set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(next_node for next_node, _ in node.next_functions)
    assert len(seen) < steps  # torch's GRU: about 10 per step and direction


def test_under_bfloat16_autocast_the_gru_is_torchs_as_before():
    from tasks.unpacked_rnn import UnpackedGru

    torch.manual_seed(3)
    fused = UnpackedGru(input_size=7, hidden_size=16, bidirectional=True)
    plain = copy.deepcopy(fused)
    plain.fused_recurrence = False
    inputs, mask = torch.randn(3, 5, 7), torch.ones(3, 5, dtype=torch.bool)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, expected = fused(inputs, mask), plain(inputs, mask)
    assert torch.equal(got, expected)


@pytest.mark.real_data
def test_speed_bench_puts_the_rearranged_computations_back_for_its_before_variants(task_env, tmp_path):
    import json

    from tests.conftest import shared_data
    from tools.task_speed_bench import Variant, main, read_task, task_knobs, write_stand_ins

    shared_data("litbank_coref", "train")
    bilm, glove = write_stand_ins(tmp_path)
    params, vocab, _ = read_task("coref", task_knobs("coref", bilm, glove[300]), 1)
    before, now = (Variant(name, params, vocab, tmp_path / "cache", "coref") for name in ("float32-before", "float32"))
    assert type(before.model._attentive_span_extractor).__name__ == "SelfAttentiveSpanExtractor"
    assert type(now.model._attentive_span_extractor).__name__ == "WindowedSpanExtractor"
    out = tmp_path / "bench.json"
    main(["--tasks", "squad", "--batches", "1", "--warmup", "0", "--variants", "float32-before,float32+cache",
          "--out", str(out)])
    result = json.loads(out.read_text())["results"][0]
    assert result["ratios_against"] == "float32-before"
    assert set(result["variants"]) == {"float32-before", "float32+cache"}
    assert all(v["s_per_batch"] > 0 for v in result["variants"].values())
