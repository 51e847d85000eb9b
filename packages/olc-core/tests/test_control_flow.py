"""If and Loop on olc sessions: each subgraph prepared once with its own
native kernels, outer-scope values by reference; checked against numpy.

The subgraphs use olc-core's own kernels (views, Shape) and the core test
kernel Scale (y = factor * x, native), so no family is needed."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import olc_core
from olc_core import KernelRegistration, _native, control_flow, hookimpl

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
n = helper.make_node


class ScalePlugin:
    @hookimpl
    def olc_register_kernels(self):
        return [KernelRegistration("test.olc", "Scale", "olc_core_test::Scale", {"T": ("float32",)}, ("T",),
                                   _native._test_vtable("scale"), outputs=("T",), family="olc-cf-tests"),
                # y = x + sum(w); refuses a w that is not a constant, packs its sum once.
                KernelRegistration("test.olc", "AddSum", "olc_core_test::AddSum", {"T": ("float32",)}, ("T", "T"),
                                   _native._test_vtable("add_sum"), outputs=("T",), family="olc-cf-tests")]


@pytest.fixture(autouse=True)
def scale_plugin():
    plugin = ScalePlugin()
    olc_core.register_plugin(plugin, name="olc-cf-tests")
    yield
    olc_core.unregister_plugin(plugin)


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "cf", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("test.olc", 1)])
    m.ir_version = 8
    return m


def if_model(else_nodes=None):
    # then: reshape the outer x by an outer initializer; else: its shape as floats scaled.
    then_g = helper.make_graph([n("Reshape", ["x", "shape"], ["t"])], "then", [], [vi("t")])
    else_g = helper.make_graph(else_nodes or [n("Scale", ["x"], ["e0"], domain="test.olc", factor=3.0),
                                              n("Reshape", ["e0", "shape"], ["e"])], "else", [], [vi("e")])
    return model([n("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)],
                 [vi("c", B, []), vi("x", F, [2, 3])], [vi("y")],
                 [numpy_helper.from_array(np.array([3, 2], np.int64), "shape")])


def test_if_runs_its_branches_natively_with_outer_values():
    s = olc_core.Session(if_model(), strict=True)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(s.run(None, {"c": np.array(True), "x": x})[0], x.reshape(3, 2))
    np.testing.assert_array_equal(s.run(None, {"c": np.array(False), "x": x})[0], 3 * x.reshape(3, 2))
    (entry,) = s.kernel_plan()
    assert entry.kernel == "olc_core::If"
    branches = dict(entry.subgraphs)
    assert [e.kernel for e in branches["then_branch"]] == ["olc_core::Reshape"]
    assert [e.kernel for e in branches["else_branch"]] == ["olc_core_test::Scale", "olc_core::Reshape"]
    assert all(e.native for plan in branches.values() for e in plan)


def test_strict_mode_names_the_if_node_when_a_branch_needs_the_fallback():
    with pytest.raises(olc_core.OlcError, match=r"node 'branch' \(If\), subgraph 'else_branch': .*Hardmax"):
        olc_core.Session(if_model([n("Hardmax", ["x"], ["e"])]), strict=True)
    # Without strict mode the branch runs its Hardmax on the fallback.
    s = olc_core.Session(if_model([n("Hardmax", ["x"], ["e"])]))
    x = np.array([[1, 5, 2], [7, 0, 1]], np.float32)
    np.testing.assert_array_equal(s.run(None, {"c": np.array(False), "x": x})[0], [[0, 1, 0], [1, 0, 0]])


def loop_model(with_cond=True):
    # v <- 2 v each iteration; the scan output records each v as a [1, 3] row.
    body = helper.make_graph(
        [n("Identity", ["cond_in"], ["cond_out"]), n("Scale", ["v_in"], ["v_out"], domain="test.olc", factor=2.0),
         n("Unsqueeze", ["v_out", "axis0"], ["row"])],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [3])],
        [vi("cond_out", B, []), vi("v_out", F, [3]), vi("row", F, [1, 3])])
    inputs = [vi("M", I64, []), vi("v0", F, [3])] + ([vi("cond", B, [])] if with_cond else [])
    return model([n("Loop", ["M", "cond" if with_cond else "", "v0"], ["v", "rows"], name="loop", body=body)],
                 inputs, [vi("v"), vi("rows")], [numpy_helper.from_array(np.array([0], np.int64), "axis0")])


@pytest.mark.parametrize("trips", [0, 1, 4])
def test_loop_carries_values_and_stacks_scan_outputs(trips):
    s = olc_core.Session(loop_model(), strict=True)
    v0 = np.array([1.0, -2.0, 0.5], np.float32)
    v, rows = s.run(None, {"M": np.array(trips, np.int64), "v0": v0, "cond": np.array(True)})
    np.testing.assert_array_equal(v, v0 * 2.0 ** trips)
    want_rows = np.stack([(v0 * 2.0 ** (k + 1))[None] for k in range(trips)]) if trips else np.zeros((0, 1, 3))
    assert rows.shape == (trips, 1, 3) and rows.dtype == np.float32
    np.testing.assert_array_equal(rows, want_rows)
    (entry,) = s.kernel_plan()
    assert entry.kernel == "olc_core::Loop"
    assert [e.kernel for e in dict(entry.subgraphs)["body"]] == ["olc_core::Identity", "olc_core_test::Scale",
                                                                   "olc_core::Unsqueeze"]


def test_loop_without_a_condition_input_runs_its_trip_count():
    s = olc_core.Session(loop_model(with_cond=False))
    v, rows = s.run(None, {"M": np.array(3, np.int64), "v0": np.ones(3, np.float32)})
    np.testing.assert_array_equal(v, np.full(3, 8.0, np.float32))
    assert rows.shape == (3, 1, 3)


def test_a_false_condition_runs_no_iteration():
    s = olc_core.Session(loop_model())
    v0 = np.ones(3, np.float32)
    v, rows = s.run(None, {"M": np.array(5, np.int64), "v0": v0, "cond": np.array(False)})
    np.testing.assert_array_equal(v, v0)
    assert rows.shape == (0, 1, 3)


def test_an_error_inside_the_body_names_the_loop_and_the_iteration():
    # The body reshapes by a feed that is wrong: the body's Reshape fails.
    body = helper.make_graph(
        [n("Identity", ["cond_in"], ["cond_out"]), n("Reshape", ["v_in", "s"], ["v_out"])],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [3])],
        [vi("cond_out", B, []), vi("v_out", F, [3])])
    m = model([n("Loop", ["M", "", "v0"], ["v"], name="loop", body=body)],
              [vi("M", I64, []), vi("v0", F, [3]), vi("s", I64, [1])], [vi("v")])
    s = olc_core.Session(m)
    with pytest.raises(olc_core.OlcError, match=r"^node 'loop' \(Loop\), body \(iteration 0\): node 'Reshape_1' "
                                                r"\(Reshape\): cannot reshape \[3\]"):
        s.run(None, {"M": np.array(2, np.int64), "v0": np.ones(3, np.float32), "s": np.array([4], np.int64)})


def rank_model(declared, then_out=(2, 3), else_out=(6,), elem=F):
    """then: x as it is ([2, 3]); else: x reshaped by the outer 'shape'."""
    then_g = helper.make_graph([n("Identity", ["x"], ["t"])], "then", [], [vi("t", F, list(then_out))])
    else_g = helper.make_graph([n("Reshape", ["x", "shape"], ["e"])], "else", [], [vi("e", F, list(else_out))])
    return model([n("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)],
                 [vi("c", B, []), vi("x", F, [2, 3])], [vi("y", elem, declared)],
                 [numpy_helper.from_array(np.array(else_out, np.int64), "shape")])


def test_if_branches_of_different_ranks_run_when_the_declared_output_allows_it():
    s = olc_core.Session(rank_model(None), strict=True)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(s.run(None, {"c": np.array(True), "x": x})[0], x)
    np.testing.assert_array_equal(s.run(None, {"c": np.array(False), "x": x})[0], x.reshape(6))


def test_if_branches_of_different_sizes_run_under_a_symbolic_dimension():
    s = olc_core.Session(rank_model(["n", "m"], then_out=(2, 3), else_out=(3, 2)), strict=True)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(s.run(None, {"c": np.array(False), "x": x})[0], x.reshape(3, 2))
    np.testing.assert_array_equal(s.run(None, {"c": np.array(True), "x": x})[0], x)


@pytest.mark.parametrize("declared,elem,match", [
    ([2, 3], F, r"else_branch output 0 \('e'\) is float\[6\], not the float\[2, 3\] the node declares"),
    ([4, 3], F, r"then_branch output 0 \('t'\) is float\[2, 3\], not the float\[4, 3\] the node declares"),
    (None, TensorProto.DOUBLE, r"then_branch output 0 \('t'\) is float\[2, 3\], not the double the node declares"),
])
def test_a_branch_contradicting_the_declared_if_output_is_refused_at_construction(declared, elem, match):
    with pytest.raises(olc_core.InvalidModelError, match=r"node 'branch' \(If\): " + match):
        olc_core.Session(rank_model(declared, elem=elem))


def test_a_branch_value_contradicting_the_declared_if_output_names_the_branch_at_run_time():
    # The branch reshapes by a feed: its shape is known only when it runs.
    then_g = helper.make_graph([n("Reshape", ["x", "s"], ["t"])], "then", [], [vi("t")])
    else_g = helper.make_graph([n("Identity", ["x"], ["e"])], "else", [], [vi("e")])
    m = model([n("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)],
              [vi("c", B, []), vi("x", F, [6]), vi("s", I64, ["k"])], [vi("y", F, [6])])
    s = olc_core.Session(m, strict=True)
    feeds = {"c": np.array(True), "x": np.arange(6, dtype=np.float32), "s": np.array([2, 3], np.int64)}
    with pytest.raises(olc_core.OlcError, match=r"node 'branch' \(If\): then_branch output 0 is shape \[2, 3\], "
                                                r"not the float\[6\] the node declares"):
        s.run(None, feeds)
    feeds["s"] = np.array([6], np.int64)
    np.testing.assert_array_equal(s.run(None, feeds)[0], feeds["x"])
    # A value that fit once does not let another shape through after it.
    feeds["s"] = np.array([3, 2], np.int64)
    with pytest.raises(olc_core.OlcError, match=r"then_branch output 0 is shape \[3, 2\]"):
        s.run(None, feeds)


@pytest.mark.parametrize("strict", [True, False])
def test_malformed_subgraphs_are_refused_at_construction_naming_the_node(strict):
    # A branch output no node produces, and a branch node reading a name defined nowhere.
    then_g = helper.make_graph([n("Identity", ["x"], ["t"])], "then", [], [vi("missing")])
    else_g = helper.make_graph([n("Identity", ["x"], ["e"])], "else", [], [vi("e")])
    m = model([n("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)],
              [vi("c", B, []), vi("x", F, [2])], [vi("y")])
    with pytest.raises(olc_core.OlcError, match=r"node 'branch' \(If\): subgraph reads 'missing'"):
        olc_core.Session(m, strict=strict)
    else_g = helper.make_graph([n("Add", ["x", "nowhere"], ["e"])], "else", [], [vi("e")])
    then_g = helper.make_graph([n("Identity", ["x"], ["t"])], "then", [], [vi("t")])
    m = model([n("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)],
              [vi("c", B, []), vi("x", F, [2])], [vi("y")])
    with pytest.raises(olc_core.OlcError, match=r"node 'branch' \(If\): subgraph reads 'nowhere'"):
        olc_core.Session(m, strict=strict)


def _native_threads() -> int:
    import os

    return len(os.listdir("/proc/self/task"))


def test_subgraphs_share_the_sessions_thread_pool():
    # 12 If nodes (24 subgraph sessions) on a 4-thread session: one pool of
    # 3 workers serves them all, not 3 more per subgraph.
    ifs, prev = [], "x"
    for i in range(12):
        then_g = helper.make_graph([helper.make_node("Neg", [prev], [f"t{i}"])], f"then{i}", [],
                                   [helper.make_tensor_value_info(f"t{i}", TensorProto.FLOAT, [4])])
        else_g = helper.make_graph([helper.make_node("Abs", [prev], [f"e{i}"])], f"else{i}", [],
                                   [helper.make_tensor_value_info(f"e{i}", TensorProto.FLOAT, [4])])
        ifs.append(helper.make_node("If", ["c"], [f"y{i}"], name=f"if{i}", then_branch=then_g, else_branch=else_g))
        prev = f"y{i}"
    graph = helper.make_graph(ifs, "many_ifs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
                                                helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [4])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    before = _native_threads()
    s = olc_core.Session(m, threads=4)
    assert _native_threads() - before <= 3
    x = np.array([-1, 2, -3, 4], np.float32)
    np.testing.assert_array_equal(s.run(None, {"x": x, "c": np.array(True)})[0], x)  # Neg applied 12 times
    np.testing.assert_array_equal(s.run(None, {"x": x, "c": np.array(False)})[0], np.abs(x))
    assert _native_threads() - before <= 3


def constant_weight_if_model(w_fed=False, nested=False):
    # then: x + sum(w), w an outer initializer (or, nested, read two
    # subgraphs down); else: x + sum(k), k an outer Constant node's tensor.
    add_w = [n("AddSum", ["x", "w"], ["t"], domain="test.olc", name="add_w")]
    if nested:
        inner_then = helper.make_graph(add_w, "inner_then", [], [vi("t")])
        inner_else = helper.make_graph([n("Scale", ["x"], ["t"], domain="test.olc", factor=0.0)], "inner_else", [],
                                       [vi("t")])
        add_w = [n("If", ["c"], ["t"], name="inner", then_branch=inner_then, else_branch=inner_else)]
    then_g = helper.make_graph(add_w, "then", [], [vi("t")])
    else_g = helper.make_graph([n("AddSum", ["x", "k"], ["e"], domain="test.olc", name="add_k")], "else", [],
                               [vi("e")])
    inputs = [vi("c", B, []), vi("x", F, [2])] + ([vi("w", F, [3])] if w_fed else [])
    return model([n("Constant", [], ["k"], value=numpy_helper.from_array(np.array([10.0, 20.0], np.float32))),
                  n("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)],
                 inputs, [vi("y")], [numpy_helper.from_array(np.array([1.0, 2.0, 4.0], np.float32), "w")])


@pytest.mark.parametrize("nested", [False, True])
def test_outer_constants_are_constants_in_the_branches_and_packed_once(nested, monkeypatch):
    # Fed to the branch at each run, w and k were inputs to its kernels, not
    # constants: a kernel packing its weights packed them again every run
    # (here AddSum refuses a w that is not constant).
    branch_sessions = []
    real_init = control_flow.IfKernel.__init__

    def recording_init(self, label, then_session, else_session, *args, **kwargs):
        branch_sessions.extend([then_session, else_session])
        real_init(self, label, then_session, else_session, *args, **kwargs)

    monkeypatch.setattr(control_flow.IfKernel, "__init__", recording_init)
    s = olc_core.Session(constant_weight_if_model(nested=nested), strict=True)
    x = np.array([0.5, -1.0], np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(s.run(None, {"c": np.array(True), "x": x})[0], x + 7.0)
        np.testing.assert_array_equal(s.run(None, {"c": np.array(False), "x": x})[0], x + 30.0)
    (_, entry) = s.kernel_plan()
    branches = dict(entry.subgraphs)
    assert [e.prepacked_bytes for e in branches["else_branch"]] == [4]
    if not nested:
        assert [e.prepacked_bytes for e in branches["then_branch"]] == [4]
    # The branches take what may change from run to run (x; the inner If
    # also c), none of the constants.
    assert len(branch_sessions) == (4 if nested else 2)
    for sub in branch_sessions:
        assert {i.name for i in sub.get_inputs()} <= {"x", "c"}


def test_an_initializer_a_feed_may_replace_stays_an_input_of_the_branch():
    # w is also a graph input: a feed may change it, so the branch must read
    # it at each run, and AddSum (which takes only constants) is refused.
    with pytest.raises(olc_core.OlcError, match=r"subgraph 'then_branch': .*'add_w' \(AddSum\): input 1 must be a "
                                                r"float32 initializer"):
        olc_core.Session(constant_weight_if_model(w_fed=True), strict=True)
