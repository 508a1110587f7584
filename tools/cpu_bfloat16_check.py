"""Does this CPU run bfloat16? torch's own test, then float32 against bfloat16 timed in one process, the two taking
each repetition in turn, and whether torch's LSTM runs under bfloat16 autocast (docs/speed.md, "CPUs without bfloat16
kernels"). One thread; about a minute where bfloat16 is slow.

    OMP_NUM_THREADS=1 .venv/bin/python tools/cpu_bfloat16_check.py [--reps 10]

The shapes: a 32-row product of 512 inputs into 2,048 outputs (4 gates x 512 cells, the small profile's biLM width)
as torch.mm, and a linear layer of 640 positions 256 -> 1024 under torch.autocast("cpu", bfloat16) (what
TASK_PRECISION=bfloat16 runs). Exit status 0 whatever it finds; the last line says what elmo_module.precision decides.
"""
import argparse
import time

import torch

from elmo_module.device import cpu_name
from elmo_module.precision import cpu_bfloat16_problem, cpu_has_bfloat16


def interleaved(first, second, reps: int):
    """Median seconds of each callable over ``reps`` turns, the two alternating."""
    first(), second()
    times = ([], [])
    for _ in range(reps):
        for fn, out in ((first, times[0]), (second, times[1])):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return [sorted(t)[len(t) // 2] for t in times]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    print(f"CPU: {cpu_name()}; torch {torch.__version__}, capability {torch.backends.cpu.get_cpu_capability()}; "
          f"oneDNN bfloat16 kernels (torch.ops.mkldnn._is_mkldnn_bf16_supported): {cpu_has_bfloat16()}")
    torch.manual_seed(0)
    h, w = torch.randn(32, 512), torch.randn(512, 2048)
    hb, wb = h.bfloat16(), w.bfloat16()
    f32, b16 = interleaved(lambda: h @ w, lambda: hb @ wb, args.reps)
    print(f"torch.mm 32x512 @ 512x2048: float32 {f32 * 1e3:.2f} ms, bfloat16 {b16 * 1e3:.2f} ms: "
          f"bfloat16 runs at {f32 / b16:.3f}x float32's speed")
    x, weight = torch.randn(640, 256), torch.randn(1024, 256)

    def autocast_linear():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            torch.nn.functional.linear(x, weight)
    f32, b16 = interleaved(lambda: torch.nn.functional.linear(x, weight), autocast_linear, args.reps)
    print(f"linear 640x256 -> 1024: float32 {f32 * 1e3:.2f} ms, under bfloat16 autocast {b16 * 1e3:.2f} ms: "
          f"{f32 / b16:.3f}x")
    lstm, batch = torch.nn.LSTM(256, 256, batch_first=True), torch.randn(32, 20, 256)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(batch)
        print("torch.nn.LSTM under bfloat16 autocast: runs")
    except RuntimeError as e:
        print(f"torch.nn.LSTM under bfloat16 autocast: fails ({str(e).splitlines()[0][:100]})")
    problem = cpu_bfloat16_problem()
    print("elmo_module: bfloat16 allowed here" if problem is None else f"elmo_module refuses bfloat16 here: {problem}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
