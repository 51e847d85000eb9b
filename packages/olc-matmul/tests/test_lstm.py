"""LSTM against a float64 numpy reference written here (every attribute of
the schema, ONNX Runtime's conventions where the specification is silent),
against onnx.reference's LSTM where it covers the node (default
activations, no clip, no sequence_lens, no input_forget) and against
onnxruntime (layout 0, which is all it takes): every SIMD level, forward,
reverse and bidirectional, sizes around the vector tails, constant and fed
weights, every optional input and output, 1 and 2 threads through each way
the kernel shares work; errors naming the node for every bad input."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import onnxruntime as ort
import pytest
from helpers import LEVELS
from onnx import TensorProto, helper, numpy_helper
from recurrent import (
    activation_attributes,
    activation_functions,
    assert_close,
    check_outputs,
    olc_session,
    ort_covers,
    recurrent_case,
    tuned,
    with_array,
    with_attributes,
    with_initializers_from,
)
from recurrent import run_olc as run_recurrent

import olc_core
from olc_core import testing

KERNEL = "olc_matmul::LSTM"
NODE = "lstm0"

# ------------------------------------------------------------ the reference


def reference_lstm(X, W, R, B=None, seq_lens=None, h0=None, c0=None, P=None, direction="forward",
                   activations=None, alphas=(), betas=(), clip=None, input_forget=0, layout=0):
    """Y, Y_h, Y_c in float64, one batch row and step at a time. A row of
    length 0 ends with zero states (ONNX Runtime's choice); the reverse
    direction runs each row from its own last step back; the output gate's
    peephole reads C(t); clip applies to every gate's pre-activation,
    peephole included, not to C(t) before h."""
    def f64(a):
        return None if a is None else np.asarray(a, np.float64)
    X, W, R, B, h0, c0, P = map(f64, (X, W, R, B, h0, c0, P))
    if layout:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    S, Bt, _ = X.shape
    D, G, _ = W.shape
    H = G // 4
    funcs = activation_functions(activations or ["Sigmoid", "Tanh", "Tanh"] * D, alphas, betas)
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    Y = np.zeros((S, D, Bt, H))
    Y_h = np.zeros((D, Bt, H))
    Y_c = np.zeros((D, Bt, H))
    for d in range(D):
        reverse = direction == "reverse" or d == 1
        f, g, h = funcs[3 * d:3 * d + 3]
        bias = B[d, :G] + B[d, G:] if B is not None else np.zeros(G)
        p_i, p_o, p_f = np.split(P[d], 3) if P is not None else (np.zeros(H),) * 3
        for b in range(Bt):
            length = int(seq_lens[b]) if seq_lens is not None else S
            ht = h0[d, b] if h0 is not None else np.zeros(H)
            ct = c0[d, b] if c0 is not None else np.zeros(H)
            for s in range(length):
                t = length - 1 - s if reverse else s
                i, o, fg, cg = np.split(W[d] @ X[t, b] + R[d] @ ht + bias, 4)
                i = f(cl(i + p_i * ct))
                fg = 1.0 - i if input_forget else f(cl(fg + p_f * ct))
                c_new = fg * ct + i * g(cl(cg))
                o = f(cl(o + p_o * c_new))
                ht, ct = o * h(c_new), c_new
                Y[t, d, b] = ht
            if length > 0:
                Y_h[d, b], Y_c[d, b] = ht, ct
    if layout:
        return Y.transpose(2, 0, 1, 3), Y_h.transpose(1, 0, 2), Y_c.transpose(1, 0, 2)
    return Y, Y_h, Y_c


# ------------------------------------------------------------ models

OUTPUTS = ("Y", "Y_h", "Y_c")


def lstm_case(S, Bt, In, H, direction="forward", **kw):
    """(model, feeds, arrays): one LSTM node named NODE (recurrent_case)."""
    return recurrent_case("LSTM", S, Bt, In, H, direction, node=NODE, **kw)


def reference_outputs(arrays, direction, attrs=None, outputs=OUTPUTS, layout=0):
    attrs = attrs or {}
    full = reference_lstm(arrays["X"], arrays["W"], arrays["R"], arrays["B"], arrays["sequence_lens"],
                          arrays["initial_h"], arrays["initial_c"], arrays["P"], direction,
                          attrs.get("activations"), attrs.get("activation_alpha", ()), attrs.get("activation_beta", ()),
                          attrs.get("clip"), attrs.get("input_forget", 0), layout)
    return [r for r, n in zip(full, outputs) if n]


def run_olc(m, feeds, level, threads=1):
    return run_recurrent(m, feeds, level, KERNEL, threads)


def check_against_oracles(m, feeds, arrays, level, direction, what, *, attrs=None, outputs=OUTPUTS, layout=0,
                          threads=1, onnx_reference=None, onnxruntime=None):
    """olc against the float64 reference, and where they cover the node
    against onnx.reference and onnxruntime too (each also checked against
    the reference, so that it is the same function)."""
    attrs = attrs or {}
    want = reference_outputs(arrays, direction, attrs, outputs, layout)
    if onnx_reference is None:  # it has only the default activations and ignores these attributes
        plain = not ({"clip", "input_forget", "activations", "activation_alpha", "activation_beta"} & set(attrs))
        onnx_reference = plain and arrays["sequence_lens"] is None
    if onnxruntime is None:
        onnxruntime = ort_covers(m, layout)
    return check_outputs(m, feeds, want, level, KERNEL, what, outputs=outputs, threads=threads,
                         onnx_reference=onnx_reference, onnxruntime=onnxruntime)


# ------------------------------------------------------------ sizes and directions

HIDDEN = (1, 5, 16, 33, 128)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("level", LEVELS)
def test_sizes(level, direction):
    """Hidden sizes around every level's vector width, batch 1 and 3, one
    and five steps, input sizes 1, 7 and 16; W, R and B constant or fed,
    B and the initial states present or not, in rotation."""
    combos = list(itertools.product(HIDDEN, (1, 3), (1, 5)))
    for n, (H, Bt, S) in enumerate(combos):
        In = (1, 7, 16)[n % 3]
        const = ("W", "R", "B") if n % 2 == 0 else ()
        bias, states = n % 4 != 1, n % 3 != 2
        m, feeds, arrays = lstm_case(S, Bt, In, H, direction, seed=n, const=const, bias=bias, h0=states, c0=states)
        check_against_oracles(m, feeds, arrays, level, direction, f"{direction} S{S} B{Bt} In{In} H{H} const={const}")


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("level", LEVELS)
def test_one_row_constant_weights_at_every_panel_count(level, steps):
    """One row with W and R packed: 4H columns of 1 to 9 panels of every
    level's width, whole and partial (a group of four panels whose last one
    is partial was skipped once, leaving the gates of the step before).
    One step also runs the input projection as the GEMV over W's panels;
    three, the recurrent GEMV over R's from a state of the run itself.
    Each level, step count and size its own seed, so no stale gate from
    another run can pass (the work buffers are reused between runs)."""
    for H in (*range(1, 41), 47, 48, 63, 64, 72):
        seed = zlib.crc32(f"{level}/{steps}/{H}".encode())
        m, feeds, arrays = lstm_case(steps, 1, 8 if steps == 1 else 5, H, seed=seed, const=("W", "R", "B"))
        check_against_oracles(m, feeds, arrays, level, "forward", f"one row S{steps} H{H}", onnx_reference=False,
                              onnxruntime=False)


# ------------------------------------------------------------ attributes and optional inputs

ACTIVATION_SETS = [
    # (activations per direction, alphas, betas): every function, with and
    # without explicit alphas and betas, names in any case.
    (["Relu", "Tanh", "Sigmoid"], [], []),
    (["Affine", "LeakyRelu", "ThresholdedRelu"], [0.7, 0.3, 0.2], [0.1]),
    (["ScaledTanh", "HardSigmoid", "Elu"], [0.9, 0.25, 0.8], [1.5, 0.45]),
    (["Softsign", "Softplus", "Tanh"], [], []),
    (["sigmoid", "tanh", "tanh"], [], []),
    (["HardSigmoid", "Elu", "LeakyRelu"], [], []),
]

FEATURES = ["peepholes", "sequence_lens", "clip", "input_forget", "activations", "layout", "no_hidden_size",
            "saturated"]
SHAPES = [(5, 3, 7, 5), (5, 3, 16, 33), (1, 1, 7, 16), (4, 2, 1, 17)]


def feature_case(feature, S, Bt, In, H, direction, n):
    """(lstm_case kwargs, attrs, layout) of one feature on one shape."""
    kw, attrs = {}, {}
    layout = 0
    if feature == "peepholes":
        kw.update(peep=True, const=("W", "R", "B", "P") if n % 2 else ("W",))
    elif feature == "sequence_lens":
        # Every length from 0 to S, in turn; P and the states fed.
        kw.update(seq_lens=[(S - b - n) % (S + 1) for b in range(Bt)], peep=n % 2 == 0, const=("W", "R"))
    elif feature == "clip":
        attrs = {"clip": 0.6 + 0.3 * (n % 3)}
        kw.update(peep=n % 2 == 1, scale=3.0)
    elif feature == "input_forget":
        attrs = {"input_forget": 1} | ({"clip": 0.8} if n % 2 else {})
        kw.update(peep=True)
    elif feature == "activations":
        attrs = activation_attributes(ACTIVATION_SETS, direction, n)
        kw.update(scale=0.5)
    elif feature == "layout":
        layout = 1
        kw.update(peep=n % 2 == 0, seq_lens=[max(0, S - b) for b in range(Bt)] if n % 3 == 1 else None,
                  const=("W", "R", "B") if n % 2 else ())
    elif feature == "no_hidden_size":
        kw.update(hidden_attr=False, const=("R",) if n % 2 else ("W", "B"))
    elif feature == "saturated":
        # Pre-activations far outside [-10, 10]: sigmoid and tanh at their
        # limits, and Y_c growing large.
        kw.update(scale=40.0, peep=True)
    return kw, attrs, layout


@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize("level", LEVELS)
def test_features(level, feature):
    for n, ((S, Bt, In, H), direction) in enumerate(itertools.product(SHAPES, ["forward", "reverse", "bidirectional"])):
        kw, attrs, layout = feature_case(feature, S, Bt, In, H, direction, n)
        kw.setdefault("seed", zlib.crc32(f"{feature}/{n}".encode()))
        m, feeds, arrays = lstm_case(S, Bt, In, H, direction, attrs=attrs, layout=layout, **kw)
        check_against_oracles(m, feeds, arrays, level, direction, f"{feature} {direction} S{S} B{Bt} In{In} H{H}",
                              attrs=attrs, layout=layout, threads=1 + n % 2)


@pytest.mark.parametrize("outputs", [("Y",), ("", "Y_h"), ("", "", "Y_c"), ("Y", "", "Y_c"), ("", "Y_h", "Y_c")])
def test_optional_outputs(outputs):
    for level, (direction, lens) in itertools.product(LEVELS, [("forward", None), ("bidirectional", [4, 0, 2])]):
        m, feeds, arrays = lstm_case(4, 3, 7, 9, direction, seq_lens=lens, outputs=outputs, peep=True)
        got, _ = check_against_oracles(m, feeds, arrays, level, direction, f"outputs {outputs}", outputs=outputs)
        assert len(got) == sum(1 for n in outputs if n)


@pytest.mark.parametrize("level", LEVELS)
def test_empty_sequence_and_batch(level):
    """No steps: Y empty, Y_h and Y_c zero (every row has length 0); no
    rows: every output empty."""
    for S, Bt, direction in [(0, 2, "forward"), (0, 1, "bidirectional"), (3, 0, "reverse"), (0, 0, "forward")]:
        for const in (("W", "R", "B"), ()):
            m, feeds, arrays = lstm_case(S, Bt, 4, 5, direction, const=const, peep=True)
            got, _ = run_olc(m, feeds, level)
            for g, w, name in zip(got, reference_outputs(arrays, direction), OUTPUTS):
                assert_close(g, w, f"empty S{S} B{Bt} {direction} {name}")


# ------------------------------------------------------------ threads

@pytest.fixture
def lstm_parallel_at_any_size():
    """The kernel shares work between threads only above split_min_macs
    (whole directions and blocks of batch rows) and step_min_macs (one
    row's per-step product): at 0 these small cases take those paths."""
    with tuned("LSTM", split_min_macs=0, step_min_macs=0):
        yield


@pytest.mark.parametrize("level", LEVELS)
def test_two_threads(level, lstm_parallel_at_any_size):
    cases = [
        # (S, Bt, In, H, direction, seq_lens, the way the work is shared)
        (5, 3, 7, 33, "bidirectional", None, "split"),       # a direction per thread
        (6, 5, 9, 17, "forward", [6, 0, 3, 6, 1], "split"),  # blocks of rows
        (4, 7, 5, 16, "reverse", None, "split"),
        (5, 1, 7, 40, "forward", None, "step-parallel"),     # one row: each step's product
        (3, 1, 16, 33, "reverse", None, "step-parallel"),
    ]
    for n, (S, Bt, In, H, direction, lens, mode) in enumerate(cases):
        for const in (("W", "R", "B"), ()):
            m, feeds, arrays = lstm_case(S, Bt, In, H, direction, seed=n, seq_lens=lens, const=const, peep=n % 2 == 0)
            _, s = check_against_oracles(m, feeds, arrays, level, direction, f"threads {mode} {direction}",
                                         threads=2)
            assert mode in s.kernel_usage_details()[0]


@pytest.mark.parametrize("r_limit,mode", [(1 << 30, "split"), (1024, "step-parallel")])
def test_two_threads_split_only_while_a_direction_r_fits(lstm_parallel_at_any_size, r_limit, mode):
    """Directions split between threads only while one direction's R (as
    its steps read it) is within split_max_r_bytes (L2's size by default);
    beyond, each step's product is shared instead and the directions run
    one after the other."""
    with tuned("LSTM", split_max_r_bytes=r_limit):
        m, feeds, arrays = lstm_case(5, 1, 7, 40, "bidirectional", seed=11)  # R: 160 x 40 floats a direction
        _, s = check_against_oracles(m, feeds, arrays, LEVELS[-1], "bidirectional", f"R limit {r_limit}", threads=2)
        assert mode in s.kernel_usage_details()[0]


def test_two_threads_default_thresholds():
    """At the default thresholds: a long bidirectional run splits, a small
    step of one row stays on one thread."""
    level = LEVELS[-1]
    m, feeds, arrays = lstm_case(20, 4, 16, 64, "bidirectional", seed=3)
    _, s = check_against_oracles(m, feeds, arrays, level, "bidirectional", "default split", threads=2)
    assert "split" in s.kernel_usage_details()[0]
    m, feeds, arrays = lstm_case(1, 1, 128, 128, "forward", seed=4)
    _, s = check_against_oracles(m, feeds, arrays, level, "forward", "default serial", threads=2)
    assert "serial" in s.kernel_usage_details()[0]


# ------------------------------------------------------------ memory bounds

@pytest.mark.parametrize("at", ["end", "start"])
def test_inputs_against_guard_pages(at):
    """No read outside any input (vector tails of odd hidden and input
    sizes, the fed-weight products), at every level."""
    for n, (S, Bt, In, H, direction) in enumerate([(3, 2, 7, 5, "bidirectional"), (2, 1, 9, 33, "reverse"),
                                                   (1, 1, 17, 16, "forward")]):
        m, feeds, arrays = lstm_case(S, Bt, In, H, direction, seed=n, const=(), peep=True, seq_lens=[S] * Bt)
        want = reference_outputs(arrays, direction)
        guarded = {k: testing.guarded(v, at=at) for k, v in feeds.items()}
        for level, got in testing.run_on_every_level(m, guarded, expected_kernel=KERNEL).items():
            for g, w, name in zip(got, want, OUTPUTS):
                assert_close(g, w, f"guarded {at} {level} {direction} H{H} {name}")


# ------------------------------------------------------------ a voice detector's step

def vad_step_model(H=128, folded_weights=False):
    """The LSTM of the Silero VAD model: one step of one row, input and
    state [1, 1, 128] fed each run, W [1, 512, 128], R [1, 512, 128],
    B [1, 1024]; Y, Y_h and Y_c all read. folded_weights: W, R and B come
    from Unsqueeze nodes on 2-D initializers, as the exported model has
    them."""
    rng = np.random.default_rng(11)
    w = (rng.standard_normal((4 * H, H)) * 0.08).astype(np.float32)
    r = (rng.standard_normal((4 * H, H)) * 0.08).astype(np.float32)
    b = (rng.standard_normal(8 * H) * 0.1).astype(np.float32)
    nodes, inits = [], []
    if folded_weights:
        inits += [numpy_helper.from_array(w, "w2"), numpy_helper.from_array(r, "r2"),
                  numpy_helper.from_array(b, "b1"), numpy_helper.from_array(np.array([0], np.int64), "axis0")]
        nodes += [helper.make_node("Unsqueeze", [f"{k}", "axis0"], [k.upper()[0]], name=f"u_{k}")
                  for k in ("w2", "r2", "b1")]
    else:
        inits += [numpy_helper.from_array(w[None], "W"), numpy_helper.from_array(r[None], "R"),
                  numpy_helper.from_array(b[None], "B")]
    nodes.append(helper.make_node("LSTM", ["x", "W", "R", "B", "", "h", "c"], ["y", "y_h", "y_c"], name=NODE,
                                  hidden_size=H))
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1, H]) for n in ("x", "h", "c")]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "y_h", "y_c")]
    m = helper.make_model(helper.make_graph(nodes, "vad", ins, outs, inits),
                          opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("folded_weights", [False, True])
def test_vad_step_with_fed_state(folded_weights):
    """Ten steps, each run's Y_h and Y_c fed back as the next run's state,
    against onnxruntime doing the same."""
    m = vad_step_model(folded_weights=folded_weights)
    rng = np.random.default_rng(12)
    o = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for level in LEVELS:
        s = olc_session(m, level)
        (entry,) = [e for e in s.kernel_plan() if e.op_type == "LSTM"]
        assert entry.native and entry.kernel == KERNEL
        if not folded_weights:
            assert entry.prepacked_bytes >= 2 * 512 * 128 * 4  # W and R packed once
        h = c = h_ort = c_ort = np.zeros((1, 1, 128), np.float32)
        for step in range(10):
            x = (rng.standard_normal((1, 1, 128)) * 0.5).astype(np.float32)
            y, h, c = s.run(None, {"x": x, "h": h, "c": c})
            y_ort, h_ort, c_ort = o.run(None, {"x": x, "h": h_ort, "c": c_ort})
            assert KERNEL in s.kernel_usage()
            for got, want, name in ((y, y_ort, "Y"), (h, h_ort, "Y_h"), (c, c_ort, "Y_c")):
                assert_close(got, np.asarray(want, np.float64), f"{level} step {step} {name}", tol=5e-5)


# ------------------------------------------------------------ registration

@pytest.mark.parametrize("opset", [1, 7, 13, 14, 21, 22])
def test_opsets(opset):
    attrs = {"output_sequence": 1} if opset < 7 else {}
    m, feeds, arrays = lstm_case(3, 2, 5, 6, "forward", attrs=attrs, opset=opset, peep=True)
    got, _ = run_olc(m, feeds, LEVELS[-1])
    for g, w in zip(got, reference_outputs(arrays, "forward")):
        assert_close(g, w, f"opset {opset}")


def test_float64_is_not_claimed():
    m, _, _ = lstm_case(2, 1, 3, 4, "forward")
    for init in m.graph.initializer:
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float64), init.name))
    for vi in m.graph.input:
        vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    with pytest.raises(olc_core.OlcError, match=NODE):
        olc_core.Session(m, strict=True)


# ------------------------------------------------------------ errors

ERRORS_AT_CREATION = [
    # (lstm_case kwargs, how to change the arrays, expected message)
    ({"const": ("W",)}, with_array("W", np.ones((1, 20, 5), np.float32)),
     r"input W has shape \[1, 20, 5\]; direction 'forward' and hidden_size 6 take"),
    ({"const": ("R",)}, with_array("R", np.ones((1, 24, 5), np.float32)), r"input R has shape \[1, 24, 5\]"),
    ({"const": ("B",)}, with_array("B", np.ones((1, 24), np.float32)), r"input B has shape \[1, 24\]"),
    ({"const": ("P",), "peep": True}, with_array("P", np.ones((1, 12), np.float32)), r"input P has shape \[1, 12\]"),
    ({"const": ("W",), "direction": "bidirectional"}, with_array("W", np.ones((1, 24, 5), np.float32)),
     r"input W has shape \[1, 24, 5\]; direction 'bidirectional'"),
    ({"const": ("R",), "hidden_attr": False}, with_array("R", np.ones((1, 0, 0), np.float32)),
     r"hidden size of 0; it must be positive"),
]


@pytest.mark.parametrize("case", range(len(ERRORS_AT_CREATION)))
def test_bad_constant_inputs_at_creation(case):
    kw, edit, message = ERRORS_AT_CREATION[case]
    kw = dict(kw)
    direction = kw.pop("direction", "forward")
    m, _, arrays = lstm_case(3, 2, 5, 6, direction, **kw)
    edit(arrays)
    with_initializers_from(m, arrays)
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*LSTM.*{message}"):
        olc_core.Session(m, strict=True)


BAD_ATTRIBUTES = [
    ({"activations": ["Sigmoid", "Tanh"]}, r"'activations' lists 2 functions; direction 'forward' takes 3"),
    ({"activations": ["Sigmoid", "Swish", "Tanh"]}, r"activation 'Swish' is not one of Relu, Tanh, Sigmoid"),
    ({"direction": "sideways"}, r"'direction' is 'sideways', not one of forward, reverse, bidirectional"),
    ({"clip": 0.0}, r"'clip' must be positive"),
    ({"clip": -1.0}, r"'clip' must be positive"),
    ({"hidden_size": 0}, r"'hidden_size' must be positive"),
    ({"layout": 2}, r"'layout' must be 0 or 1"),
    ({"frobnicate": 1}, r"unknown attribute 'frobnicate'"),
]


@pytest.mark.parametrize("case", range(len(BAD_ATTRIBUTES)))
def test_bad_attributes(case):
    attrs, message = BAD_ATTRIBUTES[case]
    m, _, _ = lstm_case(3, 2, 5, 6, "forward")
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*LSTM.*{message}"):
        olc_core.Session(with_attributes(m, attrs), strict=True)


def test_bidirectional_takes_six_activations():
    m, _, _ = lstm_case(3, 2, 5, 6, "bidirectional", attrs={"activations": ["Sigmoid", "Tanh", "Tanh"]})
    with pytest.raises(olc_core.OlcError, match=rf"{NODE}.*lists 3 functions; direction 'bidirectional' takes 6"):
        olc_core.Session(m, strict=True)


def test_x_of_rank_two_at_creation():
    m, _, _ = lstm_case(3, 2, 5, 6, "forward")
    x = next(vi for vi in m.graph.input if vi.name == "X")
    x.CopyFrom(helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 10]))
    with pytest.raises(olc_core.OlcError, match=rf"{NODE}.*LSTM.*input X has rank 2, expected 3"):
        olc_core.Session(m, strict=True)


BAD_FEEDS = [
    # (feed name, value, expected message): all fed, found by run()
    ("X", np.ones((3, 2), np.float32), r"input X has shape \[3, 2\], expected rank 3"),
    ("W", np.ones((1, 24, 4), np.float32),
     r"input W has shape \[1, 24, 4\]; direction 'forward', hidden_size 6 and input size 5 take"),
    ("R", np.ones((1, 24, 7), np.float32), r"input R has shape \[1, 24, 7\]"),
    ("B", np.ones((1, 48, 1), np.float32), r"input B has shape \[1, 48, 1\], expected rank 2"),
    ("B", np.ones((2, 48), np.float32), r"input B has shape \[2, 48\]"),
    ("P", np.ones((1, 17), np.float32), r"input P has shape \[1, 17\]"),
    ("initial_h", np.ones((1, 3, 6), np.float32), r"input initial_h has shape \[1, 3, 6\], expected \[1, 2, 6\]"),
    ("initial_c", np.ones((2, 2, 6), np.float32), r"input initial_c has shape \[2, 2, 6\], expected \[1, 2, 6\]"),
    ("sequence_lens", np.array([3, -1], np.int32), r"sequence_lens\[1\] is -1, outside \[0, seq_length = 3\]"),
    ("sequence_lens", np.array([4, 1], np.int32), r"sequence_lens\[0\] is 4, outside \[0, seq_length = 3\]"),
    ("sequence_lens", np.array([3], np.int32), r"input sequence_lens has shape \[1\], expected \[batch_size\] = \[2\]"),
]


@pytest.mark.parametrize("case", range(len(BAD_FEEDS)))
def test_bad_fed_inputs(case):
    name, value, message = BAD_FEEDS[case]
    m, feeds, _ = lstm_case(3, 2, 5, 6, "forward", const=(), peep=True, seq_lens=[3, 2], x_shape=False)
    for vi in m.graph.input:  # no declared shapes: the kernel sees them first
        vi.type.tensor_type.ClearField("shape")
    feeds[name] = value
    s = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError, match=f"{NODE}.*LSTM.*{message}"):
        s.run(None, feeds)
