"""Peak CPU memory of one step of coref.jsonnet at SIZE=paper on a synthetic document (the numbers in
tasks/coref/README.md).

    python -m tasks.coref.memory_check --max-antecedents 50 --elmo-dim 1024 --sentences 50 --mode train

The document has ``--sentences`` sentences of 20 words. ``--elmo-dim`` widens the word embedding by that many
dimensions, which gives the span scorers the token-vector size of ELMo at the input (the biLM itself is not run: it is
frozen and its activations are small next to the span-pair tensors). ``--mode train`` reads with the training reader
(documents cut to 50 sentences) and runs forward + backward; ``--mode eval`` reads whole documents and runs forward
without gradients. Prints the process's peak resident memory before and after the step, in GB.
"""
import argparse
import json
import os
import resource

import torch
from allennlp.common import Params
from allennlp.data import Batch, DatasetReader, Vocabulary
from allennlp.models import Model

import tasks  # noqa: F401  (registers the readers and models, sets the knob defaults)

CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "jsonnet_configs", "coref.jsonnet")
WORD_DIM, CHAR_DIM = 300, 150  # SIZE=paper in coref.jsonnet


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # ru_maxrss is in KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-antecedents", type=int, default=50)
    parser.add_argument("--elmo-dim", type=int, default=1024)
    parser.add_argument("--sentences", type=int, default=50)
    parser.add_argument("--mode", choices=["train", "eval"], default="train")
    args = parser.parse_args()
    os.environ.update(SIZE="paper", ELMO="none")
    torch.set_num_threads(1)
    params = Params.from_file(CONFIG, params_overrides=json.dumps({
        "model.max_antecedents": args.max_antecedents,
        "model.text_field_embedder.token_embedders.tokens.embedding_dim": WORD_DIM + args.elmo_dim,
        "model.context_layer.input_size": WORD_DIM + CHAR_DIM + args.elmo_dim,
    }))
    train = args.mode == "train"
    reader = DatasetReader.from_params(params.pop("dataset_reader" if train else "validation_dataset_reader"))
    words = [f"w{i}" for i in range(200)]
    sentences = [[words[(7 * s + j) % 200] for j in range(20)] for s in range(args.sentences)]
    instance = reader.text_to_instance(sentences, [[(0, 0), (25, 26)], [(40, 40), (500, 501)]])
    vocab = Vocabulary.from_instances([instance])
    model = Model.from_params(vocab=vocab, params=params.pop("model"))
    batch = Batch([instance])
    batch.index_instances(vocab)
    before = peak_rss_gb()
    if train:
        model(**batch.as_tensor_dict())["loss"].backward()
    else:
        model.eval()
        with torch.no_grad():
            model(**batch.as_tensor_dict())
    print(json.dumps({"mode": args.mode, "max_antecedents": args.max_antecedents, "words": len(instance["text"]),
                      "token_dim": model._text_field_embedder.get_output_dim(),
                      "peak_rss_gb_before": round(before, 2), "peak_rss_gb_after": round(peak_rss_gb(), 2)}))


if __name__ == "__main__":
    main()
