"""Which kernel to run the biLM's bfloat16 GEMMs with: GFLOP/s of the candidates at the LSTM's shapes, in
one process, each shape's candidates timed in turn (so the machine's load falls on all of them).

    OMP_NUM_THREADS=1 .venv/bin/python tools/bf16_kernels_bench.py [--reps 20]

Candidates, y = x @ W^T: float32 oneDNN prepacked (what float32 inference runs, ``elmo_module.lstm``); bfloat16
``torch.mm``; bfloat16 oneDNN prepacked (``torch.ops.mkldnn._linear_pointwise`` on ``_reorder_linear_weight`` of a
bfloat16 weight; what bfloat16 inference runs); ``F.linear`` on float32 tensors under ``torch.autocast("cpu",
bfloat16)`` (casts the weight at every call: what training pays once per window, autocast's cache being per region).
"""
import argparse
import time

import torch

SHAPES = [  # (rows, in, out)
    (32, 512, 16384),  # full-size recurrent step, 32 running rows
    (8, 512, 16384),  # the same near the end of a batch
    (32, 4096, 512),  # full-size projection
    (803, 512, 16384),  # full-size input part (803 positions)
    (128, 128, 2048),  # mini biLM step at pretraining's 128 rows
]


def gflops(fn, flop: float, reps: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return flop * reps / (time.perf_counter() - start) / 1e9


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    ops = torch.ops.mkldnn
    print("rows x in -> out | float32 oneDNN | bf16 torch.mm | bf16 oneDNN | autocast F.linear | bf16 oneDNN / float32")
    for rows, k, n in SHAPES:
        x, w = torch.randn(rows, k), torch.randn(n, k) / k ** 0.5
        xb, wb = x.bfloat16(), w.bfloat16()
        packed, packed_b, wbt = ops._reorder_linear_weight(w), ops._reorder_linear_weight(wb), wb.t()

        def autocast():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return torch.nn.functional.linear(x, w)  # noqa: B023 (called within this iteration)

        flop = 2.0 * rows * k * n
        # B023: gflops calls each closure right away, within this iteration
        figures = [gflops(f, flop, args.reps) for f in (
            lambda: ops._linear_pointwise(x, packed, None, "none", [], ""), lambda: torch.mm(xb, wbt),  # noqa: B023
            lambda: ops._linear_pointwise(xb, packed_b, None, "none", [], ""), autocast)]  # noqa: B023
        print(f"{rows} x {k} -> {n} | " + " | ".join(f"{g:.0f}" for g in figures)
              + f" | {figures[2] / figures[0]:.2f}x", flush=True)


if __name__ == "__main__":
    main()
