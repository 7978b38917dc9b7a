#!/usr/bin/env python3
"""The ranks' data-only message format against pickle, on the collector's payloads.

    python tools/bench/ranks_codec.py [--repeat 7]

What a rank hands rank 0 at the end of a run (its lineage record and its job-view
series as flat arrays), a lineage record alone, and a worst case of many small nested
values, each encoded and decoded by ``rankscribe.ranks.messages._codec`` and by pickle
(protocol 5, the peer the format replaced), best of --repeat runs each, alternately.
Printed per payload: both times and the ratio ours/pickle, and both sizes.
"""

from __future__ import annotations

import argparse
import array
import pickle
import random
import time
from collections.abc import Callable
from typing import Any

from rankscribe.ranks.messages._codec import decode, encode


def payloads() -> dict[str, Any]:
    rng = random.Random(0)
    lineage = {
        "summary_dir": "runs/exp1/rank_3",
        "hyper_parameters": {"learning_rate": 0.05, "batch_size": 32},
        "metric": {"accuracy": 0.93},
        "algorithm": {"loss": 0.21, "network": "DigitsMLP"},
        "user_defined": {f"job/last_step/{rank}": 22 for rank in range(64)},
    }
    series = {
        f"tag{tag}": (
            array.array("q", range(10_000)),
            array.array("f", (rng.random() for _ in range(10_000))),
        )
        for tag in range(10)
    }
    return {
        "lineage + series (10 tags x 10,000 steps)": {"lineage": lineage, "series": series},
        "lineage record": lineage,
        "20,000 small dicts (worst case)": [
            {"step": step, "values": [float(step)] * 5, "tag": "loss"} for step in range(20_000)
        ],
    }


def best(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"{'payload':<42} {'step':<7} {'ours ms':>9} {'pickle ms':>10} {'ratio':>6}  sizes")
    for name, value in payloads().items():
        ours, theirs = encode(value), pickle.dumps(value, protocol=5)
        rows = [
            (
                "encode",
                best(lambda v=value: encode(v), args.repeat),
                best(lambda v=value: pickle.dumps(v, protocol=5), args.repeat),
            ),
            (
                "decode",
                best(lambda m=ours: decode(m), args.repeat),
                best(lambda m=theirs: pickle.loads(m), args.repeat),
            ),
        ]
        for step, mine, peer in rows:
            print(
                f"{name:<42} {step:<7} {mine * 1e3:9.2f} {peer * 1e3:10.2f} "
                f"{mine / peer:6.1f}  {len(ours):,} / {len(theirs):,} bytes"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
