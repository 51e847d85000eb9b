"""Building the onnxruntime counterpart of an olc session, for comparisons.

The CLI's ``--compare onnxruntime`` and ``tools/benchmark_parity.py`` both use
this, so that olc is always compared with onnxruntime configured the same way:
the CPU execution provider, the same number of intra-op threads, one
inter-op thread and sequential execution.
"""

from __future__ import annotations

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
