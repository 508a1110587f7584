"""``python -m probes {wsd,pos,neighbours} ...``: what each frozen biLM layer knows (Sec. 5.3, Tables 4-6).

Prints the table beside the paper's values and, with ``--out``, writes the result as JSON (``X.partial`` first,
renamed when complete); the runner's probe sweeps call this and build table4/5/6.md from the JSON. Bad input exits
2 with a one-line ``error:`` naming the file and line.
"""
import argparse
import json
import os
import sys
from pathlib import Path

from elmo_module.errors import ElmoInputError

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "probes" / "sample_data"
PAPER_TABLE = {"neighbours": "table4", "wsd": "table5", "pos": "table6"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m probes", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="probe", required=True)

    def common(q):
        q.add_argument("--options", default="", help="biLM options.json (default: the bundled tiny biLM)")
        q.add_argument("--weights", default="", help="biLM weights hdf5 (default: the bundled tiny biLM)")
        q.add_argument("--out", help="write the result JSON here")
        q.add_argument("--cache-dir", help="frozen-biLM activation cache root (e.g. cache/elmo); default: none")
        q.add_argument("--batch-size", type=int, default=64)
        q.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")

    q = sub.add_parser("wsd", help="Table 5: 1-NN sense centroids per layer, WordNet first-sense fallback")
    q.add_argument("--train", default=str(SAMPLE / "wsd/semcor/semcor.data.xml"),
                   help="SemCor in the Raganato layout (<name>.data.xml beside <name>.gold.key.txt)")
    q.add_argument("--eval", nargs="+", default=[str(SAMPLE / "wsd/eval/ALL/ALL.data.xml")],
                   help="evaluation sets (<name>.data.xml beside <name>.gold.key.txt); ALL is also split by set")
    q.add_argument("--wordnet", default=str(SAMPLE / "wordnet/dict"), help="WordNet 3.0 dict/ folder")
    common(q)
    q = sub.add_parser("pos", help="Table 6: softmax regression on each frozen layer")
    q.add_argument("--train", default=str(SAMPLE / "pos/train.txt"), help="token<TAB>tag, blank line between sentences")
    q.add_argument("--dev", default=str(SAMPLE / "pos/dev.txt"))
    q.add_argument("--test", default=str(SAMPLE / "pos/test.txt"))
    q.add_argument("--l2", type=float, default=1e-4)
    q.add_argument("--max-iter", type=int, default=300, help="L-BFGS iterations at most (best on dev kept)")
    common(q)
    q = sub.add_parser("neighbours", help="Table 4: nearest neighbours of a word, context-free and in context")
    q.add_argument("--semcor", default=str(SAMPLE / "wsd/semcor/semcor.data.xml"))
    q.add_argument("--word", default="play")
    q.add_argument("--source", action="append", help="a source sentence using the word (repeat; default: Table 4's)")
    q.add_argument("--glove", default="", help="a GloVe text file for the context-free row (optional)")
    q.add_argument("--top", type=int, default=10)
    q.add_argument("--nearest", type=int, default=1, help="SemCor sentences per source sentence")
    q.add_argument("--min-count", type=int, default=2, help="corpus words seen fewer times are left out")
    common(q)
    return p.parse_args(argv)


def run(args) -> dict:
    import torch

    from probes.layers import FrozenBiLm

    counts = {"--batch-size": args.batch_size, "--threads": args.threads, "--top": getattr(args, "top", 1),
              "--nearest": getattr(args, "nearest", 1), "--min-count": getattr(args, "min_count", 1),
              "--max-iter": getattr(args, "max_iter", 1)}
    for flag, value in counts.items():
        if value is not None and value < 1:
            raise ElmoInputError(f"{flag}: expected at least 1, found {value}")
    if getattr(args, "l2", 0) < 0:
        raise ElmoInputError(f"--l2: expected a number >= 0, found {args.l2}")
    if getattr(args, "glove", "") and not Path(args.glove).is_file():
        raise ElmoInputError(f"--glove '{args.glove}': expected a GloVe text file, found "
                             f"{'a directory' if Path(args.glove).is_dir() else 'no such file'}")
    if args.out:  # before the work, not after it
        from elmo_module.embed import check_writable

        out = Path(args.out)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ElmoInputError(f"--out '{out}': cannot make directory '{out.parent}' ({e.strerror})") from None
        check_writable(out, out.with_name(out.name + ".partial"), "--out", "a JSON file name")
    if args.threads:
        torch.set_num_threads(args.threads)
    bilm = FrozenBiLm(args.options, args.weights, args.batch_size, args.cache_dir)
    if args.probe == "wsd":
        from probes.wsd import run_wsd

        return run_wsd(bilm, args.train, args.eval, args.wordnet)
    if args.probe == "pos":
        from probes.pos import run_pos

        return run_pos(bilm, args.train, args.dev, args.test, args.l2, args.max_iter)
    from probes.neighbours import run_neighbours

    return run_neighbours(bilm, args.semcor, args.word, args.source, args.top, args.nearest, args.min_count,
                          args.glove)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        result = run(args)
    except ElmoInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    from probes.report import markdown_body

    paper = json.loads((REPO / "results" / "paper_numbers.json").read_text()).get(PAPER_TABLE[args.probe], {})
    print("\n".join(markdown_body(result, paper)))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        partial.write_text(json.dumps(result, indent=1) + "\n")
        os.replace(partial, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
