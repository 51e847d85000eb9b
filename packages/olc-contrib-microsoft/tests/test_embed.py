"""EmbedLayerNormalization: the optimized kernel at every SIMD level against
the naive reference, the reference against a float64 numpy formula, both
against onnxruntime (float32, int32 ids: what its CPU kernel has); int32 and
int64 ids, with and without segments, position ids of both shapes, the mask
index, the embedding sum, guard pages, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
from cm_testlib import LEVELS, NP_TYPE, TYPES, assert_close, make_model, ort_run, rand, run_checked, session, to64

import olc_core
from olc_core.testing import guarded

OP = "EmbedLayerNormalization"
HIDDEN = (1, 7, 768, 4095)
OUTS = ["y", "mask_index", "emb_sum"]


def tables(rng, t, H, V=23, P=19, T=3):
    return {"word": rand(rng, (V, H), t), "pos": rand(rng, (P, H), t), "segemb": rand(rng, (T, H), t),
            "gamma": rand(rng, (H,), t, 0.5, 1.5), "beta": rand(rng, (H,), t, -1, 1)}


def inputs_of(t, ids_t, seg=True, mask=True, pos_ids=False):
    ins = [("ids", ids_t), ("seg" if seg else "", ids_t), ("word", t), ("pos", t), ("segemb" if seg else "", t),
           ("gamma", t), ("beta", t), ("mask" if mask else "", ids_t), ("pos_ids" if pos_ids else "", ids_t)]
    while ins[-1][0] == "":
        ins.pop()
    return ins


def feeds_of(rng, t, ids_t, B, S, H, seg=True, mask=True, pos_ids=None):
    f = tables(rng, t, H)
    f["ids"] = rng.integers(0, f["word"].shape[0], (B, S)).astype(NP_TYPE[ids_t])
    if seg:
        f["seg"] = rng.integers(0, f["segemb"].shape[0], (B, S)).astype(NP_TYPE[ids_t])
    else:
        del f["segemb"]
    if mask:
        m = (rng.uniform(size=(B, S)) < 0.7).astype(NP_TYPE[ids_t])
        if m.size:
            m[0, 0] = 2  # counted only where the mask is 1
        f["mask"] = m
    if pos_ids is not None:
        f["pos_ids"] = rng.integers(0, f["pos"].shape[0], (pos_ids, S)).astype(NP_TYPE[ids_t])
    return f


def formula(f, eps=1e-12):
    """float64 LayerNorm of the float32 sum (word + position) + segment."""
    B, S = f["ids"].shape
    pos = f["pos_ids"] if "pos_ids" in f else np.arange(S)[None, :]
    pos = np.broadcast_to(pos, (B, S))
    s = f["word"].astype(np.float32)[f["ids"]] + f["pos"].astype(np.float32)[pos]
    if "seg" in f:
        s = s + f["segemb"].astype(np.float32)[f["seg"]]
    s64 = to64(s)
    m = s64.mean(-1, keepdims=True)
    inv = 1 / np.sqrt(((s64 - m) ** 2).mean(-1, keepdims=True) + eps)
    y = (s64 - m) * inv * to64(f["gamma"]) + to64(f["beta"])
    mask_index = (f["mask"] == 1).sum(-1).astype(np.int32) if "mask" in f else np.zeros(B, np.int32)
    return y, mask_index, s


def check(t, f, opt, nai):
    y, mi, s = formula(f)
    naive_tol = {"float32": (1e-6, 2e-6), "float16": (5e-4, 5e-4), "bfloat16": (4e-3, 4e-3)}[t]
    assert_close(nai[0], y, t, "naive y vs float64", tol=naive_tol)
    assert_close(opt[0], nai[0], t, "y")
    np.testing.assert_array_equal(opt[1], mi)
    np.testing.assert_array_equal(nai[1], mi)
    assert opt[1].dtype == np.int32
    # the sum: the same float32 additions rounded once to T
    np.testing.assert_array_equal(to64(opt[2]), to64(nai[2]))
    np.testing.assert_array_equal(to64(nai[2]), to64(s.astype(NP_TYPE[t])))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("H", HIDDEN)
@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("ids_t", ["int32", "int64"])
def test_matches_naive(ids_t, t, H, level):
    rng = np.random.default_rng(H * 3 + len(t))
    B, S = (2, 9) if H < 1000 else (1, 3)
    f = feeds_of(rng, t, ids_t, B, S, H)
    m = make_model(OP, inputs_of(t, ids_t), OUTS)
    opt = run_checked(m, OP, f, level)
    nai = run_checked(m, OP, f, level, naive=True)
    assert opt[0].shape == (B, S, H) and opt[0].dtype == NP_TYPE[t] and opt[2].shape == (B, S, H)
    check(t, f, opt, nai)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("seg,mask,pos_rows", [(False, False, None), (False, True, None), (True, False, 1),
                                               (True, True, 4), (False, True, 1), (True, True, None)])
def test_optional_inputs(seg, mask, pos_rows, level):
    t, ids_t, B, S, H = "float32", "int64", 4, 6, 33
    rng = np.random.default_rng(11)
    f = feeds_of(rng, t, ids_t, B, S, H, seg=seg, mask=mask, pos_ids=pos_rows)
    m = make_model(OP, inputs_of(t, ids_t, seg=seg, mask=mask, pos_ids=pos_rows is not None), OUTS)
    opt = run_checked(m, OP, f, level)
    nai = run_checked(m, OP, f, level, naive=True)
    check(t, f, opt, nai)


@pytest.mark.parametrize("outs", [["y"], ["y", "mask_index"], ["y", "", "emb_sum"]])
def test_optional_outputs(outs):
    t, ids_t = "float16", "int32"
    rng = np.random.default_rng(4)
    f = feeds_of(rng, t, ids_t, 2, 5, 20)
    got = run_checked(make_model(OP, inputs_of(t, ids_t), outs), OP, f, LEVELS[-1])
    full = run_checked(make_model(OP, inputs_of(t, ids_t), OUTS), OP, f, LEVELS[-1])
    names = [o for o in outs if o]
    assert len(got) == len(names)
    for name, g in zip(names, got):
        np.testing.assert_array_equal(g, full[OUTS.index(name)])


@pytest.mark.parametrize("H", HIDDEN)
@pytest.mark.parametrize("seg,pos_rows", [(True, None), (False, None), (True, 1), (True, 2)])
def test_against_onnxruntime(seg, pos_rows, H):
    t, ids_t, B, S = "float32", "int32", 2, 7
    rng = np.random.default_rng(H + 5)
    f = feeds_of(rng, t, ids_t, B, S, H, seg=seg, pos_ids=pos_rows)
    m = make_model(OP, inputs_of(t, ids_t, seg=seg, pos_ids=pos_rows is not None), OUTS, {"epsilon": 1e-5})
    ref = ort_run(m, f)
    opt = run_checked(m, OP, f, LEVELS[-1])
    assert_close(opt[0], ref[0], t, "y vs onnxruntime", tol=(2e-5, 2e-5))
    np.testing.assert_array_equal(opt[1], ref[1])
    np.testing.assert_array_equal(opt[2], ref[2])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("at", ["end", "start"])
def test_guard_pages(at, level):
    # Tables fed (not initializers) so they can sit against an inaccessible page.
    t, ids_t, H = "bfloat16", "int64", 37
    rng = np.random.default_rng(2)
    f = feeds_of(rng, t, ids_t, 3, 5, H, pos_ids=1)
    f["ids"][0, 0] = f["word"].shape[0] - 1  # the last row of each table
    f["seg"][0, 1] = f["segemb"].shape[0] - 1
    f["pos_ids"][0, 2] = f["pos"].shape[0] - 1
    m = make_model(OP, inputs_of(t, ids_t, pos_ids=True), OUTS)
    want = run_checked(m, OP, f, level, naive=True)
    got = run_checked(m, OP, {k: guarded(v, at=at) for k, v in f.items()}, level)
    for g, w, tt in zip(got, want, [t, "int32", t]):
        assert_close(g, w, tt if tt != "int32" else "float32", "guarded")


@pytest.mark.parametrize("threads", [2, 3])
def test_threads(threads):
    t, ids_t = "float32", "int64"
    rng = np.random.default_rng(8)
    f = feeds_of(rng, t, ids_t, 4, 17, 768)
    m = make_model(OP, inputs_of(t, ids_t), OUTS)
    one = run_checked(m, OP, f, LEVELS[-1])
    many = run_checked(m, OP, f, LEVELS[-1], threads=threads)
    for a, b in zip(one, many):
        np.testing.assert_array_equal(a, b)


def test_empty_batch():
    t, ids_t = "float32", "int32"
    rng = np.random.default_rng(0)
    f = feeds_of(rng, t, ids_t, 0, 5, 8)
    out = run_checked(make_model(OP, inputs_of(t, ids_t), OUTS), OP, f, LEVELS[-1])
    assert [o.shape for o in out] == [(0, 5, 8), (0,), (0, 5, 8)]


ID_ERRORS = [
    ("ids", (1, 2), 23, r"input_ids\[1, 2\] = 23 is out of range: word_embedding has 23 rows"),
    ("ids", (0, 1), -1, r"input_ids\[0, 1\] = -1 is out of range: word_embedding has 23 rows"),
    ("seg", (1, 0), 3, r"segment_ids\[1, 0\] = 3 is out of range: segment_embedding has 3 rows"),
    ("pos_ids", (0, 3), 19, r"position_ids\[0, 3\] = 19 is out of range: position_embedding has 19 rows"),
]


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("ids_t", ["int32", "int64"])
@pytest.mark.parametrize("what,where,value,pattern", ID_ERRORS)
def test_ids_out_of_range_name_the_node(what, where, value, pattern, ids_t, naive):
    rng = np.random.default_rng(0)
    f = feeds_of(rng, "float32", ids_t, 2, 5, 8, pos_ids=2)
    f[what][where] = value
    s = session(make_model(OP, inputs_of("float32", ids_t, pos_ids=True), OUTS), LEVELS[-1], naive)
    with pytest.raises(olc_core.OlcError, match=r"node 'n0' \(EmbedLayerNormalization\): " + pattern):
        s.run(None, f)


SHAPE_ERRORS = [
    ("seg", (2, 4), r"segment_ids has shape \[2, 4\], expected the shape of input_ids \[2, 5\]"),
    ("mask", (5, 2), r"mask has shape \[5, 2\], expected the shape of input_ids"),
    ("gamma", (9,), r"gamma has shape \[9\], expected \[8\] \(the hidden size of word_embedding \[23, 8\]\)"),
    ("beta", (1, 8), r"beta has shape \[1, 8\], expected \[8\]"),
    ("pos", (19, 7), r"position_embedding has shape \[19, 7\], expected \[rows, 8\]"),
    ("segemb", (3,), r"segment_embedding must have rank 2"),
    ("ids", (10,), r"input_ids must have rank 2"),
    ("pos_ids", (3, 5), r"position_ids has shape \[3, 5\], expected \[2, 5\] or \[1, 5\]"),
]


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("what,shape,pattern", SHAPE_ERRORS)
def test_shape_errors_name_the_node(what, shape, pattern, naive):
    rng = np.random.default_rng(0)
    f = feeds_of(rng, "float32", "int64", 2, 5, 8, pos_ids=2)
    old = f[what]
    f[what] = (rng.integers(0, 2, shape) if old.dtype.kind == "i" else rng.uniform(size=shape)).astype(old.dtype)
    s = session(make_model(OP, inputs_of("float32", "int64", pos_ids=True), OUTS), LEVELS[-1], naive)
    with pytest.raises(olc_core.OlcError, match=r"node 'n0' \(EmbedLayerNormalization\): " + pattern):
        s.run(None, f)


def test_sequence_longer_than_positions():
    rng = np.random.default_rng(0)
    f = feeds_of(rng, "float32", "int32", 1, 20, 8)  # 19 position rows
    s = session(make_model(OP, inputs_of("float32", "int32"), OUTS), LEVELS[-1])
    with pytest.raises(olc_core.OlcError, match=r"node 'n0'.*sequence length 20 is longer than position_embedding "
                                               r"\(19 rows\)"):
        s.run(None, f)


def test_creation_errors():
    ins = inputs_of("float32", "int32")
    ins[4] = ("", "float32")  # segment_ids without segment_embedding
    with pytest.raises(olc_core.OlcError, match=r"node 'n0'.*segment_ids and segment_embedding must be given "
                                               r"together"):
        olc_core.Session(make_model(OP, ins, ["y"]), strict=True)
    ins = inputs_of("float32", "int32")
    ins[7] = ("mask", "int64")
    with pytest.raises(olc_core.NoKernelError, match=r"node 'n0'.*different types \(int32 and int64\)"):
        olc_core.Session(make_model(OP, ins, ["y"]), strict=True)
    with pytest.raises(olc_core.OlcError, match=r"node 'n0'.*mask_index_type' must be 0 or 1"):
        olc_core.Session(make_model(OP, inputs_of("float32", "int32"), ["y"], {"mask_index_type": 3}), strict=True)
