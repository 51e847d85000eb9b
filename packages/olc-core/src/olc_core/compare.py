"""Building the onnxruntime counterpart of an olc session, for comparisons.

The CLI's ``--compare onnxruntime`` and ``tools/benchmark_parity.py`` both use
this, so that olc is always compared with onnxruntime configured the same way:
the CPU execution provider, the same number of intra-op threads, one
inter-op thread and sequential execution.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import onnx


def onnxruntime_session(model: onnx.ModelProto, threads: int, profile: bool = False) -> Any:
    """An onnxruntime InferenceSession on the CPU with ``threads`` intra-op
    threads; with ``profile``, its profiler on (``end_profiling()`` returns
    the file, written in the temporary folder)."""
    import os
    import tempfile

    import onnxruntime as ort

    so = ort.SessionOptions()
    if profile:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tempfile.gettempdir(), "olc_ort_profile")
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"])


# Between timing one runtime and the other: onnxruntime's intra-op workers
# spin for a while after a run (and olc's briefly), and on a two-core host a
# spinning worker takes a core from the next run of the other runtime.
SETTLE_S = 0.05
SETTLE_MAX_S = 1.0
QUIET_WINDOW_S = 0.005
QUIET_CPU_NS = 250_000  # other threads may use 5 % of one CPU in a quiet window


def other_threads_cpu_ns() -> int | None:
    """CPU time used so far by this process's threads other than the calling
    one (Linux schedstat, nanoseconds); None where /proc does not say."""
    import os
    import threading

    me = threading.get_native_id()
    total = 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tids:
        if tid == str(me):
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
    return total


def settle() -> None:
    """Sleeps SETTLE_S, then until the other threads of the process are idle
    (spinning workers have gone to sleep), at most SETTLE_MAX_S in all."""
    import time

    time.sleep(SETTLE_S)
    before = other_threads_cpu_ns()
    if before is None:
        return
    deadline = time.perf_counter() + SETTLE_MAX_S - SETTLE_S
    while time.perf_counter() < deadline:
        time.sleep(QUIET_WINDOW_S)
        now = other_threads_cpu_ns()
        if now is None or now - before < QUIET_CPU_NS:
            return
        before = now


def time_in_blocks(fns: Sequence[Callable[[], Any]], runs: int, block: int,
                   cpu: list[list[float]] | None = None) -> list[list[int]]:
    """Times each of fns ``runs`` times; per-run wall-clock ns, one list per fn.

    The runs come in blocks of up to ``block`` back-to-back runs (as a
    server's requests follow one another), the fns taking turns block by
    block and the one that goes first rotating every round, so that none
    always runs with the warmer cache. Every block starts after settle():
    with another runtime's workers still spinning, a two-thread run shares
    its cores; with settle before every single run instead, each run
    starts from idle (onnxruntime's two-thread runs of the PP-OCRv4
    recognizer read 17.5 ms that way against 10.9 in blocks). With cpu
    (one list per fn), each block's calling-thread CPU time per run (ns) is
    appended to its fn's list: read per block, since a read per run costs a
    system call each."""
    import time

    block = max(1, block)
    samples: list[list[int]] = [[] for _ in fns]
    clock = time.perf_counter_ns
    r = 0
    while any(len(s) < runs for s in samples):
        first = r % len(fns)
        for i in list(range(first, len(fns))) + list(range(first)):
            k = min(block, runs - len(samples[i]))
            if k <= 0:
                continue
            settle()
            f, out = fns[i], samples[i]
            c0 = time.thread_time_ns() if cpu is not None else 0
            for _ in range(k):
                t0 = clock()
                f()
                out.append(clock() - t0)
            if cpu is not None:
                cpu[i].append((time.thread_time_ns() - c0) / k)
        r += 1
    return samples
