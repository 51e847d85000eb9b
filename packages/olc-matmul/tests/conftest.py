import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _threads_at_any_size():
    """Conv and the float GEMMs go parallel only above parallel_min_macs
    (about a million by default), which the small shapes of these tests stay
    below: at 0 their two-thread runs take the threaded splits and tails the
    models take at full size."""
    import olc_core.tuning as tuning

    keys = [(kernel, level, dt) for kernel in ("Conv", "MatMul", "Gemm") for level in ("scalar", "avx2", "avx512")
            for dt in ("float32", "float64", "float16", "bfloat16")]
    for kernel, level, dt in keys:
        tuning.set("olc_matmul", kernel, "parallel_min_macs", 0, implementation=level, dtype=dt)
    yield
    for kernel, level, dt in keys:
        tuning.reset("olc_matmul", kernel, "parallel_min_macs", implementation=level, dtype=dt)
