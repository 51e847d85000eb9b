"""The sequence operators on olc-core's kernels (strict=True: every node on
olc), each differential against onnx.reference; sequence values carried
through Loop and returned by If on olc sub-Sessions, compared with
onnxruntime and onnx.reference; and the errors, each naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from numpy_test_kernels import NumpyKernels
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import olc_core

F, I64, I32, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL
n = helper.make_node

ELEM = {"float32": F, "float16": TensorProto.FLOAT16, "float64": TensorProto.DOUBLE, "int64": I64,
        "int32": I32, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "bool": B, "string": TensorProto.STRING}


@pytest.fixture(autouse=True)
def numpy_kernels():
    plugin = NumpyKernels()
    olc_core.register_plugin(plugin, name="olc-seq-tests")
    yield
    olc_core.unregister_plugin(plugin)


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def seq_vi(name, elem=F):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "seq", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def sample(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype == "string":
        return rng.integers(0, 50, shape).astype(str).astype(object)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    return (rng.standard_normal(shape) * 10).astype(dtype)


def same(got, want):
    """Structural equality of values (arrays or lists of arrays)."""
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype or (got.dtype.kind in "OU" and want.dtype.kind in "OU"), (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


def run_both(m, feeds):
    s = olc_core.Session(m, strict=True)
    got = s.run(None, feeds)
    want = ReferenceEvaluator(m).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same(g, w)
    return s, got


def three_tensor_inputs(dtype, shapes=((2, 3), (2, 3), (2, 3))):
    elem = ELEM[dtype]
    feeds = {f"t{k}": sample(dtype, s, k) for k, s in enumerate(shapes)}
    return [vi(f"t{k}", elem, list(s)) for k, s in enumerate(shapes)], feeds


ALL = ["float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool", "string"]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("pos", [-3, -1, 0, 2])
def test_construct_and_at(dtype, pos):
    inputs, feeds = three_tensor_inputs(dtype)
    m = model([n("SequenceConstruct", ["t0", "t1", "t2"], ["s"]), n("SequenceAt", ["s", "p"], ["y"]),
               n("SequenceLength", ["s"], ["len"])],
              inputs + [vi("p", I64, [])], [vi("y", ELEM[dtype]), vi("len", I64), seq_vi("s", ELEM[dtype])])
    feeds["p"] = np.array(pos, np.int64)
    s, (y, length, seq) = run_both(m, feeds)
    assert len(seq) == 3
    same(y, seq[pos])
    assert int(length) == 3 and y.dtype == feeds["t0"].dtype
    assert [e.kernel for e in s.kernel_plan()] == ["olc_core::SequenceConstruct", "olc_core::SequenceAt",
                                                   "olc_core::SequenceLength"]


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "string"])
@pytest.mark.parametrize("pos", [None, -2, -1, 0, 1, 2])
def test_insert(dtype, pos):
    inputs, feeds = three_tensor_inputs(dtype)
    m = model([n("SequenceConstruct", ["t0", "t1"], ["s"]),
               n("SequenceInsert", ["s", "t2"] + ([] if pos is None else ["p"]), ["s2"])],
              inputs + ([] if pos is None else [vi("p", I32, [])]), [seq_vi("s2", ELEM[dtype])])
    if pos is not None:
        feeds["p"] = np.array(pos, np.int32)
    if pos != 2:
        _, (seq,) = run_both(m, feeds)
    else:
        # Position n (the end) is valid; onnx 1.23's reference takes it modulo
        # n and inserts at the front: onnxruntime is the oracle here.
        ort = pytest.importorskip("onnxruntime")
        (seq,) = olc_core.Session(m, strict=True).run(None, feeds)
        same(seq, ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0])
        same(seq[2], feeds["t2"])
    assert len(seq) == 3


@pytest.mark.parametrize("pos", [None, -3, -1, 0, 2])
def test_erase(pos):
    inputs, feeds = three_tensor_inputs("float32")
    m = model([n("SequenceConstruct", ["t0", "t1", "t2"], ["s"]),
               n("SequenceErase", ["s"] + ([] if pos is None else ["p"]), ["s2"]), n("SequenceLength", ["s2"], ["len"])],
              inputs + ([] if pos is None else [vi("p", I64, [])]), [seq_vi("s2"), vi("len", I64)])
    if pos is not None:
        feeds["p"] = np.array(pos, np.int64)
    _, (_, length) = run_both(m, feeds)
    assert int(length) == 2


@pytest.mark.parametrize("dtype", ["float32", "int64", "float16", "bool"])
def test_empty_then_insert(dtype):
    elem = ELEM[dtype]
    m = model([n("SequenceEmpty", [], ["e"], dtype=elem), n("SequenceLength", ["e"], ["len0"]),
               n("SequenceInsert", ["e", "t0"], ["s"]), n("SequenceInsert", ["s", "t1", "p"], ["s2"])],
              [vi("t0", elem, [3]), vi("t1", elem, [3]), vi("p", I64, [])],
              [vi("len0", I64), seq_vi("s2", elem)])
    run_both(m, {"t0": sample(dtype, (3,), 0), "t1": sample(dtype, (3,), 1), "p": np.array(0, np.int64)})


@pytest.mark.parametrize("axis,new_axis,shapes", [
    (0, 0, ((1, 3), (2, 3), (4, 3))),
    (1, 0, ((2, 1), (2, 4), (2, 2))),
    (-1, 0, ((2, 1), (2, 4), (2, 2))),
    (-2, 0, ((3, 2), (1, 2), (2, 2))),
    (0, 1, ((2, 3), (2, 3), (2, 3))),
    (2, 1, ((2, 3), (2, 3), (2, 3))),
    (-1, 1, ((2, 3), (2, 3), (2, 3))),
    (-3, 1, ((2, 3), (2, 3), (2, 3))),
])
@pytest.mark.parametrize("dtype", ["float32", "int32", "string"])
def test_concat_from_sequence(axis, new_axis, shapes, dtype):
    inputs, feeds = three_tensor_inputs(dtype, shapes)
    m = model([n("SequenceConstruct", ["t0", "t1", "t2"], ["s"]),
               n("ConcatFromSequence", ["s"], ["y"], axis=axis, new_axis=new_axis)],
              inputs, [vi("y", ELEM[dtype])])
    run_both(m, feeds)


@pytest.mark.parametrize("split,axis,keepdims", [
    (None, 0, 1), (None, 1, 0), (None, -1, 1), (None, -2, 0),
    (np.array(2, np.int64), 1, 1), (np.array(3, np.int32), 1, 0), (np.array(5, np.int64), 1, 1),
    (np.array([1, 4], np.int64), 1, 1), (np.array([2, 0, 1], np.int32), 0, 1), (np.array([5], np.int64), -1, 0),
])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_split_to_sequence(split, axis, keepdims, dtype):
    elem = ELEM[dtype]
    x = sample(dtype, (3, 5), 4)
    inputs, ins, feeds = [vi("x", elem, [3, 5])], ["x"], {"x": x}
    if split is not None:
        split_elem = I64 if split.dtype == np.int64 else I32
        inputs.append(vi("split", split_elem, list(split.shape)))
        ins.append("split")
        feeds["split"] = split
    m = model([n("SplitToSequence", ins, ["s"], axis=axis, keepdims=keepdims), n("SequenceLength", ["s"], ["len"])],
              inputs, [seq_vi("s", elem), vi("len", I64)])
    _, (seq, length) = run_both(m, feeds)
    assert len(seq) == int(length)


def test_a_sequence_fed_as_a_graph_input():
    m = model([n("SequenceAt", ["s", "p"], ["y"]), n("SequenceErase", ["s"], ["s2"]),
               n("ConcatFromSequence", ["s2"], ["c"], axis=0)],
              [seq_vi("s"), vi("p", I64, [])], [vi("y"), vi("c")])
    items = [np.full((1, 2), k, np.float32) for k in range(4)]
    run_both(m, {"s": items, "p": np.array(-2, np.int64)})


# ------------------------------------------------- Loop and If with sequences


def exporter_loop_model(typed_body=True, cond_input=True):
    """SequenceEmpty -> Loop{v <- v + x; SequenceInsert(seq, v)} -> ConcatFromSequence,
    as exporters write a Python list appended to in a loop."""
    seq_in = seq_vi("seq_in") if typed_body else helper.make_value_info("seq_in", helper.TypeProto())
    seq_out = seq_vi("seq_out") if typed_body else helper.make_value_info("seq_out", helper.TypeProto())
    body = helper.make_graph(
        [n("Identity", ["cond_in"], ["cond_out"]), n("Add", ["v_in", "x"], ["v_out"]),
         n("Identity", ["seq_in"], ["seq_pass"]), n("SequenceInsert", ["seq_pass", "v_out"], ["seq_out"])],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [3]), seq_in],
        [vi("cond_out", B, []), vi("v_out", F, [3]), seq_out])
    nodes = [n("SequenceEmpty", [], ["s0"], dtype=F),
             n("Loop", ["M", "cond" if cond_input else "", "v0", "s0"], ["v", "s"], name="loop", body=body),
             n("ConcatFromSequence", ["s"], ["rows"], axis=0, new_axis=1), n("SequenceLength", ["s"], ["count"])]
    inputs = [vi("M", I64, []), vi("x", F, [3]), vi("v0", F, [3])] + ([vi("cond", B, [])] if cond_input else [])
    return model(nodes, inputs, [vi("v"), vi("rows"), vi("count", I64)])


@pytest.mark.parametrize("typed_body", [True, False])
def test_the_exporter_loop_pattern_runs_on_olc(typed_body):
    ort = pytest.importorskip("onnxruntime")
    m = exporter_loop_model(typed_body)
    s = olc_core.Session(m, strict=True)
    feeds = {"M": np.array(4, np.int64), "x": np.array([1, 2, 3], np.float32),
             "v0": np.array([0.5, -1, 0], np.float32), "cond": np.array(True)}
    got = s.run(None, feeds)
    want_ort = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    want_ref = ReferenceEvaluator(m).run(None, feeds)
    for g, w1, w2 in zip(got, want_ort, want_ref):
        same(g, w1)
        same(g, w2)
    np.testing.assert_array_equal(got[1], feeds["v0"] + np.arange(1, 5, dtype=np.float32)[:, None] * feeds["x"])
    plan = {e.op_type: e for e in s.kernel_plan()}
    assert plan["Loop"].kernel == "olc_core::Loop"
    body = dict(plan["Loop"].subgraphs)["body"]
    assert [e.kernel for e in body][-2:] == ["olc_core::IdentityValue", "olc_core::SequenceInsert"]


def test_the_exporter_loop_without_a_condition_input():
    # (onnx.reference's Loop runs no iteration without a condition input: numpy is the reference.)
    s = olc_core.Session(exporter_loop_model(cond_input=False), strict=True)
    x, v0 = np.array([1, 2, 3], np.float32), np.zeros(3, np.float32)
    v, rows, count = s.run(None, {"M": np.array(3, np.int64), "x": x, "v0": v0})
    np.testing.assert_array_equal(rows, np.arange(1, 4, dtype=np.float32)[:, None] * x)
    np.testing.assert_array_equal(v, 3 * x)
    assert int(count) == 3


def test_if_branches_returning_sequences():
    ort = pytest.importorskip("onnxruntime")
    then_g = helper.make_graph([n("SequenceConstruct", ["a", "b"], ["ts"])], "then", [], [seq_vi("ts")])
    else_g = helper.make_graph([n("SplitToSequence", ["a"], ["es"], axis=0)], "else", [], [seq_vi("es")])
    m = model([n("If", ["c"], ["s"], name="pick", then_branch=then_g, else_branch=else_g),
               n("ConcatFromSequence", ["s"], ["y"], axis=1)],
              [vi("c", B, []), vi("a", F, [2, 3]), vi("b", F, [2, 3])], [vi("y")])
    s = olc_core.Session(m, strict=True)
    a, b = sample("float32", (2, 3), 1), sample("float32", (2, 3), 2)
    sess_ort = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for c in (True, False):
        feeds = {"c": np.array(c), "a": a, "b": b}
        (got,) = s.run(None, feeds)
        same(got, sess_ort.run(None, feeds)[0])
        same(got, ReferenceEvaluator(m).run(None, feeds)[0])


# ---------------------------------------------------------------- errors


def construct_model(op_nodes, extra_inputs=(), outputs=None, dtype="float32"):
    inputs, feeds = three_tensor_inputs(dtype)
    m = model([n("SequenceConstruct", ["t0", "t1", "t2"], ["s"], name="make")] + op_nodes,
              inputs + list(extra_inputs), outputs or [vi("y")])
    return olc_core.Session(m, strict=True), feeds


@pytest.mark.parametrize("op,pos,match", [
    ("SequenceAt", 3, r"position 3 is out of range for a sequence of 3 element\(s\) \(valid: -3 to 2\)"),
    ("SequenceAt", -4, r"position -4 is out of range"),
    ("SequenceErase", 3, r"position 3 is out of range"),
    ("SequenceInsert", 4, r"position 4 is out of range for a sequence of 3 element\(s\) \(valid: -3 to 3\)"),
    ("SequenceInsert", -4, r"position -4 is out of range"),
])
def test_positions_out_of_range_name_the_node(op, pos, match):
    ins = ["s", "t0", "p"] if op == "SequenceInsert" else ["s", "p"]
    out = [seq_vi("y")] if op != "SequenceAt" else [vi("y")]
    s, feeds = construct_model([n(op, ins, ["y"], name="op")], [vi("p", I64, [])], out)
    feeds["p"] = np.array(pos, np.int64)
    with pytest.raises(olc_core.OlcError, match=rf"node 'op' \({op}\): {match}"):
        s.run(None, feeds)


def test_mixed_element_types_name_the_node():
    m = model([n("SequenceConstruct", ["a", "b"], ["s"], name="make")], [vi("a", F), vi("b", I64)], [seq_vi("s")])
    s = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError, match=r"node 'make' \(SequenceConstruct\): mixed element types in the inputs: "
                                                r"element 0 is float32, element 1 is int64"):
        s.run(None, {"a": np.ones(2, np.float32), "b": np.ones(2, np.int64)})
    m = model([n("SequenceInsert", ["s", "t"], ["s2"], name="ins")], [seq_vi("s"), vi("t", I64)], [seq_vi("s2")])
    s = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError, match=r"node 'ins' \(SequenceInsert\): cannot insert a int64 tensor into "
                                                r"a sequence of float32 tensors"):
        s.run(None, {"s": [np.ones(2, np.float32)], "t": np.ones(2, np.int64)})
    m = model([n("ConcatFromSequence", ["s"], ["y"], name="cat", axis=0)], [seq_vi("s")], [vi("y")])
    s = olc_core.Session(m, strict=True)
    with pytest.raises(olc_core.OlcError, match=r"node 'cat' \(ConcatFromSequence\): mixed element types in "
                                                r"the sequence: element 0 is float32, element 1 is float64"):
        s.run(None, {"s": [np.ones(2, np.float32), np.ones(2, np.float64)]})


def test_empty_sequences_name_the_node():
    m = model([n("SequenceEmpty", [], ["e"]), n("SequenceErase", ["e"], ["e2"], name="erase")], [], [seq_vi("e2")])
    with pytest.raises(olc_core.OlcError, match=r"node 'erase' \(SequenceErase\): cannot erase from an empty sequence"):
        olc_core.Session(m, strict=True).run(None, {})
    m = model([n("SequenceEmpty", [], ["e"]), n("SequenceAt", ["e", "p"], ["y"], name="at")], [vi("p", I64, [])],
              [vi("y")])
    with pytest.raises(olc_core.OlcError, match=r"node 'at' \(SequenceAt\): position 0 is out of range: the sequence "
                                                r"is empty"):
        olc_core.Session(m, strict=True).run(None, {"p": np.array(0, np.int64)})
    m = model([n("SequenceEmpty", [], ["e"]), n("ConcatFromSequence", ["e"], ["y"], name="cat", axis=0)], [],
              [vi("y")])
    with pytest.raises(olc_core.OlcError, match=r"node 'cat' \(ConcatFromSequence\): the sequence is empty"):
        olc_core.Session(m, strict=True).run(None, {})


@pytest.mark.parametrize("axis,new_axis,shapes,match", [
    (2, 0, ((2, 3),) * 3, r"axis 2 is outside \[-2, 1\] for rank-2 elements"),
    (3, 1, ((2, 3),) * 3, r"axis 3 is outside \[-3, 2\] for stacking rank-2 tensors"),
    (0, 0, ((2, 3), (2, 4), (2, 3)), r"element 1 has shape \[2, 4\], element 0 \[2, 3\]: they may differ only "
                                     r"along axis 0"),
    (0, 1, ((2, 3), (3, 3), (2, 3)), r"with new_axis=1 every element needs the same shape"),
    (0, 0, ((2, 3), (2, 3, 1), (2, 3)), r"element 1 has rank 3, element 0 rank 2"),
])
def test_concat_errors_name_the_node(axis, new_axis, shapes, match):
    inputs, feeds = three_tensor_inputs("float32", shapes)
    m = model([n("SequenceConstruct", ["t0", "t1", "t2"], ["s"]),
               n("ConcatFromSequence", ["s"], ["y"], name="cat", axis=axis, new_axis=new_axis)], inputs, [vi("y")])
    with pytest.raises(olc_core.OlcError, match=r"node 'cat' \(ConcatFromSequence\): " + match):
        olc_core.Session(m, strict=True).run(None, feeds)


@pytest.mark.parametrize("split,axis,match", [
    (np.array([2, 2], np.int64), 1, r"split sizes \[2, 2\] add up to 4, the input has 5 along axis 1"),
    (np.array([6, -1], np.int64), 1, r"split sizes must not be negative"),
    (np.array(0, np.int64), 1, r"a scalar split must be positive, got 0"),
    (np.array([[1, 4]], np.int64), 1, r"split must be a scalar or 1-D, got shape \[1, 2\]"),
    (None, 2, r"axis 2 is outside \[-2, 1\] for the rank-2 input"),
])
def test_split_errors_name_the_node(split, axis, match):
    inputs, ins, feeds = [vi("x", F, [3, 5])], ["x"], {"x": np.ones((3, 5), np.float32)}
    if split is not None:
        inputs.append(vi("split", I64, list(split.shape)))
        ins.append("split")
        feeds["split"] = split
    m = model([n("SplitToSequence", ins, ["s"], name="split", axis=axis)], inputs, [seq_vi("s")])
    with pytest.raises(olc_core.OlcError, match=r"node 'split' \(SplitToSequence\): " + match):
        olc_core.Session(m, strict=True).run(None, feeds)


def test_a_tensor_where_a_sequence_belongs_names_the_node():
    m = model([n("SequenceLength", ["s"], ["len"], name="count")], [seq_vi("s")], [vi("len", I64)])
    with pytest.raises(olc_core.OlcError, match=r"node 'count' \(SequenceLength\): input 0 must be a sequence, got "
                                                r"a tensor of shape \[2\]"):
        olc_core.Session(m, strict=True).run(None, {"s": np.ones(2, np.float32)})


def test_a_loop_carried_sequence_of_unknown_type_stays_on_the_fallback():
    # No type anywhere for the carried value: the body cannot be prepared on olc.
    body = helper.make_graph([n("Identity", ["cond_in"], ["cond_out"]), n("Identity", ["s_in"], ["s_out"])], "body",
                             [vi("i", I64, []), vi("cond_in", B, []), helper.make_value_info("s_in", helper.TypeProto())],
                             [vi("cond_out", B, []), helper.make_value_info("s_out", helper.TypeProto())])
    m = model([n("Loop", ["M", "", "s0"], ["s"], name="loop", body=body)],
              [vi("M", I64, []), helper.make_value_info("s0", helper.TypeProto())],
              [helper.make_value_info("s", helper.TypeProto())])
    with pytest.raises(olc_core.NoKernelError, match=r"node 'loop' \(Loop\)"):
        olc_core.Session(m, strict=True)


def test_split_without_keepdims_of_a_vector_gives_zero_dimensional_tensors():
    m = model([n("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0), n("SequenceInsert", ["s", "t"], ["s2"]),
               n("ConcatFromSequence", ["s2"], ["y"], axis=0, new_axis=1), n("SequenceAt", ["s2", "p"], ["e"])],
              [vi("x", F, [3]), vi("t", F, []), vi("p", I64, [])], [vi("y"), vi("e")])
    feeds = {"x": np.array([1, 2, 3], np.float32), "t": np.array(9, np.float32), "p": np.array(1, np.int64)}
    _, (_, e) = run_both(m, feeds)
    assert isinstance(e, np.ndarray) and e.shape == ()


def test_string_tensors_of_any_numpy_string_dtype_are_one_element_type():
    m = model([n("SequenceInsert", ["s", "t"], ["s2"]), n("ConcatFromSequence", ["s2"], ["y"], axis=0)],
              [seq_vi("s", TensorProto.STRING), vi("t", TensorProto.STRING, [2])], [vi("y", TensorProto.STRING)])
    feeds = {"s": [np.array(["a", "bb"]), np.array(["ccc"], dtype=object)], "t": np.array(["dddd", "e"], dtype=object)}
    _, (y,) = run_both(m, feeds)
    assert y.shape == (5,)


def sequence_map_model(typed_body=True, with_b=True):
    """sums[i] = a[i] (+ b[i]) + w and shapes[i] = Shape(a[i]), over one or two sequences and a tensor."""
    names = ["a_e", "b_e", "w_e"] if with_b else ["a_e", "w_e"]
    e_types = [vi(k, F, None) if typed_body else helper.make_value_info(k, helper.TypeProto()) for k in names]
    nodes = ([n("Add", ["a_e", "b_e"], ["ab"]), n("Add", ["ab", "w_e"], ["sum"])] if with_b
             else [n("Add", ["a_e", "w_e"], ["sum"])])
    body = helper.make_graph(nodes + [n("Shape", ["a_e"], ["shape"])], "body", e_types,
                             [vi("sum", F, None), vi("shape", I64, [None])])
    ins = ["a", "b", "w"] if with_b else ["a", "w"]
    return model([n("SequenceMap", ins, ["sums", "shapes"], name="map", body=body),
                  n("SequenceLength", ["sums"], ["count"])],
                 [seq_vi("a")] + ([seq_vi("b")] if with_b else []) + [vi("w", F, [1])],
                 [seq_vi("sums"), seq_vi("shapes", I64), vi("count", I64)])


@pytest.mark.parametrize("typed_body", [True, False])
@pytest.mark.parametrize("with_b", [True, False])
def test_sequence_map_runs_its_body_on_olc(typed_body, with_b):
    ort = pytest.importorskip("onnxruntime")
    m = sequence_map_model(typed_body, with_b)
    s = olc_core.Session(m, strict=True)
    rng = np.random.default_rng(5)
    a = [rng.standard_normal((k + 1, 2)).astype(np.float32) for k in range(3)]
    b = [rng.standard_normal((k + 1, 2)).astype(np.float32) for k in range(3)]
    feeds = {"a": a, "w": np.array([0.25], np.float32), **({"b": b} if with_b else {})}
    got = s.run(None, feeds)
    for g, w in zip(got, ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, feeds)):
        same(g, w)
    if not with_b:  # (onnx 1.23's reference maps one extra sequence or only tensors, not both)
        for g, w in zip(got, ReferenceEvaluator(m).run(None, feeds)):
            same(g, w)
    plan = {e.op_type: e for e in s.kernel_plan()}
    assert plan["SequenceMap"].kernel == "olc_core::SequenceMap"
    assert [e.op_type for e in dict(plan["SequenceMap"].subgraphs)["body"]][-1] == "Shape"
    # An empty input sequence maps to empty output sequences.
    sums, shapes, count = s.run(None, {**feeds, "a": [], **({"b": []} if with_b else {})})
    assert sums == [] and shapes == [] and int(count) == 0


def test_sequence_map_inputs_of_different_lengths_name_the_node():
    s = olc_core.Session(sequence_map_model(), strict=True)
    x = np.ones((1, 2), np.float32)
    with pytest.raises(olc_core.OlcError, match=r"node 'map' \(SequenceMap\): sequence input 1 has 1 elements, "
                                                r"input 0 has 2"):
        s.run(None, {"a": [x, x], "b": [x], "w": np.zeros(1, np.float32)})


def test_a_sequence_map_body_with_the_wrong_number_of_inputs_is_refused_at_construction():
    body = helper.make_graph([n("Identity", ["a_e"], ["o"])], "body", [vi("a_e")], [vi("o")])
    m = model([n("SequenceMap", ["a", "w"], ["out"], name="map", body=body)], [seq_vi("a"), vi("w")], [seq_vi("out")])
    with pytest.raises(olc_core.InvalidModelError, match=r"node 'map' \(SequenceMap\): the body takes 1 inputs, "
                                                         r"the node gives 2"):
        olc_core.Session(m)
