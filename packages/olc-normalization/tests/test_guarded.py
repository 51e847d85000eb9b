"""No kernel reads past its inputs: every row length around the vector
tails, with X, scale and bias each ending at (and starting after) an
inaccessible page (olc_core.testing.guarded), at every SIMD level, against
the float64 oracles."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from norm_testlib import NP_TYPE, ONNX_TYPE, assert_close, to64

from olc_core import testing

LENGTHS = [1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 127, 129]


def softmax_ref(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def layernorm_ref(x, scale, bias, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + eps) * scale + bias


def rms_ref(x, scale, eps=1e-5):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * scale


OPS = {
    "Softmax": (13, 1, lambda a: softmax_ref(a[0])),
    "LayerNormalization": (17, 3, lambda a: layernorm_ref(*a)),
    "RMSNormalization": (23, 2, lambda a: rms_ref(*a)),
}


@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("t", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_rows_against_guard_pages(op, t, at):
    opset, n_inputs, ref = OPS[op]
    rng = np.random.default_rng(zlib.crc32(f"{op}/{t}/{at}".encode()))
    kernel = f"olc_normalization::{op}"
    for n in LENGTHS:
        rows = 3
        shapes = [(rows, n)] + [(n,)] * (n_inputs - 1)
        names = ["x", "scale", "bias"][:n_inputs]
        arrays = [rng.uniform(-3, 3, s).astype(NP_TYPE[t]) for s in shapes]
        model = testing.one_node_model(op, [(nm, ONNX_TYPE[t], list(s)) for nm, s in zip(names, shapes)],
                                       [("y", ONNX_TYPE[t], None)], opset=opset)
        feeds = {nm: testing.guarded(a, at=at) for nm, a in zip(names, arrays)}
        want = ref([to64(a) for a in arrays])
        results = testing.run_on_every_level(model, feeds, expected_kernel=kernel)
        for level, (y,) in results.items():
            if op == "Softmax" and t != "float32":
                # Narrow Softmax rounds each step of its ONNX function body to
                # the type (README, Accuracy): every level gives the same bits,
                # a few output ulps from the exact value.
                (first,) = next(iter(results.values()))
                assert y.tobytes() == first.tobytes(), f"{op} {t} n={n}: {level} differs from the other levels"
                np.testing.assert_allclose(to64(y), want, rtol=2.0**-6 if t == "float16" else 2.0**-3,
                                           atol=1e-4, err_msg=f"{op} {t} n={n} at {level}")
            else:
                assert_close(y, want, t, f"{op} {t} n={n} at {level}")
