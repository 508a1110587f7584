"""The reference side of the whole-process ``embed`` comparison: allennlp's ``_ElmoBiLm`` over a text file,
written in ``python -m elmo_module embed``'s layout (one (3, n, D) dataset per line, stateful batches of consecutive
lines), so that the two commands do the same work from start to exit:

    /usr/bin/time -v .venv/bin/python -m elmo_module embed --options O --weights W --input IN --output A.hdf5 \
        --precision bfloat16
    /usr/bin/time -v .venv/bin/python tools/allennlp_embed.py --options O --weights W --input IN --output B.hdf5

(docs/speed.md: the two in turn, several runs each, the median of the pairwise ratios). allennlp 2.x has no ``elmo``
command (allennlp 0.9's ``elmo --all`` wrote this layout); this is its loop, kept to the work ``embed`` does: read,
batch, run the biLM, write each line's layers.
"""
import argparse
import json

import h5py
import torch
from allennlp.modules.elmo import _ElmoBiLm, batch_to_ids


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--options", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--input", required=True, help="UTF-8 text, one whitespace-tokenized sentence per line")
    p.add_argument("--output", required=True)
    p.add_argument("--batch-size", type=int, default=64)
    args = p.parse_args(argv)
    with open(args.input, encoding="utf-8") as f:
        sentences = [line.split() for line in f]
    bilm = _ElmoBiLm(args.options, args.weights).eval()  # stateful, as embed's default and bilm-tf
    with h5py.File(args.output, "w") as out, torch.no_grad():
        for start in range(0, len(sentences), args.batch_size):
            batch = sentences[start:start + args.batch_size]
            result = bilm(batch_to_ids(batch))
            mask = result["mask"]
            layers = torch.stack([a[:, 1:-1] for a in result["activations"]], dim=1)  # drop <S>, </S>
            for row, sentence in enumerate(batch):
                assert int(mask[row].sum()) == len(sentence) + 2
                out.create_dataset(str(start + row), data=layers[row, :, :len(sentence)].numpy())
        index = {" ".join(s): str(i) for i, s in enumerate(sentences)}
        out.create_dataset("sentence_to_index", (1,), dtype=h5py.special_dtype(vlen=str))[0] = json.dumps(index)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
