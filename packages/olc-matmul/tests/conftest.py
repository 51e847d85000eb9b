import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _conv_threads_at_any_size():
    """Conv goes parallel only above parallel_min_macs (a million by default),
    which the small shapes of these tests stay below: at 0 their two-thread
    runs take the threaded splits and tails the models take at full size."""
    import olc_core.tuning as tuning

    keys = [(level, dt) for level in ("scalar", "avx2", "avx512") for dt in ("float32", "float16", "bfloat16")]
    for level, dt in keys:
        tuning.set("olc_matmul", "Conv", "parallel_min_macs", 0, implementation=level, dtype=dt)
    yield
    for level, dt in keys:
        tuning.reset("olc_matmul", "Conv", "parallel_min_macs", implementation=level, dtype=dt)
