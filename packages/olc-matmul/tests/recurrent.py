"""What the LSTM, GRU, RNN and DynamicQuantizeLSTM tests share: the
activation functions with ONNX Runtime's alpha/beta conventions, a model
builder for any of the three ONNX ops, sessions on olc and onnxruntime,
and the error bound against the float64 references that each op's test
module writes."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import olc_core
import olc_core.tuning as tuning

NODE = "rnn0"
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OUTPUTS = {"LSTM": ("Y", "Y_h", "Y_c"), "GRU": ("Y", "Y_h"), "RNN": ("Y", "Y_h")}


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


ACTIVATIONS = {
    "relu": lambda x, a, b: np.maximum(x, 0.0),
    "tanh": lambda x, a, b: np.tanh(x),
    "sigmoid": lambda x, a, b: _sigmoid(x),
    "affine": lambda x, a, b: a * x + b,
    "leakyrelu": lambda x, a, b: np.where(x >= 0, x, a * x),
    "thresholdedrelu": lambda x, a, b: np.where(x > a, x, 0.0),
    "scaledtanh": lambda x, a, b: a * np.tanh(b * x),
    "hardsigmoid": lambda x, a, b: np.clip(a * x + b, 0.0, 1.0),
    "elu": lambda x, a, b: np.where(x >= 0, x, a * (np.exp(np.minimum(x, 0.0)) - 1.0)),
    "softsign": lambda x, a, b: x / (1.0 + np.abs(x)),
    "softplus": lambda x, a, b: np.logaddexp(0.0, x),
}
# ONNX Runtime's defaults where activation_alpha / activation_beta run out
# (0 for every other function), and which functions take an alpha, a beta.
DEFAULT_ALPHA_BETA = {"leakyrelu": (0.01, 0.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, 0.0)}
TAKES_ALPHA = {"affine", "leakyrelu", "thresholdedrelu", "scaledtanh", "hardsigmoid", "elu"}
TAKES_BETA = {"affine", "scaledtanh", "hardsigmoid"}


def activation_functions(names, alphas=(), betas=()):
    """One float64 function per name, alphas and betas consumed in order by
    the functions that take one (ONNX Runtime's reading)."""
    alphas, betas = list(alphas), list(betas)
    funcs = []
    for n in (name.lower() for name in names):
        a, b = DEFAULT_ALPHA_BETA.get(n, (0.0, 0.0))
        if n in TAKES_ALPHA and alphas:
            a = alphas.pop(0)
        if n in TAKES_BETA and betas:
            b = betas.pop(0)
        funcs.append(lambda x, fn=ACTIVATIONS[n], a=a, b=b: fn(x, a, b))
    return funcs


def recurrent_case(op, S, Bt, In, H, direction="forward", *, seed=0, const=("W", "R", "B", "P"), bias=True, h0=True,
                   c0=True, peep=False, seq_lens=None, attrs=None, outputs=None, layout=0, opset=14, scale=1.0,
                   hidden_attr=True, x_shape=True, node=NODE):
    """(model, feeds, arrays): one `op` node named `node`; inputs in `const`
    are initializers, the others graph inputs; an output named "" is
    omitted. c0 and peep apply to LSTM only."""
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    gates = GATES[op]
    outputs = OUTPUTS[op] if outputs is None else outputs
    x_dims = (Bt, S, In) if layout else (S, Bt, In)
    state_dims = (Bt, D, H) if layout else (D, Bt, H)
    arrays = {
        "X": rng.standard_normal(x_dims) * scale,
        "W": rng.standard_normal((D, gates * H, In)) / np.sqrt(max(In, 1)),
        "R": rng.standard_normal((D, gates * H, H)) / np.sqrt(H),
        "B": rng.standard_normal((D, 2 * gates * H)) * 0.5 if bias else None,
        "sequence_lens": None if seq_lens is None else np.asarray(seq_lens, np.int32),
        "initial_h": rng.standard_normal(state_dims) * 0.5 if h0 else None,
    }
    if op == "LSTM":
        arrays["initial_c"] = rng.standard_normal(state_dims) * 0.5 if c0 else None
        arrays["P"] = rng.standard_normal((D, 3 * H)) * 0.5 if peep else None
    arrays = {k: None if v is None else (v if v.dtype == np.int32 else v.astype(np.float32)) for k, v in arrays.items()}
    names = [k if v is not None else "" for k, v in arrays.items()]
    while names and not names[-1]:
        names.pop()
    a = {"direction": direction, **(attrs or {})}
    if hidden_attr:
        a["hidden_size"] = H
    if layout:
        a["layout"] = layout
    n = helper.make_node(op, names, list(outputs), name=node, **a)
    inits, vis, feeds = [], [], {}
    for k, v in arrays.items():
        if v is None:
            continue
        if k in const:
            inits.append(numpy_helper.from_array(v, k))
        else:
            elem = TensorProto.INT32 if k == "sequence_lens" else TensorProto.FLOAT
            vis.append(helper.make_tensor_value_info(k, elem, list(v.shape) if k != "X" or x_shape else None))
            feeds[k] = v
    vo = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o]
    g = helper.make_graph([n], "g", vis, vo, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m, feeds, arrays


def olc_session(m, level, threads=1):
    with olc_core.simd_cap(level):
        return olc_core.Session(m, threads=threads, strict=True, record_usage=True)


def run_olc(m, feeds, level, kernel, threads=1):
    """olc's outputs and session, checked to have run `kernel` at `level`."""
    s = olc_session(m, level, threads)
    got = s.run(None, dict(feeds))
    assert s.kernel_usage() == [kernel]
    (detail,) = s.kernel_usage_details()
    assert detail.startswith(f"{kernel}[{level} "), detail
    return got, s


def run_ort(m, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3  # errors only
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, dict(feeds))


def run_onnx_reference(m, feeds):
    with np.errstate(over="ignore"):  # its sigmoid's exp(-x) overflows to a correct 0
        return ReferenceEvaluator(m).run(None, dict(feeds))


def assert_close(got, want, what, tol=2e-5):
    """|got - want| <= tol (1 + |want|), float64; shapes equal."""
    got64 = np.asarray(got, np.float64)
    assert got64.shape == np.shape(want), f"{what}: shape {got64.shape}, expected {np.shape(want)}"
    err = np.abs(got64 - want)
    bad = ~(err <= tol * (1.0 + np.abs(want)))
    assert not bad.any(), f"{what}: {int(bad.sum())} of {bad.size} out of bound, worst error {err.max():.3g}"


def check_outputs(m, feeds, want, level, kernel, what, *, outputs, threads=1, onnx_reference=False,
                  onnxruntime=False):
    """olc against the float64 reference's outputs `want`, and, where asked,
    onnx.reference and onnxruntime against it too (so that all compute the
    same function)."""
    names = [n for n in outputs if n]
    got, s = run_olc(m, feeds, level, kernel, threads)
    assert len(got) == len(want)
    for g, w, name in zip(got, want, names):
        assert g.dtype == np.float32
        assert_close(g, w, f"{what} {name}")
    if onnx_reference:
        for r, w, name in zip(run_onnx_reference(m, feeds), want, names):
            assert_close(r, w, f"{what} {name}: onnx.reference against the reference", tol=5e-5)
    if onnxruntime:
        for r, g, name in zip(run_ort(m, feeds), got, names):
            assert_close(g, np.asarray(r, np.float64), f"{what} {name} against onnxruntime", tol=5e-5)
    return got, s


def ort_covers(m, layout):
    """onnxruntime's CPU recurrent kernels refuse layout 1 and a missing
    hidden_size."""
    return layout == 0 and any(a.name == "hidden_size" for a in m.graph.node[-1].attribute)



def reference_h_only(X, seq_lens, h0, direction, D, H, layout, step):
    """Y, Y_h in float64 of a recurrence whose state is H alone (GRU, RNN):
    ``step(d, x, h)`` gives H(t) of direction d from X(t) and H(t-1), one
    batch row and step at a time. A row of length 0 ends with a zero Y_h
    and the reverse direction runs each row from its own last step back
    (ONNX Runtime's choices); layout 1 is [batch, ...] in and out."""
    if layout:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
    S, Bt, _ = X.shape
    Y = np.zeros((S, D, Bt, H))
    Y_h = np.zeros((D, Bt, H))
    for d in range(D):
        reverse = direction == "reverse" or d == 1
        for b in range(Bt):
            length = int(seq_lens[b]) if seq_lens is not None else S
            ht = h0[d, b] if h0 is not None else np.zeros(H)
            for s in range(length):
                t = length - 1 - s if reverse else s
                ht = step(d, X[t, b], ht)
                Y[t, d, b] = ht
            if length > 0:
                Y_h[d, b] = ht
    if layout:
        return Y.transpose(2, 0, 1, 3), Y_h.transpose(1, 0, 2)
    return Y, Y_h


# ------------------------------------------------------------ case variations


def activation_attributes(sets, direction, n):
    """The activations attributes of case n: per direction the next of
    ``sets`` ((names, alphas, betas) each) in turn."""
    D = 2 if direction == "bidirectional" else 1
    chosen = [sets[(n + d) % len(sets)] for d in range(D)]
    attrs = {"activations": [a for acts, _, _ in chosen for a in acts]}
    alphas = [a for _, al, _ in chosen for a in al]
    betas = [b for _, _, be in chosen for b in be]
    if alphas:
        attrs["activation_alpha"] = alphas
    if betas:
        attrs["activation_beta"] = betas
    return attrs


def feature_case(feature, S, Bt, direction, n, activation_sets):
    """(case kwargs, attrs, layout) of one feature on case n of a shape,
    for the ops without peepholes and input_forget (GRU, RNN)."""
    kw, attrs, layout = {}, {}, 0
    if feature == "sequence_lens":
        # Every length from 0 to S, in turn; the states fed.
        kw.update(seq_lens=[(S - b - n) % (S + 1) for b in range(Bt)], const=("W", "R") if n % 3 else ())
    elif feature == "clip":
        attrs["clip"] = 0.6 + 0.3 * (n % 3)
        kw.update(scale=3.0)
    elif feature == "activations":
        attrs.update(activation_attributes(activation_sets, direction, n))
        kw.update(scale=0.5)
    elif feature == "layout":
        layout = 1
        kw.update(seq_lens=[max(0, S - b) for b in range(Bt)] if n % 3 == 1 else None,
                  const=("W", "R", "B") if n % 2 else (), h0=n % 4 != 3)
    elif feature == "no_hidden_size":
        kw.update(hidden_attr=False, const=("R",) if n % 2 else ("W", "B"))
    elif feature == "saturated":
        # Pre-activations far outside [-10, 10]: the functions at their limits.
        kw.update(scale=40.0)
    return kw, attrs, layout


def with_array(name, value):
    """An edit of a case's arrays: ``name`` replaced by ``value``."""
    def edit(arrays):
        arrays[name] = np.asarray(value)
    return edit


def with_initializers_from(m, arrays):
    """``m`` with its initializers rewritten from ``arrays`` (after an edit)."""
    for init in m.graph.initializer:
        init.CopyFrom(numpy_helper.from_array(arrays[init.name], init.name))
    return m


def with_attributes(m, attrs):
    """``m`` with the attributes of its one node named in ``attrs`` replaced
    (or added)."""
    node = m.graph.node[0]
    keep = [a for a in node.attribute if a.name not in attrs]
    del node.attribute[:]
    node.attribute.extend(keep + [helper.make_attribute(k, v) for k, v in attrs.items()])
    return m


LEVEL_NAMES = ("scalar", "avx2", "avx512")


@contextmanager
def tuned(op, **values):
    """The op's float32 tuning keys set to ``values`` at every level for the
    duration (the thresholds that choose between the kernel's paths)."""
    for level in LEVEL_NAMES:
        for name, value in values.items():
            tuning.set("olc_matmul", op, name, value, implementation=level, dtype="float32")
    try:
        yield
    finally:
        for level in LEVEL_NAMES:
            for name in values:
                tuning.reset("olc_matmul", op, name, implementation=level, dtype="float32")
