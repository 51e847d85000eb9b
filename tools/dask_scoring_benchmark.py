"""Rows per second of olc_core.dask.score on a tree model, and what Dask adds per partition.

    pip install 'olc-core[dask]' olc-ml psutil
    python tools/dask_scoring_benchmark.py                      # 400k rows, 8 / 32 / 128 partitions
    python tools/dask_scoring_benchmark.py --rows 1000000 --partitions 16

The model is olc-ml's benchmark forest (100 trees of depth 6 over 20 float32
features). For each partition count it times, alternating, as medians of
--repeat runs each:

- ``loop``: one Session(threads=1) run per partition in a plain Python loop
  (numpy slices of the same rows): the floor;
- ``dask floor``: a LocalCluster of 1 (then 2) worker processes x 1 thread
  running a trivial map_blocks over the same persisted partitions and
  gathering [rows, 1] results: what Dask itself costs here;
- ``olc dask``: score() on the same cluster and partitions (sessions already
  built by a warm-up run), results gathered to the client;
- the same two on dask's local threaded scheduler (one session of 2 threads;
  the loop baseline there is Session(threads=2)).

olc overhead per partition is (olc dask time - loop time / workers) /
partitions, in wall time and in CPU time (this process and its children:
client, scheduler and workers; the CPU column holds up better on a busy
machine); the dask floor per partition is its time / partitions. Not a
test: the numbers depend on the machine and its load (printed with them).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import statistics
import time
from typing import Any

import dask
import dask.array as da
import numpy as np
import psutil
from distributed import Client, LocalCluster

import olc_core
from olc_core import dask as olc_dask


def first_column(block: np.ndarray) -> np.ndarray:
    return block[:, :1].copy()


def cpu_seconds() -> float:
    """CPU time of this process (client, scheduler, threaded scheduler) and its children (worker processes)."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += sum(child.cpu_times()[:2])
    return total


def run_loop(session: olc_core.Session, slices: list[np.ndarray]) -> None:
    for block in slices:
        session.run(None, {"X": block})


def dask_floor(x: Any) -> None:
    """A trivial task per partition, [rows, 1] float32 gathered: what Dask alone costs."""
    x.map_blocks(first_column, chunks=(x.chunks[0], (1,))).compute()


def score(model: bytes, x: da.Array) -> None:
    olc_dask.score(model, x).compute()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--partitions", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from olc_ml.benchmarks import forest_model

    model = forest_model("rf", 100, 6, 20).SerializeToString()
    x_all = np.random.default_rng(0).standard_normal((args.rows, 20)).astype(np.float32)
    (want,) = olc_core.Session(model, threads=1).run(None, {"X": x_all})
    print(f"olc {olc_core.__version__}, SIMD {olc_core.simd_level()}, {os.cpu_count()} CPUs, "
          f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"{args.rows:,} rows x 20 float32, a 100-tree depth-6 forest; medians of {args.repeat}\n")
    print("| partitions | rows/partition | where | loop s | olc dask s | olc dask rows/s | "
          "olc overhead/partition (wall) | (CPU) | dask floor/partition (wall) | (CPU) |")
    print("|---|---|---|---|---|---|---|---|---|---|")

    sessions = {threads: olc_core.Session(model, threads=threads) for threads in (1, 2)}

    def measure(x: da.Array, where: str, threads: int, workers: int) -> None:
        """The loop, the Dask floor and score(), alternating, so a change of load hits all three."""
        parts = x.numblocks[0]
        slices = np.array_split(x_all, parts)
        np.testing.assert_array_equal(olc_dask.score(model, x).compute(), want)  # warm-up: sessions built, checked
        runs = [functools.partial(run_loop, sessions[threads], slices), functools.partial(dask_floor, x),
                functools.partial(score, model, x)]
        times: list[list[float]] = [[], [], []]
        cpu: list[list[float]] = [[], [], []]
        for _ in range(args.repeat):
            for fn, spent, used in zip(runs, times, cpu):
                start, start_cpu = time.perf_counter(), cpu_seconds()
                fn()
                spent.append(time.perf_counter() - start)
                used.append(cpu_seconds() - start_cpu)
        loop, floor, scored = (statistics.median(t) for t in times)
        loop_cpu, floor_cpu, scored_cpu = (statistics.median(t) for t in cpu)
        print(f"| {parts} | {args.rows // parts:,} | {where} | {loop:.3f} | {scored:.3f} | "
              f"{args.rows / scored:,.0f} | {(scored - loop / workers) / parts * 1e3:.1f} ms | "
              f"{(scored_cpu - loop_cpu) / parts * 1e3:.1f} ms | {floor / parts * 1e3:.1f} ms | "
              f"{floor_cpu / parts * 1e3:.1f} ms |", flush=True)

    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                          silence_logs=logging.CRITICAL) as cluster, Client(cluster) as client:
            for parts in args.partitions:
                # The rows are sent to the workers once, before timing, as scattered blocks.
                slices = np.array_split(x_all, parts)
                blocks = client.scatter(slices)
                x = da.concatenate([da.from_delayed(b, shape=s.shape, dtype=np.float32)
                                    for b, s in zip(blocks, slices)])
                measure(x, f"{workers} worker{'s' if workers > 1 else ''} x 1 thread", 1, workers)
                client.cancel(blocks)

    with dask.config.set(scheduler="threads", num_workers=2):
        for parts in args.partitions:
            x = da.from_array(x_all, chunks=(-(-args.rows // parts), 20))
            measure(x, "threads, 1 session x 2 threads", 2, 1)
    print(f"\nload average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
