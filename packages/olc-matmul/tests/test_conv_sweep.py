"""Conv and ConvTranspose over seeded random geometries against
onnxruntime: ranks 1-3, groups (depthwise included), kernel sizes 1-7,
strides, dilations, explicit pads and every auto_pad, output_padding and
output_shape, bias or none, constant or fed weights, batch 1-3, 1 and 2
threads, the SIMD levels in turn. The per-case tests pin each algorithm;
this sweep reaches the combinations between them (it found ConvTranspose
placing an output_shape past the full extent wrongly).

Left out, where onnxruntime departs from the schema: ConvTranspose with
SAME auto_pad whose total padding is negative (a kernel smaller than the
stride: onnxruntime clamps the output, olc keeps in * stride as the schema
and onnx.reference do). Configurations onnxruntime rejects are skipped."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from helpers import LEVELS, model, session

CASES = 64  # per test below


def _ort(model_bytes, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    try:
        sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)[0]
    except Exception:  # a configuration onnxruntime rejects
        return None


def _build(op, x, w, b, attrs, const_w):
    inputs = [("X", "float32"), ("W", "float32")] + ([("B", "float32")] if b is not None else [])
    inits = ([("W", w)] if const_w else []) + ([("B", b)] if b is not None else [])
    feeds = {"X": x} if const_w else {"X": x, "W": w}
    return model(op, inputs, [("Y", "float32")], attrs=attrs, initializers=inits, opset=17, name="n0"), feeds


def _conv_config(rng):
    rank = int(rng.choice([1, 2, 2, 2, 3]))
    groups = int(rng.choice([1, 1, 1, 2, 3, 0]))
    cg = int(rng.choice([1, 2, 3, 4, 5, 8, 16, 17, 32]))
    mg = int(rng.choice([1, 2, 3, 8, 12, 13, 16, 24, 33]))
    if groups == 0:  # depthwise
        groups, cg, mg = int(rng.choice([3, 8, 16, 40])), 1, int(rng.choice([1, 1, 2]))
    k = [int(rng.choice([1, 1, 2, 3, 3, 5, 7])) for _ in range(rank)]
    s = [int(rng.choice([1, 1, 2, 3])) for _ in range(rank)]
    d = [int(rng.choice([1, 1, 1, 2])) for _ in range(rank)]
    sp = [int(rng.integers(1, 30 if rank < 3 else 9)) for _ in range(rank)]
    attrs = {"kernel_shape": k, "strides": s, "dilations": d, "group": groups}
    mode = rng.choice(["pads", "pads", "SAME_UPPER", "SAME_LOWER", "VALID"])
    ext = [(k[i] - 1) * d[i] + 1 for i in range(rank)]
    if mode == "pads":
        attrs["pads"] = [int(rng.integers(0, ext[i % rank])) for i in range(2 * rank)]
    else:
        attrs["auto_pad"] = str(mode)
    for i in range(rank):  # an input the window fits
        if mode == "pads":
            sp[i] = max(sp[i], ext[i] - attrs["pads"][i] - attrs["pads"][i + rank])
        elif mode == "VALID":
            sp[i] = max(sp[i], ext[i])
    n = int(rng.choice([1, 1, 2, 3]))
    x = rng.standard_normal([n, groups * cg] + sp).astype(np.float32)
    w = (rng.standard_normal([groups * mg, cg] + k) / np.sqrt(cg * np.prod(k))).astype(np.float32)
    b = rng.standard_normal(groups * mg).astype(np.float32) if rng.integers(0, 2) else None
    return x, w, b, attrs, cg * int(np.prod(k))


def _convt_config(rng):
    rank = int(rng.choice([1, 2, 2, 3]))
    groups = int(rng.choice([1, 1, 2, 3]))
    cg = int(rng.choice([1, 2, 3, 8, 16, 17]))
    mg = int(rng.choice([1, 2, 4, 8, 13, 16]))
    if rng.integers(0, 6) == 0:
        groups, cg, mg = int(rng.choice([4, 8, 16])), 1, 1
    k = [int(rng.choice([1, 2, 3, 4, 5])) for _ in range(rank)]
    s = [int(rng.choice([1, 2, 2, 3])) for _ in range(rank)]
    d = [int(rng.choice([1, 1, 2])) for _ in range(rank)]
    sp = [int(rng.integers(1, 16 if rank < 3 else 6)) for _ in range(rank)]
    attrs = {"kernel_shape": k, "strides": s, "dilations": d, "group": groups}
    full = [s[i] * (sp[i] - 1) + (k[i] - 1) * d[i] + 1 for i in range(rank)]
    mode = rng.choice(["pads", "pads", "SAME_UPPER", "SAME_LOWER", "output_shape", "VALID"])
    if mode == "pads":
        attrs["pads"] = [int(rng.integers(0, k[i % rank])) for i in range(2 * rank)]
        if rng.integers(0, 2):
            attrs["output_padding"] = [int(rng.integers(0, max(s[i], d[i]))) for i in range(rank)]
    elif mode == "output_shape":
        attrs["output_shape"] = [max(1, full[i] - int(rng.integers(0, 3)) + int(rng.integers(0, s[i])))
                                 for i in range(rank)]
    elif mode == "VALID":
        attrs["auto_pad"] = "VALID"
    else:
        attrs["auto_pad"] = str(mode)
        # onnxruntime clamps a negative SAME total (see the module docstring).
        for i in range(rank):
            if full[i] < sp[i] * s[i]:
                k[i] = s[i]
        attrs["kernel_shape"] = k
    n = int(rng.choice([1, 2]))
    x = rng.standard_normal([n, groups * cg] + sp).astype(np.float32)
    w = (rng.standard_normal([groups * cg, mg] + k) / np.sqrt(cg * np.prod(k))).astype(np.float32)
    b = rng.standard_normal(groups * mg).astype(np.float32) if rng.integers(0, 2) else None
    return x, w, b, attrs, cg * int(np.prod(k))


@pytest.mark.parametrize("op,make", [("Conv", _conv_config), ("ConvTranspose", _convt_config)], ids=["Conv", "ConvTranspose"])
def test_random_geometries_against_onnxruntime(op, make):
    rng = np.random.default_rng(20261206)
    compared = 0
    for i in range(CASES):
        x, w, b, attrs, k = make(rng)
        const_w = bool(rng.integers(0, 4))
        level = LEVELS[i % len(LEVELS)]
        threads = 1 + i % 2
        m, feeds = _build(op, x, w, b, attrs, const_w)
        want = _ort(m.SerializeToString(), feeds)
        if want is None:
            continue
        (got,) = session(m, level, threads).run(None, feeds)
        what = f"case {i}: {op} x{list(x.shape)} w{list(w.shape)} bias {b is not None} {attrs} {level} {threads}t"
        assert got.shape == want.shape, what
        bound = 2e-5 * np.sqrt(k) * max(1.0, float(np.abs(want).max(initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=0, atol=bound, err_msg=what)
        compared += 1
    assert compared >= CASES * 3 // 4, f"onnxruntime ran only {compared} of {CASES} configurations"
