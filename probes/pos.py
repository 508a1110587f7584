"""Part-of-speech tagging with a linear classifier on each frozen biLM layer (Sec. 5.3, Table 6).

The classifier is softmax regression, nothing else: logits = W x + b on one layer's vector x of a token, trained by
full-batch L-BFGS on the cross entropy with a small L2 penalty; the iteration count is picked on dev (evaluated every
``eval_every`` iterations, best kept). The features are that layer's output as the biLM gives it (no scaling, no
context window), so the accuracy says what a single layer encodes linearly.

Baseline (ours; the paper lists published taggers instead): each word's most frequent training tag, and the most
frequent tag overall (NN on WSJ) for unseen words. It needs no context, so the distance from it to a layer is what
that layer adds beyond word identity.
"""
import time
from collections import Counter, defaultdict
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from probes.layers import layer_names
from probes.readers import read_tagged


class LinearProbe(nn.Module):
    """Softmax regression: one affine map from a layer's vector to tag scores."""

    def __init__(self, dim: int, n_tags: int):
        super().__init__()
        self.linear = nn.Linear(dim, n_tags)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def train_linear(x_train: np.ndarray, y_train: np.ndarray, x_dev: np.ndarray, y_dev: np.ndarray, n_tags: int,
                 l2: float = 1e-4, max_iter: int = 300, eval_every: int = 25,
                 seed: int = 1) -> Tuple[LinearProbe, dict]:
    torch.manual_seed(seed)
    model = LinearProbe(x_train.shape[1], n_tags)
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    xd, yd = torch.from_numpy(x_dev), torch.from_numpy(y_dev)
    optimizer = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=eval_every, history_size=20,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xt), yt) + l2 * model.linear.weight.pow(2).sum()
        loss.backward()
        return loss

    best = (-1.0, 0, None)
    for done in range(eval_every, max_iter + 1, eval_every):
        loss = optimizer.step(closure)
        with torch.no_grad():
            dev_acc = (model(xd).argmax(-1) == yd).float().mean().item()
        if dev_acc > best[0]:
            best = (dev_acc, done, {k: v.clone() for k, v in model.state_dict().items()})
    model.load_state_dict(best[2])
    return model, {"dev_accuracy": 100 * best[0], "iterations": best[1], "final_loss": loss.item()}


def features(bilm, sentences: Sequence[Sequence[str]], name: str) -> np.ndarray:
    """(n_layers, total tokens, dim): every token's vectors in corpus order, exactly the biLM's layer outputs."""
    total = sum(len(s) for s in sentences)
    starts = np.cumsum([0] + [len(s) for s in sentences])
    out = np.zeros((bilm.n_layers, total, bilm.dim), dtype=np.float32)
    for i, layers in bilm.layers(sentences, name=name, cached=True):
        out[:, starts[i]:starts[i + 1]] = layers
    return out


def most_frequent_tag_baseline(train: List[List[Tuple[str, str]]], test: List[List[Tuple[str, str]]]) -> float:
    by_word: Dict[str, Counter] = defaultdict(Counter)
    overall = Counter()
    for sentence in train:
        for word, tag in sentence:
            by_word[word][tag] += 1
            overall[tag] += 1
    default = overall.most_common(1)[0][0]
    pairs = [(by_word[w].most_common(1)[0][0] if w in by_word else default, t) for s in test for w, t in s]
    return 100 * sum(p == t for p, t in pairs) / len(pairs)


def run_pos(bilm, train_path: str, dev_path: str, test_path: str, l2: float = 1e-4, max_iter: int = 300) -> dict:
    started = time.time()
    data = {split: read_tagged(path) for split, path in (("train", train_path), ("dev", dev_path),
                                                         ("test", test_path))}
    tags = sorted({t for s in data["train"] for _, t in s})
    tag_id = {t: i for i, t in enumerate(tags)}
    labels = {split: np.array([tag_id.get(t, -1) for s in sents for _, t in s], dtype=np.int64)
              for split, sents in data.items()}
    feats = {split: features(bilm, [[w for w, _ in s] for s in sents], f"pos-{split}")
             for split, sents in data.items()}
    layers_s = time.time() - started
    # per test sentence and layer: [correct, tokens], the units of the paired bootstrap (runner/analysis/stats.py; a
    # sentence, not a token, since its tokens' errors are not independent)
    bounds = np.cumsum([0] + [len(s) for s in data["test"]])
    units = {"ids": [str(i) for i in range(len(data["test"]))], "metric": "accuracy", "counts": {}}
    results = []
    for layer in range(bilm.n_layers):
        t0 = time.time()
        # dev/test tags never seen in training count as errors (label -1 matches no prediction)
        model, info = train_linear(feats["train"][layer], labels["train"], feats["dev"][layer], labels["dev"],
                                   len(tags), l2, max_iter)
        with torch.no_grad():
            for split in ("dev", "test"):
                predicted = model(torch.from_numpy(feats[split][layer])).argmax(-1).numpy()
                info[f"{split}_accuracy"] = 100 * float((predicted == labels[split]).mean())
        right = (predicted == labels["test"]).astype(np.int64)
        units["counts"][layer_names(bilm.n_layers)[layer]] = [
            [int(right[a:b].sum()), int(b - a)] for a, b in zip(bounds[:-1], bounds[1:])]
        info["train_s"] = round(time.time() - t0, 1)
        results.append(info)
    return {"probe": "pos", "layer_names": layer_names(bilm.n_layers), "layers": results,
            "baseline": {"name": "most frequent training tag per word (NN for unseen words)",
                         "dev_accuracy": most_frequent_tag_baseline(data["train"], data["dev"]),
                         "test_accuracy": most_frequent_tag_baseline(data["train"], data["test"])},
            "data": {split: {"file": str(p), "sentences": len(data[split]), "tokens": int(labels[split].size)}
                     for split, p in (("train", train_path), ("dev", dev_path), ("test", test_path))},
            "units": {"test": units}, "tags": len(tags), "l2": l2, "max_iter": max_iter, "biLM": bilm.describe(),
            "timing_s": {"layers": round(layers_s, 1), "total": round(time.time() - started, 1)}}
