"""Calls per second of `Journal.step` with one no-op Python tool, one call per step, as
`bench runtime` measures the Rust runtime's `seq_calls_per_s` (policy group) and
`nosync_calls_per_s` (policy never).

    python bench/step_bench.py [--seconds 3] [--rounds 3] [--seq-calls-per-s N]

Prints one line per round and the median of each key; with `--seq-calls-per-s` (the figure
`cargo run --release -p tooljournal-bench -- runtime --quick` printed on the same machine),
also the ratio against it (the goal: 0.8 or more). Build the package in release first
(`pip install ./bindings/python`): a debug build measures the wrong thing.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import tooljournal

CALL = [{"id": "c", "name": "noop", "arguments": "{}"}]


def rate(fsync: str, seconds: float, root: Path) -> float:
    ws = root / "ws"
    ws.mkdir(exist_ok=True)
    journal = root / f"journal-{fsync}-{time.monotonic_ns()}"
    j = tooljournal.Journal.create(journal, workspace=ws, fsync=fsync)
    j.tool("noop")(lambda args, ctx: "")
    j.turn("bench")
    step = j.step
    # Warm-up: the first steps open files and fill caches.
    for i in range(200):
        step([{"id": f"w{i}", "name": "noop", "arguments": "{}"}])
    n, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(100):
            CALL[0]["id"] = f"c{n}"
            step(CALL)
            n += 1
        now = time.perf_counter()
        if now >= deadline:
            break
    j.close()
    return n / (now - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where the journals go (default: a temporary directory)")
    parser.add_argument("--seq-calls-per-s", type=float, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        figures = {"py_seq_calls_per_s": [], "py_nosync_calls_per_s": []}
        for r in range(args.rounds):
            seq = rate("group", args.seconds, root)
            nosync = rate("never", args.seconds, root)
            figures["py_seq_calls_per_s"].append(seq)
            figures["py_nosync_calls_per_s"].append(nosync)
            print(f"round {r + 1}: py_seq_calls_per_s {seq:.0f}  py_nosync_calls_per_s {nosync:.0f}")
    for key, values in figures.items():
        print(f"{key} {statistics.median(values):.0f} (min {min(values):.0f}, max {max(values):.0f})")
    nosync = statistics.median(figures["py_nosync_calls_per_s"])
    print(f"py_nosync_calls_per_s target 50000: {'met' if nosync >= 50000 else 'NOT met'}")
    if args.seq_calls_per_s:
        ratio = statistics.median(figures["py_seq_calls_per_s"]) / args.seq_calls_per_s
        print(f"py_seq_vs_rust_seq {ratio:.2f} (target 0.8: {'met' if ratio >= 0.8 else 'NOT met'})")


if __name__ == "__main__":
    main()
