"""GRU against a float64 numpy reference written here (every attribute of
the schema, ONNX Runtime's conventions where the specification is silent),
against onnx.reference's GRU where it covers the node (default
activations, no clip, no sequence_lens) and against onnxruntime (layout 0,
which is all it takes): every SIMD level, linear_before_reset 0 and 1,
forward, reverse and bidirectional, sizes around the vector tails, constant
and fed weights, every optional input and output, 1 and 2 threads through
each way the kernel shares work; errors naming the node for bad input."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest
from helpers import LEVELS
from recurrent import (
    activation_functions,
    assert_close,
    check_outputs,
    feature_case,
    olc_session,
    ort_covers,
    recurrent_case,
    reference_h_only,
    run_olc,
    tuned,
    with_array,
    with_attributes,
    with_initializers_from,
)

import olc_core
from olc_core import testing

KERNEL = "olc_matmul::GRU"
NODE = "gru0"
OUTPUTS = ("Y", "Y_h")


def reference_gru(X, W, R, B=None, seq_lens=None, h0=None, direction="forward", activations=None, alphas=(),
                  betas=(), clip=None, linear_before_reset=0, layout=0):
    """Y, Y_h in float64, one batch row and step at a time, gates z, r, h.
    A row of length 0 ends with a zero Y_h and the reverse direction runs
    each row from its own last step back (ONNX Runtime's choices); clip
    applies to every gate's pre-activation."""
    def f64(a):
        return None if a is None else np.asarray(a, np.float64)
    X, W, R, B, h0 = map(f64, (X, W, R, B, h0))
    D, G, _ = W.shape
    H = G // 3
    funcs = activation_functions(activations or ["Sigmoid", "Tanh"] * D, alphas, betas)
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    wb, rb = (B[:, :G], B[:, G:]) if B is not None else (np.zeros((D, G)), np.zeros((D, G)))

    def step(d, x, ht):
        f, g = funcs[2 * d:2 * d + 2]
        wz, wr, wh = np.split(W[d], 3)
        rz, rr, rh = np.split(R[d], 3)
        wbz, wbr, wbh = np.split(wb[d], 3)
        rbz, rbr, rbh = np.split(rb[d], 3)
        z = f(cl(wz @ x + rz @ ht + wbz + rbz))
        r = f(cl(wr @ x + rr @ ht + wbr + rbr))
        if linear_before_reset:
            cand = g(cl(wh @ x + r * (rh @ ht + rbh) + wbh))
        else:
            cand = g(cl(wh @ x + rh @ (r * ht) + rbh + wbh))
        return (1.0 - z) * cand + z * ht

    return reference_h_only(X, seq_lens, h0, direction, D, H, layout, step)


def gru_case(S, Bt, In, H, direction="forward", **kw):
    return recurrent_case("GRU", S, Bt, In, H, direction, node=NODE, **kw)


def reference_outputs(arrays, direction, attrs=None, outputs=OUTPUTS, layout=0):
    attrs = attrs or {}
    full = reference_gru(arrays["X"], arrays["W"], arrays["R"], arrays["B"], arrays["sequence_lens"],
                         arrays["initial_h"], direction, attrs.get("activations"), attrs.get("activation_alpha", ()),
                         attrs.get("activation_beta", ()), attrs.get("clip"), attrs.get("linear_before_reset", 0),
                         layout)
    return [r for r, n in zip(full, outputs) if n]


def check_against_oracles(m, feeds, arrays, level, direction, what, *, attrs=None, outputs=OUTPUTS, layout=0,
                          threads=1, opset=14):
    attrs = attrs or {}
    want = reference_outputs(arrays, direction, attrs, outputs, layout)
    # onnx.reference's GRU has only the default activations and ignores
    # clip and sequence_lens; onnxruntime's from opset 7.
    plain = not ({"clip", "activations", "activation_alpha", "activation_beta"} & set(attrs))
    return check_outputs(m, feeds, want, level, KERNEL, what, outputs=outputs, threads=threads,
                         onnx_reference=plain and arrays["sequence_lens"] is None and opset >= 7,
                         onnxruntime=ort_covers(m, layout) and opset >= 7)


# ------------------------------------------------------------ sizes and directions

HIDDEN = (1, 5, 33, 128)


@pytest.mark.parametrize("linear_before_reset", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("level", LEVELS)
def test_sizes(level, direction, linear_before_reset):
    """Hidden sizes around every level's vector width, batch 1 and 3, one
    and five steps, input sizes 1 and 16; W, R and B constant or fed, B
    and initial_h present or not, in rotation."""
    attrs = {"linear_before_reset": linear_before_reset}
    for n, (H, Bt, S) in enumerate(itertools.product(HIDDEN, (1, 3), (1, 5))):
        In = (1, 16)[n % 2]
        const = ("W", "R", "B") if n % 3 != 1 else ()
        bias, h0 = n % 4 != 1, n % 3 != 2
        m, feeds, arrays = gru_case(S, Bt, In, H, direction, seed=n, const=const, bias=bias, h0=h0, attrs=attrs)
        check_against_oracles(m, feeds, arrays, level, direction,
                              f"lbr{linear_before_reset} {direction} S{S} B{Bt} In{In} H{H} const={const}",
                              attrs=attrs)


# ------------------------------------------------------------ attributes and optional inputs

ACTIVATION_SETS = [
    # (f, g, alphas, betas): every function, with and without explicit
    # alphas and betas, names in any case.
    (["HardSigmoid", "Affine"], [0.25, 0.7], [0.45, 0.1]),
    (["Relu", "Tanh"], [], []),
    (["LeakyRelu", "ThresholdedRelu"], [0.3, 0.2], []),
    (["ScaledTanh", "Elu"], [0.9, 0.8], [1.5]),
    (["Softsign", "Softplus"], [], []),
    (["sigmoid", "tanh"], [], []),
    (["HardSigmoid", "Elu"], [], []),
]
FEATURES = ["sequence_lens", "clip", "activations", "layout", "no_hidden_size", "saturated"]
SHAPES = [(5, 3, 7, 5), (5, 3, 16, 33), (1, 1, 7, 16), (4, 2, 1, 17)]


@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize("level", LEVELS)
def test_features(level, feature):
    for n, ((S, Bt, In, H), direction) in enumerate(itertools.product(SHAPES, ["forward", "reverse", "bidirectional"])):
        kw, attrs, layout = feature_case(feature, S, Bt, direction, n, ACTIVATION_SETS)
        attrs["linear_before_reset"] = n % 2
        kw.setdefault("seed", zlib.crc32(f"{feature}/{n}".encode()))
        m, feeds, arrays = gru_case(S, Bt, In, H, direction, attrs=attrs, layout=layout, **kw)
        check_against_oracles(m, feeds, arrays, level, direction, f"{feature} {direction} S{S} B{Bt} In{In} H{H}",
                              attrs=attrs, layout=layout, threads=1 + n % 2)


@pytest.mark.parametrize("outputs", [("Y",), ("", "Y_h")])
def test_optional_outputs(outputs):
    for level, (direction, lens), lbr in itertools.product(LEVELS, [("forward", None), ("bidirectional", [4, 0, 2])],
                                                           (0, 1)):
        attrs = {"linear_before_reset": lbr}
        m, feeds, arrays = gru_case(4, 3, 7, 9, direction, seq_lens=lens, outputs=outputs, attrs=attrs)
        got, _ = check_against_oracles(m, feeds, arrays, level, direction, f"outputs {outputs}", outputs=outputs,
                                       attrs=attrs)
        assert len(got) == 1


@pytest.mark.parametrize("level", LEVELS)
def test_empty_sequence_and_batch(level):
    """No steps: Y empty, Y_h zero; no rows: every output empty."""
    for S, Bt, direction in [(0, 2, "forward"), (0, 1, "bidirectional"), (3, 0, "reverse")]:
        for const in (("W", "R", "B"), ()):
            m, feeds, arrays = gru_case(S, Bt, 4, 5, direction, const=const)
            got, _ = run_olc(m, feeds, level, KERNEL)
            for g, w, name in zip(got, reference_outputs(arrays, direction), OUTPUTS):
                assert_close(g, w, f"empty S{S} B{Bt} {direction} {name}")


# ------------------------------------------------------------ threads

@pytest.fixture
def gru_parallel_at_any_size():
    with tuned("GRU", split_min_macs=0, step_min_macs=0):
        yield


@pytest.mark.parametrize("level", LEVELS)
def test_two_threads(level, gru_parallel_at_any_size):
    cases = [
        # (S, Bt, In, H, direction, seq_lens, the way the work is shared)
        (5, 3, 7, 33, "bidirectional", None, "split"),
        (6, 5, 9, 17, "forward", [6, 0, 3, 6, 1], "split"),
        (5, 1, 7, 40, "forward", None, "step-parallel"),
        (3, 1, 16, 33, "reverse", None, "step-parallel"),
    ]
    for n, (S, Bt, In, H, direction, lens, mode) in enumerate(cases):
        for const, lbr in itertools.product((("W", "R", "B"), ()), (0, 1)):
            attrs = {"linear_before_reset": lbr}
            m, feeds, arrays = gru_case(S, Bt, In, H, direction, seed=n, seq_lens=lens, const=const, attrs=attrs)
            _, s = check_against_oracles(m, feeds, arrays, level, direction, f"threads {mode} {direction} lbr{lbr}",
                                         attrs=attrs, threads=2)
            assert mode in s.kernel_usage_details()[0]


# ------------------------------------------------------------ memory bounds

@pytest.mark.parametrize("at", ["end", "start"])
def test_inputs_against_guard_pages(at):
    for n, ((S, Bt, In, H, direction), lbr) in enumerate(itertools.product(
            [(3, 2, 7, 5, "bidirectional"), (2, 1, 9, 33, "reverse"), (1, 1, 17, 16, "forward")], (0, 1))):
        attrs = {"linear_before_reset": lbr}
        m, feeds, arrays = gru_case(S, Bt, In, H, direction, seed=n, const=(), seq_lens=[S] * Bt, attrs=attrs)
        want = reference_outputs(arrays, direction, attrs)
        guarded = {k: testing.guarded(v, at=at) for k, v in feeds.items()}
        for level, got in testing.run_on_every_level(m, guarded, expected_kernel=KERNEL).items():
            for g, w, name in zip(got, want, OUTPUTS):
                assert_close(g, w, f"guarded {at} {level} {direction} H{H} lbr{lbr} {name}")


# ------------------------------------------------------------ registration and packing

@pytest.mark.parametrize("lbr", [0, 1])
def test_constant_weights_prepacked(lbr):
    """W and R packed once at creation (R in its z, r and h parts without
    linear_before_reset) and the native kernel in the plan."""
    m, _, _ = gru_case(1, 1, 128, 128, attrs={"linear_before_reset": lbr})
    s = olc_session(m, LEVELS[-1])
    (entry,) = s.kernel_plan()
    assert entry.native and entry.kernel == KERNEL
    assert entry.prepacked_bytes >= 2 * 3 * 128 * 128 * 4


@pytest.mark.parametrize("opset", [1, 3, 7, 13, 14, 22])
def test_opsets(opset):
    attrs = {"output_sequence": 1} if opset < 7 else {}
    if opset >= 3:
        attrs["linear_before_reset"] = 1
    m, feeds, arrays = gru_case(3, 2, 5, 6, "forward", attrs=attrs, opset=opset)
    check_against_oracles(m, feeds, arrays, LEVELS[-1], "forward", f"opset {opset}", attrs=attrs, opset=opset)


# ------------------------------------------------------------ errors

ERRORS_AT_CREATION = [
    ({"const": ("W",)}, with_array("W", np.ones((1, 24, 5), np.float32)),
     r"input W has shape \[1, 24, 5\]; direction 'forward' and hidden_size 6 take "
     r"\[num_directions, 3 \* hidden_size, input_size\] = \[1, 18, \*\]"),
    ({"const": ("R",)}, with_array("R", np.ones((1, 18, 5), np.float32)), r"input R has shape \[1, 18, 5\]"),
    ({"const": ("B",)}, with_array("B", np.ones((1, 18), np.float32)),
     r"input B has shape \[1, 18\]; .* take \[num_directions, 6 \* hidden_size\] = \[1, 36\]"),
    ({"const": ("W",), "direction": "bidirectional"}, with_array("W", np.ones((1, 18, 5), np.float32)),
     r"input W has shape \[1, 18, 5\]; direction 'bidirectional'"),
]


@pytest.mark.parametrize("case", range(len(ERRORS_AT_CREATION)))
def test_bad_constant_inputs_at_creation(case):
    kw, edit, message = ERRORS_AT_CREATION[case]
    kw = dict(kw)
    direction = kw.pop("direction", "forward")
    m, _, arrays = gru_case(3, 2, 5, 6, direction, **kw)
    edit(arrays)
    with_initializers_from(m, arrays)
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*GRU.*{message}"):
        olc_core.Session(m, strict=True)


BAD_ATTRIBUTES = [
    ({"activations": ["Sigmoid", "Tanh", "Tanh"]}, r"'activations' lists 3 functions; direction 'forward' takes 2 "
                                                   r"\(f and g per direction\)"),
    ({"activations": ["Sigmoid", "Swish"]}, r"activation 'Swish' is not one of Relu, Tanh, Sigmoid"),
    ({"linear_before_reset": 2}, r"'linear_before_reset' must be 0 or 1, got 2"),
    ({"input_forget": 1}, r"unknown attribute 'input_forget'"),
    ({"clip": -1.0}, r"'clip' must be positive"),
    ({"layout": 2}, r"'layout' must be 0 or 1"),
]


@pytest.mark.parametrize("case", range(len(BAD_ATTRIBUTES)))
def test_bad_attributes(case):
    attrs, message = BAD_ATTRIBUTES[case]
    m, _, _ = gru_case(3, 2, 5, 6, "forward")
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*GRU.*{message}"):
        olc_core.Session(with_attributes(m, attrs), strict=True)


def test_linear_before_reset_is_not_in_opset_one():
    m, _, _ = gru_case(3, 2, 5, 6, "forward", attrs={"linear_before_reset": 1}, opset=1)
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*GRU.*unknown attribute 'linear_before_reset'"):
        olc_core.Session(m, strict=True)


BAD_FEEDS = [
    ("W", np.ones((1, 24, 5), np.float32),
     r"input W has shape \[1, 24, 5\]; direction 'forward', hidden_size 6 and input size 5 take"),
    ("R", np.ones((1, 18, 7), np.float32), r"input R has shape \[1, 18, 7\]"),
    ("B", np.ones((2, 36), np.float32), r"input B has shape \[2, 36\]"),
    ("initial_h", np.ones((1, 3, 6), np.float32), r"input initial_h has shape \[1, 3, 6\], expected \[1, 2, 6\]"),
    ("sequence_lens", np.array([3, -1], np.int32), r"sequence_lens\[1\] is -1, outside \[0, seq_length = 3\]"),
    ("sequence_lens", np.array([4, 1], np.int32), r"sequence_lens\[0\] is 4, outside \[0, seq_length = 3\]"),
]


@pytest.mark.parametrize("case", range(len(BAD_FEEDS)))
def test_bad_fed_inputs(case):
    name, value, message = BAD_FEEDS[case]
    m, feeds, _ = gru_case(3, 2, 5, 6, "forward", const=(), seq_lens=[3, 2], x_shape=False)
    for vi in m.graph.input:  # no declared shapes: the kernel sees them first
        vi.type.tensor_type.ClearField("shape")
    feeds[name] = value
    s = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*GRU.*{message}"):
        s.run(None, feeds)


def _node_suite_cases(module, prefix):
    """The ONNX node suite's cases of one of its modules (onnx.backend.test.
    case.node.<module>): defining a module's cases registers them in the
    suite's list, so only that module is imported (the whole suite, through
    load_model_tests, took 8 s to generate here, these about 1 s)."""
    import importlib
    import warnings

    import onnx.backend.test.case.node as suite

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # generating the cases evaluates numpy expressions that warn
        importlib.import_module(f"{suite.__name__}.{module}")
    return [c for c in suite._NodeTestCases if c.name.startswith(prefix)]


NODE_SUITE = _node_suite_cases("gru", "test_gru")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("case", NODE_SUITE, ids=[c.name for c in NODE_SUITE])
def test_onnx_node_suite_bounds_at_every_level(case, level):
    """The ONNX backend node suite's GRU cases at every SIMD level, held to
    the suite's own bound (rtol 1e-3, atol 1e-7): outputs near zero leave
    about a unit of the last place at 1. (AVX2's reciprocal estimate with
    one Newton step left two, and two of these cases failed there.)"""
    for inputs, outputs in case.data_sets:
        feeds = {vi.name: a for vi, a in zip(case.model.graph.input, inputs)}
        got, _ = run_olc(case.model, feeds, level, KERNEL)
        for g, w in zip(got, outputs):
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol, err_msg=f"{case.name} at {level}")
