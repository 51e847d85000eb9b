"""com.microsoft DynamicQuantizeLSTM against a float64 numpy reference on
the dequantized weights (test_lstm.py's LSTM reference, fed W = (q - zero
point) * scale transposed to LSTM's layout) and against onnxruntime:
every SIMD level, forward, reverse and bidirectional, int8 and uint8
weights with nonzero zero points, scales and zero points per direction and
per column, constant and fed weights, every optional input, hidden sizes
around the vector tails, batch 1 and 3, both recurrent paths (the float R
and the int8 R's GEMV), 1 and 2 threads; errors naming the node."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest
from helpers import LEVELS
from onnx import TensorProto, helper, numpy_helper
from recurrent import assert_close, run_ort, tuned, with_attributes
from recurrent import run_olc as run_recurrent
from test_lstm import OUTPUTS, reference_lstm

import olc_core
from olc_core import testing

OP = "DynamicQuantizeLSTM"
KERNEL = f"olc_matmul::{OP}"
NODE = "dqlstm0"
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P", "W_scale", "W_zero_point", "R_scale",
          "R_zero_point")
WEIGHTS = ("W", "R", "B", "P", "W_scale", "W_zero_point", "R_scale", "R_zero_point")
ONNX_TYPE = {"int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "float32": TensorProto.FLOAT,
             "int32": TensorProto.INT32}


# ------------------------------------------------------------ models


def quantized_weight(rng, D, K, G, wtype, per_column, zero_points):
    """(codes [D, K, G], scale, zero point): codes spread over the type's
    range around the zero point, scaled so that the weights have a standard
    deviation near 1 / sqrt(K). zero_points: "any" (each direction or
    column its own), "ort" (what onnxruntime takes: per column, zero for
    int8 and one value per tensor for uint8) or "zero"."""
    shape = (D, G) if per_column else (D,)
    lo, hi = (-128, 127) if wtype == "int8" else (0, 255)
    mid = 0 if wtype == "int8" else 128
    if zero_points == "zero":
        zero = np.zeros(shape, np.int64)
    elif zero_points == "ort" and per_column:
        zero = np.full(shape, 0 if wtype == "int8" else int(rng.integers(120, 137)), np.int64)
    else:
        zero = mid + rng.integers(-6, 7, shape)
    zb = zero[:, None, :] if per_column else zero[:, None, None]
    codes = np.clip(zb + rng.integers(-100, 101, (D, K, G)), lo, hi)
    scale = np.full(shape, 1.0 / (58.0 * np.sqrt(K)))
    if per_column:
        scale = scale * rng.uniform(0.5, 1.5, shape)
    return codes.astype(wtype), scale.astype(np.float32), zero.astype(wtype)


def dequantized(codes, scale, zero):
    """float64 (q - zero point) * scale in LSTM's layout [D, G, K]."""
    q = codes.astype(np.float64)
    s, z = scale.astype(np.float64), zero.astype(np.float64)
    if s.ndim == 2:
        w = (q - z[:, None, :]) * s[:, None, :]
    else:
        w = (q - z[:, None, None]) * s[:, None, None]
    return w.transpose(0, 2, 1)


def dq_case(S, Bt, In, H, direction="forward", *, seed=0, wtype="int8", per_column=False, zero_points="any",
            const=WEIGHTS, bias=True, h0=True, c0=True, peep=False, seq_lens=None, attrs=None, outputs=OUTPUTS,
            scale=1.0, hidden_attr=True):
    """(model, feeds, arrays): one DynamicQuantizeLSTM node named NODE;
    inputs in `const` are initializers, the others graph inputs."""
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    G = 4 * H
    wq, ws, wz = quantized_weight(rng, D, In, G, wtype, per_column, zero_points)
    rq, rs, rz = quantized_weight(rng, D, H, G, wtype, per_column, zero_points)
    arrays = {
        "X": (rng.standard_normal((S, Bt, In)) * scale).astype(np.float32),
        "W": wq, "R": rq,
        "B": (rng.standard_normal((D, 8 * H)) * 0.5).astype(np.float32) if bias else None,
        "sequence_lens": None if seq_lens is None else np.asarray(seq_lens, np.int32),
        "initial_h": (rng.standard_normal((D, Bt, H)) * 0.5).astype(np.float32) if h0 else None,
        "initial_c": (rng.standard_normal((D, Bt, H)) * 0.5).astype(np.float32) if c0 else None,
        "P": (rng.standard_normal((D, 3 * H)) * 0.5).astype(np.float32) if peep else None,
        "W_scale": ws, "W_zero_point": wz, "R_scale": rs, "R_zero_point": rz,
    }
    names = [k if arrays[k] is not None else "" for k in INPUTS]
    a = {"direction": direction, **(attrs or {})}
    if hidden_attr:
        a["hidden_size"] = H
    node = helper.make_node(OP, names, list(outputs), name=NODE, domain="com.microsoft", **a)
    inits, vis, feeds = [], [], {}
    for k in INPUTS:
        v = arrays[k]
        if v is None:
            continue
        if k in const:
            inits.append(numpy_helper.from_array(v, k))
        else:
            vis.append(helper.make_tensor_value_info(k, ONNX_TYPE[str(v.dtype)], list(v.shape)))
            feeds[k] = v
    vo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs if n]
    m = helper.make_model(helper.make_graph([node], "g", vis, vo, inits),
                          opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m, feeds, arrays


def reference_outputs(arrays, direction, attrs=None, outputs=OUTPUTS):
    attrs = attrs or {}
    W = dequantized(arrays["W"], arrays["W_scale"], arrays["W_zero_point"])
    R = dequantized(arrays["R"], arrays["R_scale"], arrays["R_zero_point"])
    full = reference_lstm(arrays["X"], W, R, arrays["B"], arrays["sequence_lens"], arrays["initial_h"],
                          arrays["initial_c"], arrays["P"], direction, attrs.get("activations"),
                          attrs.get("activation_alpha", ()), attrs.get("activation_beta", ()), attrs.get("clip"),
                          attrs.get("input_forget", 0))
    return [r for r, n in zip(full, outputs) if n]


# ------------------------------------------------------------ running



@pytest.fixture(params=["float-R", "int8-R"])
def r_path(request):
    """Which product one row's recurrent step takes on a constant R: the
    GEMV over the float R, or over the int8 R (the default from the L2's
    size up), forced here at every size."""
    with tuned(OP, q8_gemv_min_bytes=0 if request.param == "int8-R" else 2**62):
        yield request.param


def run_olc(m, feeds, level, threads=1):
    got, s = run_recurrent(m, feeds, level, KERNEL, threads)
    (entry,) = s.kernel_plan()
    assert entry.native and entry.kernel == KERNEL, entry
    return got, s


def check(m, feeds, arrays, level, direction, what, *, attrs=None, outputs=OUTPUTS, threads=1):
    """olc against the float64 reference on the dequantized weights, within
    the LSTM tests' float32 bound 2e-5 (1 + |ref|)."""
    got, s = run_olc(m, feeds, level, threads)
    want = reference_outputs(arrays, direction, attrs, outputs)
    assert len(got) == len(want)
    for g, w, name in zip(got, want, [n for n in outputs if n]):
        assert g.dtype == np.float32
        assert_close(g, w, f"{what} {name}")
    return got, s


# ------------------------------------------------------------ sizes, types, directions

HIDDEN = (1, 5, 16, 33)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("level", LEVELS)
def test_sizes_and_types(level, direction, r_path):
    """Hidden sizes around each level's vector width, batch 1 and 3, one
    and four steps; int8 and uint8 codes, scales per direction and per
    column, in rotation; the weights constant or fed, B and the states
    present or not."""
    for n, (H, Bt, S) in enumerate(itertools.product(HIDDEN, (1, 3), (1, 4))):
        In = (1, 7, 16)[n % 3]
        wtype = ("int8", "uint8")[n % 2]
        per_column = n % 4 >= 2
        const = WEIGHTS if n % 3 != 1 else ()
        bias, states = n % 5 != 1, n % 3 != 2
        m, feeds, arrays = dq_case(S, Bt, In, H, direction, seed=n, wtype=wtype, per_column=per_column, const=const,
                                   bias=bias, h0=states, c0=states)
        _, s = check(m, feeds, arrays, level, direction,
                     f"{direction} S{S} B{Bt} In{In} H{H} {wtype} per_column={per_column} const={bool(const)}")
        detail = s.kernel_usage_details()[0]
        assert ("prepacked-R-int8" in detail) == bool(const), detail
        assert ("int8-R-gemv" in detail) == (bool(const) and Bt == 1 and r_path == "int8-R"), detail


@pytest.mark.parametrize("level", LEVELS)
def test_one_row_at_every_panel_count(level, r_path):
    """One row on the packed R: 4H columns of 1 to 9 panels of every
    level's width, whole and partial (a group of four panels whose last one
    is partial was once skipped), each size with its own seed."""
    for H in (3, 7, 8, 15, 16, 24, 31, 32, 47, 48, 63, 72):
        m, feeds, arrays = dq_case(2, 1, 5, H, "forward", seed=2000 + H, wtype="int8", per_column=True,
                                   const=WEIGHTS)
        _, s = check(m, feeds, arrays, level, "forward", f"one row H{H} {r_path}")
        assert ("int8-R-gemv" in s.kernel_usage_details()[0]) == (r_path == "int8-R")


FEATURES = ["peepholes", "sequence_lens", "clip", "input_forget", "activations", "no_hidden_size", "outputs"]


@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize("level", LEVELS)
def test_features(level, feature, r_path):
    for n, ((S, Bt, In, H), direction) in enumerate(itertools.product([(5, 3, 7, 5), (4, 1, 16, 33)],
                                                                      ["forward", "reverse", "bidirectional"])):
        kw, attrs, outputs = {}, {}, OUTPUTS
        if feature == "peepholes":
            kw.update(peep=True, const=WEIGHTS if n % 2 else ("W", "R", "W_scale", "W_zero_point", "R_scale",
                                                              "R_zero_point"))
        elif feature == "sequence_lens":
            kw.update(seq_lens=[(S - b - n) % (S + 1) for b in range(Bt)], peep=n % 2 == 0)
        elif feature == "clip":
            attrs = {"clip": 0.6 + 0.3 * (n % 3)}
            kw.update(scale=3.0)
        elif feature == "input_forget":
            attrs = {"input_forget": 1}
            kw.update(peep=True)
        elif feature == "activations":
            D = 2 if direction == "bidirectional" else 1
            attrs = {"activations": (["HardSigmoid", "Softsign", "LeakyRelu"], ["relu", "Tanh", "Elu"])[n % 2] * D,
                     "activation_alpha": [0.25, 0.05]}
        elif feature == "no_hidden_size":
            kw.update(hidden_attr=False)
        elif feature == "outputs":
            outputs = (("Y",), ("", "Y_h"), ("", "", "Y_c"), ("Y", "", "Y_c"))[n % 4]
        kw.update(wtype=("int8", "uint8")[n % 2], per_column=n % 3 == 0)
        m, feeds, arrays = dq_case(S, Bt, In, H, direction, seed=zlib.crc32(f"{feature}/{n}".encode()), attrs=attrs,
                                   outputs=outputs, **kw)
        check(m, feeds, arrays, level, direction, f"{feature} {direction} S{S} B{Bt} H{H}", attrs=attrs,
              outputs=outputs, threads=1 + n % 2)


# ------------------------------------------------------------ threads

@pytest.fixture
def parallel_at_any_size():
    with tuned(OP, split_min_macs=0, step_min_macs=0):
        yield


@pytest.mark.parametrize("level", LEVELS)
def test_two_threads(level, r_path, parallel_at_any_size):
    cases = [
        (5, 3, 7, 33, "bidirectional", "split"),
        (4, 1, 7, 40, "bidirectional", "split"),
        (5, 1, 9, 40, "forward", "step-parallel"),  # one row: each step's product on both threads
        (3, 1, 16, 33, "reverse", "step-parallel"),
    ]
    for n, (S, Bt, In, H, direction, mode) in enumerate(cases):
        m, feeds, arrays = dq_case(S, Bt, In, H, direction, seed=n, wtype=("int8", "uint8")[n % 2],
                                   per_column=n % 2 == 1, peep=True)
        _, s = check(m, feeds, arrays, level, direction, f"threads {mode} {direction}", threads=2)
        assert mode in s.kernel_usage_details()[0]


def test_recognizer_shape():
    """The ddddocr recognizer's layer (bidirectional, input 1024, hidden
    512, one row; fewer steps) at the default thresholds: the int8 R's
    GEMV, W and both R prepacked."""
    m, feeds, arrays = dq_case(6, 1, 1024, 512, "bidirectional", seed=5, zero_points="zero", per_column=False)
    for threads in (1, 2):
        _, s = check(m, feeds, arrays, LEVELS[-1], "bidirectional", f"recognizer t{threads}", threads=threads)
        detail = s.kernel_usage_details()[0]
        assert "int8-R-gemv" in detail, detail
        (entry,) = s.kernel_plan()
        # W and R as float panels, R's int8 codes: at least 4 + 4 + 1 bytes per weight.
        assert entry.prepacked_bytes >= 2 * (1024 + 512) * 2048 * 4 + 2 * 512 * 2048


# ------------------------------------------------------------ onnxruntime

# onnxruntime quantizes the activations (X, and H(t-1) at every step) to
# uint8 per tensor, a step of (max - min) / 255 (about 0.008 for H in
# [-1, 1]); each gate's pre-activation then moves by up to half a step
# times the row sum of |w|, and the recurrence carries it on. Over these
# few steps its outputs stay within 0.03 of the exact ones (olc's within
# 2e-5), so 0.04 + 0.01 |ref| bounds olc against it.
ORT_TOL = 0.04

# Without VNNI, onnxruntime multiplies uint8 activations by int8 weights
# with vpmaddubsw, which saturates each pair's sum to int16 (255 * 127 * 2
# exceeds 32767): on such a CPU (AVX2-only, or AVX-512 before VNNI) its
# outputs for int8 weights are off by far more than the quantization error
# (0.05-0.13 here), so it is no oracle for them there. olc is still held to
# the exact reference and to being at least as accurate.
ORT_EXACT_U8S8 = any(olc_core.simd.detected_cpu_features()[f] for f in ("avx512_vnni", "avx_vnni"))


@pytest.mark.parametrize("wtype", ["int8", "uint8"])
@pytest.mark.parametrize("per_column", [False, True], ids=["per-direction", "per-column"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_against_onnxruntime(direction, per_column, wtype):
    """Zero points that onnxruntime takes (nonzero per direction; per
    column only zero for int8, one value for uint8)."""
    level = LEVELS[-1]
    for n, (S, Bt, In, H, peep, lens) in enumerate([(5, 1, 16, 33, False, None), (4, 3, 7, 5, True, [4, 0, 2])]):
        m, feeds, arrays = dq_case(S, Bt, In, H, direction, seed=n, wtype=wtype, per_column=per_column,
                                   zero_points="ort", peep=peep, seq_lens=lens)
        got, _ = run_olc(m, feeds, level)
        want = reference_outputs(arrays, direction)
        for g, o, w, name in zip(got, run_ort(m, feeds), want, OUTPUTS):
            assert_close(g, w, f"ort case {name}")
            err_ort = np.abs(np.asarray(o, np.float64) - w)
            if wtype == "uint8" or ORT_EXACT_U8S8:
                assert not (err_ort > ORT_TOL * 0.75 * (1 + np.abs(w))).any(), f"{name}: onnxruntime {err_ort.max()}"
                assert_close(g, np.asarray(o, np.float64), f"{name} against onnxruntime", tol=ORT_TOL)
            # olc at least as accurate as onnxruntime
            assert np.abs(g - w).max() <= max(err_ort.max(), 1e-6)


# ------------------------------------------------------------ errors

def _replace(name, value):
    def edit(m):
        for init in m.graph.initializer:
            if init.name == name:
                init.CopyFrom(numpy_helper.from_array(np.asarray(value), name))
    return edit


ERRORS_AT_CREATION = [
    # (dq_case kwargs, edit of the model, expected message)
    ({}, _replace("W", np.ones((1, 5, 24), np.float32)), r"input W has type float32; DynamicQuantizeLSTM takes int8 or uint8"),
    ({}, _replace("R_zero_point", np.zeros((1,), np.uint8)), r"input R_zero_point has type uint8; it must have W's type int8"),
    ({"wtype": "uint8"}, _replace("W_zero_point", np.zeros((1,), np.int8)),
     r"input W_zero_point has type int8; it must have W's type uint8"),
    ({}, _replace("R", np.ones((1, 6, 24), np.uint8)), r"input R has type uint8; it must have W's type int8"),
    ({}, _replace("W", np.ones((1, 24, 5), np.int8)),
     r"input W has shape \[1, 24, 5\]; direction 'forward' and hidden_size 6 take \[num_directions, input_size, "
     r"4 \* hidden_size\]"),
    ({}, _replace("R", np.ones((1, 24, 6), np.int8)), r"input R has shape \[1, 24, 6\]; .* = \[1, 6, 24\]"),
    ({"direction": "bidirectional"}, _replace("R", np.ones((1, 6, 24), np.int8)),
     r"input R has shape \[1, 6, 24\]; direction 'bidirectional'"),
    ({}, _replace("B", np.ones((1, 24), np.float32)), r"input B has shape \[1, 24\]"),
    ({}, _replace("W_scale", np.ones((2,), np.float32)),
     r"input W_scale has shape \[2\]; .* take \[num_directions\] = \[1\] or \[num_directions, 4 \* hidden_size\] "
     r"= \[1, 24\]"),
    ({}, _replace("R_zero_point", np.zeros((1, 23), np.int8)), r"input R_zero_point has shape \[1, 23\]"),
    ({}, _replace("R_zero_point", np.zeros((1, 24), np.int8)),
     r"input R_zero_point has shape \[1, 24\], not its scale R_scale's \[1\]"),
    ({"per_column": True}, _replace("W_zero_point", np.zeros((1,), np.int8)),
     r"input W_zero_point has shape \[1\], not its scale W_scale's \[1, 24\]"),
]


@pytest.mark.parametrize("case", range(len(ERRORS_AT_CREATION)))
def test_bad_constant_inputs_at_creation(case):
    kw, edit, message = ERRORS_AT_CREATION[case]
    kw = dict(kw)
    direction = kw.pop("direction", "forward")
    m, _, _ = dq_case(3, 2, 5, 6, direction, **kw)
    edit(m)
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*{OP}.*{message}"):
        olc_core.Session(m, strict=True)


BAD_ATTRIBUTES = [
    ({"layout": 1}, r"unknown attribute 'layout'"),
    ({"activations": ["Sigmoid", "Tanh"]}, r"'activations' lists 2 functions; direction 'forward' takes 3"),
    ({"direction": "sideways"}, r"'direction' is 'sideways'"),
    ({"hidden_size": 0}, r"'hidden_size' must be positive"),
]


@pytest.mark.parametrize("case", range(len(BAD_ATTRIBUTES)))
def test_bad_attributes(case):
    attrs, message = BAD_ATTRIBUTES[case]
    m, _, _ = dq_case(3, 2, 5, 6, "forward")
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*{OP}.*{message}"):
        olc_core.Session(with_attributes(m, attrs), strict=True)


def test_too_few_inputs():
    m, _, _ = dq_case(3, 2, 5, 6, "forward")
    del m.graph.node[0].input[9:]
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*{OP}.*takes 12 inputs"):
        olc_core.Session(m, strict=True)


BAD_FEEDS = [
    # (feed name, value, expected message): weights fed, found by run()
    ("W", np.ones((1, 4, 24), np.int8), r"input W has shape \[1, 4, 24\]; .* input size 5 take"),
    ("R", np.ones((1, 6, 20), np.int8), r"input R has shape \[1, 6, 20\]"),
    ("R_scale", np.ones((1, 2), np.float32), r"input R_scale has shape \[1, 2\]"),
    ("W_zero_point", np.zeros((1, 24), np.int8), r"input W_zero_point has shape \[1, 24\], not its scale"),
    ("initial_h", np.ones((1, 3, 6), np.float32), r"input initial_h has shape \[1, 3, 6\], expected \[1, 2, 6\]"),
]


@pytest.mark.parametrize("case", range(len(BAD_FEEDS)))
def test_bad_fed_inputs(case):
    name, value, message = BAD_FEEDS[case]
    m, feeds, _ = dq_case(3, 2, 5, 6, "forward", const=())
    for vi in m.graph.input:  # no declared shapes: the kernel sees them first
        vi.type.tensor_type.ClearField("shape")
    feeds[name] = value
    s = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*{OP}.*{message}"):
        s.run(None, feeds)


# ------------------------------------------------------------ memory bounds

@pytest.mark.parametrize("at", ["end", "start"])
def test_inputs_against_guard_pages(at):
    """No read outside any fed input (the codes, scales and zero points
    dequantized per run, the vector tails), at every level."""
    for n, (S, Bt, In, H, direction, per_column) in enumerate([(3, 2, 7, 5, "bidirectional", True),
                                                                (2, 1, 9, 33, "reverse", False)]):
        m, feeds, arrays = dq_case(S, Bt, In, H, direction, seed=n, const=(), peep=True, seq_lens=[S] * Bt,
                                   wtype=("int8", "uint8")[n], per_column=per_column)
        want = reference_outputs(arrays, direction)
        guarded = {k: testing.guarded(v, at=at) for k, v in feeds.items()}
        for level, got in testing.run_on_every_level(m, guarded, expected_kernel=KERNEL).items():
            for g, w, name in zip(got, want, OUTPUTS):
                assert_close(g, w, f"guarded {at} {level} {direction} H{H} {name}")
