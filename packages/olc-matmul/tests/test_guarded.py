"""No GEMM path reads past its operands: M, N and K around the register
tiles, with A, B (and Gemm's C) each ending at (and starting after) an
inaccessible page (olc_core.testing.guarded), at every SIMD level, against
the float64 reference and its error bound."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from helpers import NP, ONNX, check_close, rand

from olc_core import testing

SIZES = [(1, 1, 1), (1, 17, 33), (3, 7, 15), (5, 16, 16), (17, 65, 17), (33, 9, 31), (64, 31, 65)]


@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("t", ["float32", "float16", "bfloat16"])
def test_matmul_operands_against_guard_pages(t, at):
    rng = np.random.default_rng(zlib.crc32(f"matmul/{t}/{at}".encode()))
    for m, k, n in SIZES:
        model = testing.one_node_model("MatMul", [("a", ONNX[t], [m, k]), ("b", ONNX[t], [k, n])],
                                       [("y", ONNX[t], None)])
        a, b = rand(rng, (m, k), t), rand(rng, (k, n), t)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        feeds = {"a": testing.guarded(a, at=at), "b": testing.guarded(b, at=at)}
        for level, (y,) in testing.run_on_every_level(model, feeds, expected_kernel="olc_matmul::MatMul").items():
            check_close(y, a64 @ b64, np.abs(a64) @ np.abs(b64), k, t, f"MatMul {t} {m}x{k}x{n} at {level}")


@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_gemm_operands_against_guard_pages(trans, at):
    ta, tb = trans
    rng = np.random.default_rng(zlib.crc32(f"gemm/{ta}{tb}/{at}".encode()))
    for m, k, n in SIZES:
        a = rand(rng, (k, m) if ta else (m, k), "float32")
        b = rand(rng, (n, k) if tb else (k, n), "float32")
        c = rand(rng, (n,), "float32")
        model = testing.one_node_model(
            "Gemm", [("a", ONNX["float32"], list(a.shape)), ("b", ONNX["float32"], list(b.shape)),
                     ("c", ONNX["float32"], [n])], [("y", ONNX["float32"], None)],
            {"transA": ta, "transB": tb, "alpha": 0.5, "beta": 2.0})
        a64 = (a.T if ta else a).astype(np.float64)
        b64 = (b.T if tb else b).astype(np.float64)
        ref = 0.5 * (a64 @ b64) + 2.0 * c.astype(np.float64)
        absprod = 0.5 * (np.abs(a64) @ np.abs(b64)) + 2.0 * np.abs(c.astype(np.float64))
        feeds = {"a": testing.guarded(a, at=at), "b": testing.guarded(b, at=at), "c": testing.guarded(c, at=at)}
        for level, (y,) in testing.run_on_every_level(model, feeds, expected_kernel="olc_matmul::Gemm").items():
            assert y.dtype == NP["float32"]
            check_close(y, ref, absprod, k, "float32", f"Gemm t{ta}{tb} {m}x{k}x{n} at {level}")
