"""RNN against a float64 numpy reference written here (every attribute of
the schema, ONNX Runtime's conventions where the specification is silent),
against onnx.reference's RNN where it covers the node (default
activation, no clip, no sequence_lens) and against onnxruntime (layout 0,
which is all it takes): every SIMD level, forward, reverse and
bidirectional, sizes around the vector tails, constant and fed weights,
every optional input and output, 1 and 2 threads; errors naming the node
for bad input."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest
from helpers import LEVELS
from olc_matmul.manifest import RNN_ACTIVATIONS
from onnx import numpy_helper
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
    with_attributes,
)

import olc_core
from olc_core import testing

KERNEL = "olc_matmul::RNN"
NODE = "rnn0"
OUTPUTS = ("Y", "Y_h")


def reference_rnn(X, W, R, B=None, seq_lens=None, h0=None, direction="forward", activations=None, alphas=(),
                  betas=(), clip=None, layout=0):
    """Y, Y_h in float64, H(t) = f(clip(W x + R H(t-1) + Wb + Rb)); a row
    of length 0 ends with a zero Y_h and the reverse direction runs each
    row from its own last step back (ONNX Runtime's choices)."""
    def f64(a):
        return None if a is None else np.asarray(a, np.float64)
    X, W, R, B, h0 = map(f64, (X, W, R, B, h0))
    D, H, _ = W.shape
    funcs = activation_functions(activations or ["Tanh"] * D, alphas, betas)
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    bias = B[:, :H] + B[:, H:] if B is not None else np.zeros((D, H))
    return reference_h_only(X, seq_lens, h0, direction, D, H, layout,
                            lambda d, x, ht: funcs[d](cl(W[d] @ x + R[d] @ ht + bias[d])))


def rnn_case(S, Bt, In, H, direction="forward", **kw):
    return recurrent_case("RNN", S, Bt, In, H, direction, node=NODE, **kw)


def reference_outputs(arrays, direction, attrs=None, outputs=OUTPUTS, layout=0):
    attrs = attrs or {}
    full = reference_rnn(arrays["X"], arrays["W"], arrays["R"], arrays["B"], arrays["sequence_lens"],
                         arrays["initial_h"], direction, attrs.get("activations"), attrs.get("activation_alpha", ()),
                         attrs.get("activation_beta", ()), attrs.get("clip"), layout)
    return [r for r, n in zip(full, outputs) if n]


def check_against_oracles(m, feeds, arrays, level, direction, what, *, attrs=None, outputs=OUTPUTS, layout=0,
                          threads=1, opset=14):
    attrs = attrs or {}
    want = reference_outputs(arrays, direction, attrs, outputs, layout)
    # onnx.reference's RNN (opsets 7 and 14) has Tanh and Affine only and
    # ignores clip and sequence_lens; onnxruntime's from opset 7, its RNN
    # (not its LSTM and GRU) taking activation names in their schema case
    # only.
    plain = not ({"clip", "activations", "activation_alpha", "activation_beta"} & set(attrs))
    ort_names = set(attrs.get("activations", ())) <= set(RNN_ACTIVATIONS)
    return check_outputs(m, feeds, want, level, KERNEL, what, outputs=outputs, threads=threads,
                         onnx_reference=plain and arrays["sequence_lens"] is None and opset >= 7,
                         onnxruntime=ort_covers(m, layout) and opset >= 7 and ort_names)


# ------------------------------------------------------------ sizes and directions

HIDDEN = (1, 5, 33, 50, 128)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("level", LEVELS)
def test_sizes(level, direction):
    """Hidden sizes around every level's vector width and panel groups,
    batch 1 and 3, one and five steps, input sizes 1 and 16; W, R and B
    constant or fed, B and initial_h present or not, in rotation."""
    for n, (H, Bt, S) in enumerate(itertools.product(HIDDEN, (1, 3), (1, 5))):
        In = (1, 16)[n % 2]
        const = ("W", "R", "B") if n % 3 != 1 else ()
        bias, h0 = n % 4 != 1, n % 3 != 2
        m, feeds, arrays = rnn_case(S, Bt, In, H, direction, seed=n, const=const, bias=bias, h0=h0)
        check_against_oracles(m, feeds, arrays, level, direction, f"{direction} S{S} B{Bt} In{In} H{H} const={const}")


ACTIVATIONS = [(["Relu"], [], []), (["Affine"], [0.7], [0.1]), (["LeakyRelu"], [0.3], []),
               (["ThresholdedRelu"], [0.2], []), (["ScaledTanh"], [0.9], [1.5]), (["HardSigmoid"], [], []),
               (["Elu"], [0.8], []), (["Softsign"], [], []), (["Softplus"], [], []), (["sigmoid"], [], [])]
FEATURES = ["sequence_lens", "clip", "activations", "layout", "no_hidden_size", "saturated"]
SHAPES = [(5, 3, 7, 5), (5, 3, 16, 33), (1, 1, 7, 16), (4, 2, 1, 17)]


@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize("level", LEVELS)
def test_features(level, feature):
    for n, ((S, Bt, In, H), direction) in enumerate(itertools.product(SHAPES, ["forward", "reverse", "bidirectional"])):
        kw, attrs, layout = feature_case(feature, S, Bt, direction, n, ACTIVATIONS)
        kw.setdefault("seed", zlib.crc32(f"{feature}/{n}".encode()))
        m, feeds, arrays = rnn_case(S, Bt, In, H, direction, attrs=attrs, layout=layout, **kw)
        check_against_oracles(m, feeds, arrays, level, direction, f"{feature} {direction} S{S} B{Bt} In{In} H{H}",
                              attrs=attrs, layout=layout, threads=1 + n % 2)


@pytest.mark.parametrize("outputs", [("Y",), ("", "Y_h")])
def test_optional_outputs(outputs):
    for level, (direction, lens) in itertools.product(LEVELS, [("forward", None), ("bidirectional", [4, 0, 2])]):
        m, feeds, arrays = rnn_case(4, 3, 7, 9, direction, seq_lens=lens, outputs=outputs)
        got, _ = check_against_oracles(m, feeds, arrays, level, direction, f"outputs {outputs}", outputs=outputs)
        assert len(got) == 1


@pytest.mark.parametrize("level", LEVELS)
def test_empty_sequence_and_batch(level):
    for S, Bt, direction in [(0, 2, "forward"), (0, 1, "bidirectional"), (3, 0, "reverse")]:
        m, feeds, arrays = rnn_case(S, Bt, 4, 5, direction)
        got, _ = run_olc(m, feeds, level, KERNEL)
        for g, w, name in zip(got, reference_outputs(arrays, direction), OUTPUTS):
            assert_close(g, w, f"empty S{S} B{Bt} {direction} {name}")


@pytest.fixture
def rnn_parallel_at_any_size():
    with tuned("RNN", split_min_macs=0, step_min_macs=0):
        yield


@pytest.mark.parametrize("level", LEVELS)
def test_two_threads(level, rnn_parallel_at_any_size):
    cases = [(5, 3, 7, 33, "bidirectional", None, "split"), (6, 5, 9, 17, "forward", [6, 0, 3, 6, 1], "split"),
             (5, 1, 7, 40, "forward", None, "step-parallel")]
    for n, (S, Bt, In, H, direction, lens, mode) in enumerate(cases):
        for const in (("W", "R", "B"), ()):
            m, feeds, arrays = rnn_case(S, Bt, In, H, direction, seed=n, seq_lens=lens, const=const)
            _, s = check_against_oracles(m, feeds, arrays, level, direction, f"threads {mode} {direction}", threads=2)
            assert mode in s.kernel_usage_details()[0]


@pytest.mark.parametrize("at", ["end", "start"])
def test_inputs_against_guard_pages(at):
    for n, (S, Bt, In, H, direction) in enumerate([(3, 2, 7, 5, "bidirectional"), (2, 1, 9, 33, "reverse"),
                                                   (1, 1, 17, 16, "forward")]):
        m, feeds, arrays = rnn_case(S, Bt, In, H, direction, seed=n, const=(), seq_lens=[S] * Bt)
        want = reference_outputs(arrays, direction)
        guarded = {k: testing.guarded(v, at=at) for k, v in feeds.items()}
        for level, got in testing.run_on_every_level(m, guarded, expected_kernel=KERNEL).items():
            for g, w, name in zip(got, want, OUTPUTS):
                assert_close(g, w, f"guarded {at} {level} {direction} H{H} {name}")


def test_constant_weights_prepacked():
    m, _, _ = rnn_case(1, 1, 64, 64)
    s = olc_session(m, LEVELS[-1])
    (entry,) = s.kernel_plan()
    assert entry.native and entry.kernel == KERNEL
    assert entry.prepacked_bytes >= 2 * 64 * 64 * 4


@pytest.mark.parametrize("opset", [1, 7, 14, 22])
def test_opsets(opset):
    attrs = {"output_sequence": 1} if opset < 7 else {}
    m, feeds, arrays = rnn_case(3, 2, 5, 6, "forward", attrs=attrs, opset=opset)
    check_against_oracles(m, feeds, arrays, LEVELS[-1], "forward", f"opset {opset}", attrs=attrs, opset=opset)


# ------------------------------------------------------------ errors

ERRORS_AT_CREATION = [
    ("W", np.ones((1, 18, 5), np.float32), "forward",
     r"input W has shape \[1, 18, 5\]; direction 'forward' and hidden_size 6 take "
     r"\[num_directions, hidden_size, input_size\] = \[1, 6, \*\]"),
    ("R", np.ones((1, 6, 5), np.float32), "forward", r"input R has shape \[1, 6, 5\]"),
    ("B", np.ones((1, 6), np.float32), "forward",
     r"input B has shape \[1, 6\]; .* take \[num_directions, 2 \* hidden_size\] = \[1, 12\]"),
    ("W", np.ones((1, 6, 5), np.float32), "bidirectional", r"input W has shape \[1, 6, 5\]; direction 'bidirectional'"),
]


@pytest.mark.parametrize("case", range(len(ERRORS_AT_CREATION)))
def test_bad_constant_inputs_at_creation(case):
    name, value, direction, message = ERRORS_AT_CREATION[case]
    m, _, _ = rnn_case(3, 2, 5, 6, direction, const=(name,))
    for init in m.graph.initializer:
        init.CopyFrom(numpy_helper.from_array(value, init.name))
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*RNN.*{message}"):
        olc_core.Session(m, strict=True)


BAD_ATTRIBUTES = [
    ({"activations": ["Tanh", "Tanh"]}, r"'activations' lists 2 functions; direction 'forward' takes 1 "
                                        r"\(f per direction\)"),
    ({"activations": ["Swish"]}, r"activation 'Swish' is not one of Relu, Tanh, Sigmoid"),
    ({"linear_before_reset": 1}, r"unknown attribute 'linear_before_reset'"),
    ({"direction": "sideways"}, r"'direction' is 'sideways', not one of forward, reverse, bidirectional"),
    ({"hidden_size": 0}, r"'hidden_size' must be positive"),
]


@pytest.mark.parametrize("case", range(len(BAD_ATTRIBUTES)))
def test_bad_attributes(case):
    attrs, message = BAD_ATTRIBUTES[case]
    m, _, _ = rnn_case(3, 2, 5, 6, "forward")
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*RNN.*{message}"):
        olc_core.Session(with_attributes(m, attrs), strict=True)


BAD_FEEDS = [
    ("W", np.ones((1, 7, 5), np.float32), r"input W has shape \[1, 7, 5\]; direction 'forward', hidden_size 6"),
    ("initial_h", np.ones((2, 2, 6), np.float32), r"input initial_h has shape \[2, 2, 6\], expected \[1, 2, 6\]"),
    ("sequence_lens", np.array([3, 9], np.int32), r"sequence_lens\[1\] is 9, outside \[0, seq_length = 3\]"),
    ("sequence_lens", np.array([3], np.int32), r"input sequence_lens has shape \[1\], expected \[batch_size\] = \[2\]"),
]


@pytest.mark.parametrize("case", range(len(BAD_FEEDS)))
def test_bad_fed_inputs(case):
    name, value, message = BAD_FEEDS[case]
    m, feeds, _ = rnn_case(3, 2, 5, 6, "forward", const=(), seq_lens=[3, 2], x_shape=False)
    for vi in m.graph.input:
        vi.type.tensor_type.ClearField("shape")
    feeds[name] = value
    s = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*RNN.*{message}"):
        s.run(None, feeds)
