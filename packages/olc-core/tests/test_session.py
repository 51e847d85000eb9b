"""Session, dispatch and run-loop tests that need no kernel family.

Native paths use the test kernels compiled into olc-core (``olc_core_test::*``)
registered through an in-process plugin, exactly as a family registers.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import olc_core
from olc_core import KernelRegistration, _native, hookimpl

OPSET = 17


def make_model(nodes, inputs, outputs, initializers=(), opset=OPSET):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def tensor(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


class ScalePlugin:
    """Registers the core test kernels for a made-up op in a private domain."""

    def __init__(self, priority: int = 0):
        self.priority = priority

    @hookimpl
    def olc_register_kernels(self):
        return [
            KernelRegistration("test.olc", "Scale", "olc_core_test::Scale", {"T": ("float32",)}, ("T",),
                               _native._test_vtable("scale"), outputs=("T",), priority=self.priority,
                               family="olc-core-tests"),
            KernelRegistration("test.olc", "Fail", "olc_core_test::Fail", {"T": ("float32",)}, ("T",),
                               _native._test_vtable("fail"), family="olc-core-tests"),
            KernelRegistration("test.olc", "WrongAbi", "olc_core_test::WrongAbi", {"T": ("float32",)}, ("T",),
                               _native._test_vtable("wrong_abi"), family="olc-core-tests"),
            KernelRegistration("test.olc", "AddSum", "olc_core_test::AddSum", {"T": ("float32",)}, ("T", "T"),
                               _native._test_vtable("add_sum"), outputs=("T",), family="olc-core-tests"),
            KernelRegistration("test.olc", "PyDouble", "olc_core_test::PyDouble", {"T": ("float32", "float64")},
                               ("T",), lambda node: (lambda x: [x * 2]), family="olc-core-tests"),
        ]


@pytest.fixture
def scale_plugin():
    plugin = ScalePlugin()
    olc_core.register_plugin(plugin, name="olc-core-tests")
    yield plugin
    olc_core.unregister_plugin(plugin)


def scale_model(n_nodes=1, shape=(4,), factor=-1.0):
    names = ["x"] + [f"y{i}" for i in range(n_nodes)]
    nodes = [
        helper.make_node("Scale", [names[i]], [names[i + 1]], domain="test.olc", name=f"scale{i}", factor=factor)
        for i in range(n_nodes)
    ]
    model = make_model(nodes, [tensor("x", shape=list(shape))], [tensor(names[-1], shape=list(shape))])
    model.opset_import.append(helper.make_opsetid("test.olc", 1))
    return model


# ------------------------------------------------------------- dispatch


def test_native_kernel_is_dispatched_and_recorded(scale_plugin):
    s = olc_core.Session(scale_model(3, factor=2.0), record_usage=True)
    plan = s.kernel_plan()
    assert [p.kernel for p in plan] == ["olc_core_test::Scale"] * 3
    assert all(p.native for p in plan)
    x = np.array([1, -2, 3.5, 0], np.float32)
    (y,) = s.run(None, {"x": x})
    np.testing.assert_array_equal(y, x * 8)
    assert s.kernel_usage() == ["olc_core_test::Scale"] * 3
    assert s.kernel_usage_details() == ["olc_core_test::Scale[scalar]"] * 3
    # The feed is untouched although intermediates are reused in place.
    np.testing.assert_array_equal(x, [1, -2, 3.5, 0])


def test_constant_inputs_reach_create(scale_plugin):
    weights = onnx.numpy_helper.from_array(np.array([1.0, 2.0, 3.5], np.float32), "w")
    node = helper.make_node("AddSum", ["x", "w"], ["y"], domain="test.olc", name="as")
    model = make_model([node], [tensor("x", shape=[2])], [tensor("y", shape=[2])], initializers=[weights])
    model.opset_import.append(helper.make_opsetid("test.olc", 1))
    (y,) = olc_core.Session(model).run(None, {"x": np.array([0.0, 1.0], np.float32)})
    np.testing.assert_array_equal(y, [6.5, 7.5])
    # An initializer that is also a graph input can be fed: it is not constant.
    model.graph.input.append(tensor("w", shape=[3]))
    with pytest.raises(olc_core.OlcError, match=r"node 'as' \(AddSum\): input 1 must be a float32 initializer"):
        olc_core.Session(model)


@pytest.mark.parametrize("size", [3, 300_000])
def test_nodes_of_constants_alone_are_constants_for_the_kernels_after_them(scale_plugin, size):
    # w = Squeeze(Unsqueeze(initializer)) as exporters write weights (Silero
    # VAD's LSTM): evaluated while the session is made, so the AddSum after
    # it (which takes only constants, and packs them) gets a constant. An
    # output past the fold limit (1 MiB) is not kept: that AddSum refuses.
    w = np.linspace(-1.0, 2.0, size, dtype=np.float32)
    inits = [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(np.array([0], np.int64), "ax")]
    nodes = [helper.make_node("Unsqueeze", ["w", "ax"], ["w1"], name="unsq"),
             helper.make_node("Squeeze", ["w1", "ax"], ["w2"], name="sq"),
             helper.make_node("AddSum", ["x", "w2"], ["y"], domain="test.olc", name="as")]
    model = make_model(nodes, [tensor("x", shape=[2])], [tensor("y", shape=[2])], initializers=inits)
    model.opset_import.append(helper.make_opsetid("test.olc", 1))
    if size * 4 > (1 << 20):
        with pytest.raises(olc_core.OlcError, match=r"node 'as' \(AddSum\): input 1 must be a float32 initializer"):
            olc_core.Session(model)
        return
    s = olc_core.Session(model, strict=True)
    (y,) = s.run(None, {"x": np.array([0.0, 1.0], np.float32)})
    np.testing.assert_allclose(y, [w.sum(), 1.0 + w.sum()], rtol=1e-6)
    plan = {e.node_name: e for e in s.kernel_plan()}
    assert plan["as"].prepacked_bytes == 4
    assert plan["unsq"].shape_plan == plan["sq"].shape_plan == "folded"


def test_prepacked_bytes_are_reported_per_node_and_shared_once(scale_plugin):
    # AddSum "packs" its constant input (its sum, 4 bytes) keyed by that
    # constant: two nodes on one initializer share it, a second initializer
    # is another buffer; a kernel that packs nothing reports 0.
    w1 = onnx.numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w1")
    w2 = onnx.numpy_helper.from_array(np.array([3.0], np.float32), "w2")
    nodes = [helper.make_node("AddSum", ["x", "w1"], ["a"], domain="test.olc", name="n1"),
             helper.make_node("AddSum", ["a", "w1"], ["b"], domain="test.olc", name="n2"),
             helper.make_node("AddSum", ["b", "w2"], ["c"], domain="test.olc", name="n3"),
             helper.make_node("Scale", ["c"], ["y"], domain="test.olc", name="n4", factor=1.0)]
    model = make_model(nodes, [tensor("x", shape=[2])], [tensor("y", shape=[2])], initializers=[w1, w2])
    model.opset_import.append(helper.make_opsetid("test.olc", 1))
    s = olc_core.Session(model)
    assert [e.prepacked_bytes for e in s.kernel_plan()] == [4, 4, 4, 0]
    assert s.prepacked_bytes() == 8
    (y,) = s.run(None, {"x": np.array([0.0, 1.0], np.float32)})
    np.testing.assert_array_equal(y, [9.0, 10.0])


def test_usage_recording_is_off_by_default(scale_plugin):
    s = olc_core.Session(scale_model(2))
    s.run(None, {"x": np.ones(4, np.float32)})
    assert s.kernel_usage() == []


def test_python_kernel_factory(scale_plugin):
    model = make_model([helper.make_node("PyDouble", ["x"], ["y"], domain="test.olc")],
                       [tensor("x", TensorProto.DOUBLE, [3])], [tensor("y", TensorProto.DOUBLE, [3])])
    model.opset_import.append(helper.make_opsetid("test.olc", 1))
    s = olc_core.Session(model, record_usage=True)
    assert s.kernel_plan()[0].kernel == "olc_core_test::PyDouble"
    assert not s.kernel_plan()[0].native
    (y,) = s.run(None, {"x": np.array([1.0, 2.0, -3.0])})
    np.testing.assert_array_equal(y, [2.0, 4.0, -6.0])
    assert s.kernel_usage() == ["olc_core_test::PyDouble"]


def test_fallback_runs_reference_and_says_why():
    # Det: an op no olc family claims (families may be installed alongside).
    model = make_model([helper.make_node("Det", ["a"], ["c"], name="det")],
                       [tensor("a", shape=[2, 3, 3])], [tensor("c", shape=[2])])
    s = olc_core.Session(model, record_usage=True)
    (entry,) = s.kernel_plan()
    assert entry.kernel == "onnx.reference::Det" and not entry.native
    assert "no kernel is registered for ai.onnx::Det" in entry.reason
    a = np.random.default_rng(0).standard_normal((2, 3, 3)).astype(np.float32)
    (c,) = s.run(None, {"a": a})
    np.testing.assert_allclose(c, np.linalg.det(a.astype(np.float64)), rtol=1e-5)
    assert s.kernel_usage() == ["onnx.reference::Det"]


def test_fallback_on_uncovered_type_and_opset(scale_plugin):
    model = make_model([helper.make_node("Scale", ["x"], ["y"], domain="test.olc", name="s64")],
                       [tensor("x", TensorProto.DOUBLE, [2])], [tensor("y", TensorProto.DOUBLE, [2])])
    model.opset_import.append(helper.make_opsetid("test.olc", 1))
    with pytest.raises(olc_core.NoKernelError, match=r"node 's64' \(Scale\).*float64.*strict"):
        olc_core.Session(model, strict=True)


def test_strict_refuses_fallback_at_construction():
    model = make_model([helper.make_node("Det", ["a"], ["c"], name="det")],
                       [tensor("a", shape=[2, 2])], [tensor("c", shape=[])])
    with pytest.raises(olc_core.NoKernelError, match=r"node 'det' \(Det\)"):
        olc_core.Session(model, strict=True)


def test_strict_accepts_all_native_model(scale_plugin):
    s = olc_core.Session(scale_model(2), strict=True)
    assert s.strict


def test_conflict_between_equal_priorities_is_an_error(scale_plugin):
    other = ScalePlugin()
    olc_core.register_plugin(other, name="duplicate")
    try:
        with pytest.raises(olc_core.DispatchConflictError, match="olc_core_test::Scale"):
            olc_core.registered_kernels()
    finally:
        olc_core.unregister_plugin(other)


def test_priority_decides_between_overlapping_registrations(scale_plugin):
    winner = ScalePlugin(priority=5)

    class Renamed:
        @hookimpl
        def olc_register_kernels(self):
            return [KernelRegistration("test.olc", "Scale", "olc_core_test::ScaleHigh", {"T": ("float32",)}, ("T",),
                                       _native._test_vtable("scale"), priority=5)]

    plugin = Renamed()
    olc_core.register_plugin(plugin)
    try:
        s = olc_core.Session(scale_model(1))
        assert s.kernel_plan()[0].kernel == "olc_core_test::ScaleHigh"
    finally:
        olc_core.unregister_plugin(plugin)
    del winner


def test_registration_validates_itself():
    with pytest.raises(ValueError, match="library-qualified"):
        KernelRegistration("", "Abs", "Abs", {"T": ("float32",)}, ("T",), None)
    with pytest.raises(ValueError, match="unknown element type"):
        KernelRegistration("", "Abs", "x::Abs", {"T": ("float33",)}, ("T",), None)
    r = KernelRegistration("", "Abs", "x::Abs", {"T": ("float32",)}, ("T",), None)
    assert r.domain == "ai.onnx"
    assert r.match_types(("float32",)) is None
    assert "float64" in r.match_types(("float64",))


def test_omitted_optional_input_matches_any_constraint():
    # Gemm-like: C optional and constrained like A and B. "" (omitted) is
    # accepted and binds nothing; None (unknown type) is not.
    r = KernelRegistration("", "Gemm", "x::Gemm", {"T": ("float32", "float64")}, ("T", "T", "T"), None,
                           outputs=("T",))
    assert r.match_types(("float32", "float32", "")) is None
    assert r.output_types(("float32", "float32", "")) == ("float32",)
    assert "not known" in r.match_types(("float32", "float32", None))
    assert "different types" in r.match_types(("float32", "float64", ""))


def test_core_alone_registers_only_its_own_kernels_and_still_runs():
    code = (
        "import numpy as np, olc_core\n"
        "from onnx import helper, TensorProto\n"
        "fams = {r.family for r in olc_core.registered_kernels()}\n"
        "assert fams == {'olc-core'}, fams\n"
        "g = helper.make_graph([helper.make_node('Abs', ['x'], ['y'])], 'g',"
        " [helper.make_tensor_value_info('x', TensorProto.FLOAT, [2])],"
        " [helper.make_tensor_value_info('y', TensorProto.FLOAT, [2])])\n"
        "m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])\n"
        "s = olc_core.Session(m)\n"
        "print(s.run(None, {'x': np.array([-1, 2], np.float32)})[0].tolist(), s.kernel_plan()[0].kernel)\n"
    )
    env = dict(os.environ, OLC_DISABLE_PLUGIN_AUTOLOAD="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[1.0, 2.0] onnx.reference::Abs"


# -------------------------------------------------------------- errors


def test_malformed_model_bytes():
    with pytest.raises(olc_core.InvalidModelError, match="cannot parse"):
        olc_core.Session(b"\x08\x01this is not a model\xff\xff")


def test_missing_model_file(tmp_path):
    with pytest.raises(olc_core.InvalidModelError, match="not found"):
        olc_core.Session(str(tmp_path / "missing.onnx"))


def test_undefined_node_input_is_reported():
    model = make_model([helper.make_node("Abs", ["nope"], ["y"], name="a0")],
                       [tensor("x", shape=[1])], [tensor("y", shape=[1])])
    with pytest.raises(olc_core.InvalidModelError, match=r"node 'a0' \(Abs\): input 'nope'"):
        olc_core.Session(model)


@pytest.mark.parametrize("case", ["two nodes", "a graph input", "an initializer", "one node twice"])
def test_a_name_defined_twice_is_an_invalid_model(case):
    """Graphs are in single-assignment form: a second definition of a name is
    refused at construction, naming the node and the first definition."""
    nodes = [helper.make_node("Abs", ["x"], ["t"], name="a0"), helper.make_node("Neg", ["x"], ["t"], name="n0")]
    inits = []
    if case == "a graph input":
        nodes = [helper.make_node("Abs", ["x"], ["x"], name="n0")]
    elif case == "an initializer":
        inits = [onnx.numpy_helper.from_array(np.ones(1, np.float32), "w")]
        nodes = [helper.make_node("Abs", ["x"], ["w"], name="n0")]
    elif case == "one node twice":
        nodes = [helper.make_node("Split", ["x"], ["t", "t"], name="n0", axis=0, num_outputs=2)]
    first = {"two nodes": r"node 'a0' \(Abs\)", "one node twice": r"node 'n0' \(Split\)"}.get(case, case)
    graph = helper.make_graph(nodes, "g", [tensor("x", shape=[2])], [tensor(nodes[-1].output[0])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(olc_core.InvalidModelError, match=rf"node 'n0' \(\w+\): output '\w' is already produced by {first}"):
        olc_core.Session(model)


def test_feed_errors_name_the_input_and_consumer(scale_plugin):
    s = olc_core.Session(scale_model(1))
    with pytest.raises(olc_core.OlcError, match=r"missing feed for graph input 'x' \(consumed by node 'scale0'"):
        s.run(None, {})
    with pytest.raises(olc_core.OlcError, match=r"'x'.*dtype float64, the model declares float32"):
        s.run(None, {"x": np.ones(4)})
    with pytest.raises(olc_core.OlcError, match=r"'x'.*shape \(5,\), the model declares \(4,\)"):
        s.run(None, {"x": np.ones(5, np.float32)})
    with pytest.raises(olc_core.OlcError, match=r"feed 'z' is not an input"):
        s.run(None, {"x": np.ones(4, np.float32), "z": np.ones(1)})
    with pytest.raises(olc_core.OlcError, match="unknown output name 'q'"):
        s.run(["q"], {"x": np.ones(4, np.float32)})


def test_graph_input_name_not_utf8_is_refused_not_a_crash():
    # Found by tools/fuzz_models.py (a flipped byte in an input's name): the
    # runtime's feed key was a null pointer, and run() crashed on it.
    model = make_model([helper.make_node("Identity", ["x"], ["y"])],
                       [tensor("x", shape=[2]), tensor("enXs", shape=[1])], [tensor("y", shape=[2])])
    data = model.SerializeToString().replace(b"enXs", b"en\x8es")
    with pytest.raises(olc_core.OlcError, match=r"graph input name 'en\\x8es' is not valid UTF-8"):
        olc_core.Session(data).run(None, {"x": np.ones(2, np.float32)})


def _if_model():
    """y = If(c) { then: Neg(x) } { else: Identity(x) }: names inside a subgraph."""
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"], name="neg")], "then", [], [tensor("t", shape=[2])])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="ident")], "else", [],
                               [tensor("e", shape=[2])])
    node = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)
    return make_model([node], [tensor("x", shape=[2]), tensor("c", TensorProto.BOOL, shape=[])],
                      [tensor("y", shape=["Dim"])])


# (placeholder in the valid model, bytes replacing it, what the error says):
# every name the session reads, found by tools/fuzz_models.py as a
# UnicodeDecodeError escaping from deep inside the session or a graph pass.
_NOT_UTF8 = {
    "node name": ("NODEX", b"NO\xff\xfeX", r"node 'NO\\xff\\xfeX' \(Relu\): name 'NO\\xff\\xfeX' is not valid UTF-8"),
    "node output": ("midXX", b"mi\xc3(X", r"node 'NODEX' \(Relu\): output 0 'mi\\xc3\(X' is not valid UTF-8"),
    "graph input": ("inpXX", b"in\x80XX", r"graph input name 'in\\x80XX' is not valid UTF-8"),
    "attribute name": ("alpha", b"alph\xe9", r"node 'leaky' \(LeakyRelu\): attribute name 'alph\\xe9' is not valid"),
    "graph output": ("outXX", b"ou\xffXX", r"graph output name 'ou\\xffXX' is not valid UTF-8"),
    "symbolic dim": ("DimXX", b"Di\xffXX", r"graph input 'inpXX': symbolic dimension 'Di\\xffXX' is not valid UTF-8"),
}


@pytest.mark.parametrize("fusion", [True, False], ids=["fusion", "no-fusion"])
@pytest.mark.parametrize("case", sorted(_NOT_UTF8))
def test_names_not_utf8_are_refused_at_creation_naming_the_node(case, fusion):
    nodes = [helper.make_node("Relu", ["inpXX"], ["midXX"], name="NODEX"),
             helper.make_node("LeakyRelu", ["midXX"], ["outXX"], name="leaky", alpha=0.5)]
    model = make_model(nodes, [tensor("inpXX", shape=["DimXX", 2])], [tensor("outXX", shape=["DimXX", 2])])
    olc_core.Session(model.SerializeToString(), fusion=fusion)  # valid as built
    placeholder, bad, message = _NOT_UTF8[case]
    data = model.SerializeToString()
    assert placeholder.encode() in data and len(bad) == len(placeholder)
    with pytest.raises(olc_core.InvalidModelError, match=message):
        olc_core.Session(data.replace(placeholder.encode(), bad), fusion=fusion)


def test_a_subgraph_name_not_utf8_names_the_node_and_the_subgraph():
    (y,) = olc_core.Session(_if_model()).run(None, {"x": np.ones(2, np.float32), "c": np.array(True)})
    np.testing.assert_array_equal(y, -np.ones(2, np.float32))
    data = _if_model().SerializeToString()
    assert data.count(b"ident") == 1
    with pytest.raises(olc_core.InvalidModelError,
                       match=r"node 'branch' \(If\), subgraph 'else_branch': node 'id\\xffnt' \(Identity\): name"):
        olc_core.Session(data.replace(b"ident", b"id\xffnt"))


def test_native_error_messages_show_bytes_that_are_not_utf8_as_escapes():
    # A kernel's message quotes the node's strings and may be cut inside a
    # multi-byte character by its fixed-size buffer: an OlcError with \x
    # escapes, not a UnicodeDecodeError. The Scale test kernel refuses an
    # int factor.
    node = {"name": b"sc\xc3", "domain": "test.olc", "op_type": "Scale", "opset": 1, "input_dtypes": [1],
            "input_ranks": [1], "output_dtypes": [1], "attributes": [("factor", int(onnx.AttributeProto.INT), 3)],
            "input_constants": [None]}
    with pytest.raises(olc_core.OlcError, match=r"^node 'sc\\xc3' \(Scale\): attribute 'factor' must be a float$"):
        _native.create_kernel(_native._test_vtable("scale"), node)


def test_kernel_creation_error_names_node(scale_plugin):
    model = scale_model(1)
    del model.graph.node[0].attribute[:]
    model.graph.node[0].attribute.append(helper.make_attribute("factor", 3))  # int, not float
    with pytest.raises(olc_core.OlcError, match=r"node 'scale0' \(Scale\): attribute 'factor' must be a float"):
        olc_core.Session(model)


def test_kernel_run_error_names_node(scale_plugin):
    model = make_model([helper.make_node("Fail", ["x"], ["y"], domain="test.olc", name="f0")],
                       [tensor("x", shape=[2])], [tensor("y", shape=[2])])
    model.opset_import.append(helper.make_opsetid("test.olc", 1))
    s = olc_core.Session(model)
    with pytest.raises(olc_core.OlcError, match=r"node 'f0' \(Fail\): deliberate failure"):
        s.run(None, {"x": np.ones(2, np.float32)})


def test_wrong_abi_version_is_refused(scale_plugin):
    model = make_model([helper.make_node("WrongAbi", ["x"], ["y"], domain="test.olc", name="w")],
                       [tensor("x", shape=[2])], [tensor("y", shape=[2])])
    model.opset_import.append(helper.make_opsetid("test.olc", 1))
    with pytest.raises(olc_core.OlcError, match=r"node 'w' \(WrongAbi\).*built for kernel ABI"):
        olc_core.Session(model)


def test_fallback_error_names_node():
    # Reshape to an impossible shape: a clear error naming the node at run time.
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [7])
    model = make_model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="r")],
                       [tensor("x", shape=[4])], [tensor("y", shape=None)], initializers=[shape])
    s = olc_core.Session(model)
    with pytest.raises(olc_core.OlcError, match=r"node 'r' \(Reshape\)"):
        s.run(None, {"x": np.ones(4, np.float32)})


# ------------------------------------------------------------ run loop


def test_model_from_path_bytes_and_external_data(tmp_path, scale_plugin):
    weights = np.arange(1024, dtype=np.float32)
    init = onnx.numpy_helper.from_array(weights, "w")
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])],
                       [tensor("x", shape=[1024])], [tensor("y", shape=[1024])], initializers=[init])
    path = tmp_path / "m.onnx"
    in_memory = model.SerializeToString()
    external = onnx.ModelProto()
    external.CopyFrom(model)
    onnx.save_model(external, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").exists()
    x = np.ones(1024, np.float32)
    for source in (str(path), path, in_memory, model):
        (y,) = olc_core.Session(source).run(None, {"x": x})
        np.testing.assert_array_equal(y, weights + 1)
    # Once rewritten to reference weights.bin, the proto alone cannot be run.
    with pytest.raises(olc_core.InvalidModelError, match="external data"):
        olc_core.Session(external)


def test_initializer_inputs_can_be_overridden_and_outputs_are_copies():
    init = onnx.numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "b")
    graph = helper.make_graph([helper.make_node("Identity", ["b"], ["y"])], "g", [tensor("b", shape=[2])],
                              [tensor("y", shape=[2])], initializer=[init])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    s = olc_core.Session(model)
    (y,) = s.run(None, {})
    np.testing.assert_array_equal(y, [1, 2])
    y[:] = 99  # must not alter the session's initializer
    np.testing.assert_array_equal(s.run(None, {})[0], [1, 2])
    np.testing.assert_array_equal(s.run(None, {"b": np.array([5, 6], np.float32)})[0], [5, 6])


def test_large_initializers_and_constants_get_memory_of_their_own():
    """From 4 MiB an initializer's or a Constant node's value is a read-only
    array owning its memory (numpy advises huge pages for it), not a view of
    the protobuf's bytes; smaller ones may stay views. Values unchanged."""
    from olc_core.graph_passes import OWN_MEMORY_MIN_BYTES, constant_node_value, tensor_value

    big = np.arange(OWN_MEMORY_MIN_BYTES // 4, dtype=np.float32).reshape(1024, -1)
    for value in (tensor_value(onnx.numpy_helper.from_array(big)),
                  constant_node_value(helper.make_node("Constant", [], ["c"],
                                                       value=onnx.numpy_helper.from_array(big)))):
        assert value.flags.owndata and not value.flags.writeable and value.flags.c_contiguous
        np.testing.assert_array_equal(value, big)
    small = tensor_value(onnx.numpy_helper.from_array(big[:2]))
    np.testing.assert_array_equal(small, big[:2])
    # Through a session: the large initializer as an output (a copy) and read by a node.
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [], [tensor("y", shape=list(big.shape))],
                              initializer=[onnx.numpy_helper.from_array(big, "w")])
    s = olc_core.Session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]))
    (y,) = s.run(None, {})
    np.testing.assert_array_equal(y, big)
    y[:] = -1  # the output is the caller's to write
    np.testing.assert_array_equal(s.run(None, {})[0], big)


def test_zero_size_and_selected_outputs(scale_plugin):
    model = scale_model(2, shape=(0, 3))
    s = olc_core.Session(model)
    (y,) = s.run(["y1"], {"x": np.zeros((0, 3), np.float32)})
    assert y.shape == (0, 3) and y.dtype == np.float32


def test_threads_split_large_inputs_identically(scale_plugin):
    n = 1 << 20
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    model = scale_model(4, shape=(n,), factor=1.5)
    y1 = olc_core.Session(model, threads=1).run(None, {"x": x})[0]
    s2 = olc_core.Session(model, threads=2)
    assert s2.threads == 2
    y2 = s2.run(None, {"x": x})[0]
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_allclose(y1, x * np.float32(1.5) ** 4, rtol=1e-6)


def test_executor_covers_every_index_once_and_nests_inline():
    for threads, n, grain in [(1, 1000, 10), (2, 100000, 64), (4, 12345, 1), (3, 5, 100), (2, 0, 1)]:
        probe = _native.executor_probe(threads, n, grain)
        assert probe["min_hits"] == (1 if n else 0) and probe["max_hits"] == (1 if n else 0)
    nested = _native.executor_probe(2, 50000, 16, 0, True)
    assert nested["min_hits"] == 1 and nested["max_hits"] == 1 and not nested["nested_escaped"]
    limited = _native.executor_probe(4, 100000, 1, 1)
    assert limited["threads_used"] == 1


def _machine_busy_s() -> tuple[float, float]:
    """CPU seconds the whole machine has spent busy so far, and those the
    hypervisor has stolen from its vCPUs (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    steal = int(fields[8]) if len(fields) > 8 else 0
    hz = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / hz, steal / hz


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def test_executor_gives_each_thread_the_same_span_every_run():
    """Run after run, the caller takes the first half of the chunks and the
    worker the second (a kernel repeated over the same buffers finds its
    part in the caches of the thread that had it last time), and a
    participant whose span is done takes from the other's far end."""
    # One participant admitted: the caller runs everything, span by span.
    alone = _native.executor_probe(2, 64, 1, 1, False, 2, 0)
    assert all(owners == [0] * 64 for owners in alone["owners"])
    # Three threads, uneven ranges: every index exactly once per run.
    odd = _native.executor_probe(3, 1001, 7, 0, False, 5, 0)
    assert odd["min_hits"] == 5 and odd["max_hits"] == 5
    runs = 10
    halves = [0] * 32 + [1] * 32

    def spans_kept(owners):
        # Whatever the timing: the caller starts its span (the first half)
        # from the front, the worker its own from the front, and whoever
        # takes from the other's span takes from its far end.
        first, second = owners[:32], owners[32:]
        return owners[0] == 0 and first == sorted(first) and second == sorted(second, reverse=True)

    # Who ran which half needs the worker awake within 2 ms of the call,
    # which a 2-vCPU VM cannot always promise: a hypervisor pause that no
    # counter reports can hold it back for a few runs. Such a pause is rare
    # and short, so one of three tries must show it; a broken split fails
    # all three (and the invariant above on every run).
    # Under ThreadSanitizer one try checks the invariant; its slowdown never
    # gives the 2 ms, so more tries would only repeat the skip.
    tsan = os.environ.get("OLC_SANITIZER") == "thread"
    noisy = []
    for _ in range(1 if tsan else 3):
        # 64 indices on two threads: 32 chunks of 2, each range sleeping 2
        # ms, so the worker is awake long before the caller could reach its
        # span.
        (busy_before, steal_before), own_before, start = _machine_busy_s(), _own_cpu_s(), time.perf_counter()
        probe = _native.executor_probe(2, 64, 1, 0, False, runs, 2000)
        (busy_after, steal_after), wall = _machine_busy_s(), time.perf_counter() - start
        others = (busy_after - busy_before - (_own_cpu_s() - own_before)) / wall
        stolen = (steal_after - steal_before) / wall
        assert probe["min_hits"] == runs and probe["max_hits"] == runs
        assert all(spans_kept(owners) for owners in probe["owners"]), probe["owners"]
        if tsan:
            pytest.skip("a property of timing: ThreadSanitizer's slowdown")
        if others > 0.25 or stolen > 0.1:
            # Neither a host whose other processes hold a CPU nor a VM whose
            # hypervisor reports taking its vCPUs away can promise the 2 ms.
            noisy.append(f"other processes took {others:.2f} CPUs, the hypervisor {stolen:.2f}")
            continue
        if sum(owners == halves for owners in probe["owners"]) >= runs - 2:
            return
    if len(noisy) == 3:
        pytest.skip("a property of timing: " + "; ".join(noisy))
    pytest.fail(f"no try gave each thread its own half in {runs - 2} of {runs} runs: {probe['owners']}")


def test_executor_cuts_each_span_into_up_to_sixteen_chunks():
    """Each participant's span is cut into up to sixteen chunks of at least
    `grain` items, the unit in which a faster thread takes over the work of
    a slower one."""
    def sizes(threads, n, grain):
        ranges = _native.executor_probe(threads, n, grain)["ranges"]
        assert [b for b, _ in ranges] == [0] + [e for _, e in ranges[:-1]] and ranges[-1][1] == n  # a partition
        return [e - b for b, e in ranges]

    assert sizes(2, 64, 1) == [2] * 32
    assert sizes(2, 64, 4) == [4] * 16  # grain-sized chunks: 8 per span
    assert sizes(2, 6400, 1) == [200] * 32
    assert sizes(2, 20, 1) == [1] * 20  # fewer items than chunks
    assert sorted(sizes(3, 1000, 1)) == [20] * 8 + [21] * 40  # spans of 334, 333, 333


def test_concurrent_runs_match_serial(scale_plugin):
    # Native nodes around a fallback node: exercises GIL hand-offs too.
    nodes = [
        helper.make_node("Scale", ["x"], ["a"], domain="test.olc", factor=2.0),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Scale", ["b"], ["y"], domain="test.olc", factor=-1.0),
    ]
    model = make_model(nodes, [tensor("x", shape=["n"])], [tensor("y", shape=["n"])])
    model.opset_import.append(helper.make_opsetid("test.olc", 1))
    s = olc_core.Session(model, threads=2)
    rng = np.random.default_rng(2)
    feeds = [rng.standard_normal(int(rng.integers(1, 20000))).astype(np.float32) for _ in range(8)]
    expected = [s.run(None, {"x": f})[0] for f in feeds]
    errors: list[str] = []

    def worker(tid: int) -> None:
        for i in range(1000):
            k = (tid + i) % len(feeds)
            (y,) = s.run(None, {"x": feeds[k]})
            if not np.array_equal(y, expected[k]):
                errors.append(f"thread {tid} run {i}")
                return

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
@pytest.mark.skipif(bool(os.environ.get("OLC_SANITIZER")), reason="AddressSanitizer quarantines freed memory")
def test_runs_do_not_grow_memory(scale_plugin):
    model = scale_model(5, shape=(4096,))
    s = olc_core.Session(model, threads=2, record_usage=True)
    x = np.ones(4096, np.float32)
    for _ in range(2000):  # warm allocator and caches
        s.run(None, {"x": x})
    gc.collect()
    before = _rss_bytes()
    for _ in range(10000):
        s.run(None, {"x": x})
    gc.collect()
    grown = _rss_bytes() - before
    assert grown < 1 << 20, f"resident memory grew by {grown} bytes over 10,000 runs"


def test_hookspecs_are_documented():
    from olc_core import hookspecs

    specs = [name for name in dir(hookspecs) if name.startswith("olc_")]
    assert specs == ["olc_register_graph_passes", "olc_register_kernels"]
    for name in specs:
        assert getattr(hookspecs, name).__doc__, name


class RaisingPlugin:
    @hookimpl
    def olc_register_kernels(self):
        raise KeyError("stale extension")


def test_plugin_whose_hook_raises_is_reported_not_fatal(scale_plugin):
    # The other plugins' kernels stay usable; the failure is listed with the plugin's name.
    bad = RaisingPlugin()
    with pytest.warns(RuntimeWarning, match="olc_register_kernels failed: KeyError"):
        olc_core.register_plugin(bad, name="raising-plugin")
        s = olc_core.Session(scale_model(1), strict=True)
    try:
        assert any("'raising-plugin'" in e and "stale extension" in e for e in olc_core.plugin_load_errors())
        (y,) = s.run(None, {"x": np.ones(4, np.float32)})
        np.testing.assert_array_equal(y, -np.ones(4, np.float32))
    finally:
        olc_core.unregister_plugin(bad)
    assert not any("'raising-plugin'" in e for e in olc_core.plugin_load_errors())


def test_constant_nodes_are_plan_constants_and_strict_accepts_them():
    from onnx.reference import ReferenceEvaluator

    n = helper.make_node
    nodes = [n("Constant", [], ["t"], value=helper.make_tensor("v", TensorProto.INT32, [2, 2], [1, -2, 3, 4])),
             n("Constant", [], ["f"], value_float=2.5), n("Constant", [], ["fs"], value_floats=[1.0, -0.5]),
             n("Constant", [], ["i"], value_int=-7), n("Constant", [], ["is"], value_ints=[3, 0, 9])]
    types = (TensorProto.INT32, TensorProto.FLOAT, TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT64)
    m = make_model(nodes, [], [tensor(o, t) for o, t in zip(("t", "f", "fs", "i", "is"), types)])
    s = olc_core.Session(m, strict=True)
    got = s.run(None, {})
    for g, w in zip(got, ReferenceEvaluator(m).run(None, {})):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    assert {e.kernel for e in s.kernel_plan()} == {"olc_core::Constant"}
    # A string constant is left to the fallback, which strict mode refuses.
    strings = make_model([n("Constant", [], ["s"], value=helper.make_tensor("v", TensorProto.STRING, [1], [b"a"]))],
                         [], [tensor("s", TensorProto.STRING)])
    with pytest.raises(olc_core.OlcError, match="strict mode refuses"):
        olc_core.Session(strings, strict=True)


def test_graph_pass_contexts_hold_constant_node_values():
    """build_context adds the graph's Constant node tensors to the
    constants it is given (an initializer of the same name wins); a
    malformed Constant tensor is left out there and refused at session
    creation, naming the node."""
    from olc_core.graph_passes import build_context

    n = helper.make_node
    nodes = [n("Constant", [], ["c"], value=helper.make_tensor("v", TensorProto.FLOAT, [2], [1.5, -2.0])),
             n("Constant", [], ["i"], value_ints=[3, 4]),
             n("Constant", [], ["s"], value=helper.make_tensor("v", TensorProto.STRING, [1], [b"a"])),
             n("Add", ["x", "c"], ["y"])]
    g = helper.make_graph(nodes, "g", [tensor("x")], [tensor("y")])
    ctx = build_context(g, [f"n{i}" for i in range(4)], {}, {"i": np.array([9], np.int64)}, {"ai.onnx": 17},
                        [()] * 4)
    np.testing.assert_array_equal(ctx.constants["c"], np.array([1.5, -2.0], np.float32))
    np.testing.assert_array_equal(ctx.constants["i"], [9])
    assert "s" not in ctx.constants and "y" not in ctx.constants
    bad = helper.make_tensor("v", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
    bad.ClearField("float_data")
    bad.raw_data = b"\0" * 3  # 3 bytes for 4 floats
    broken = make_model([n("Constant", [], ["c"], name="broken_const", value=bad), n("Add", ["x", "c"], ["y"])],
                        [tensor("x")], [tensor("y")])
    g2 = broken.graph
    assert "c" not in build_context(g2, ["a", "b"], {}, {}, {"ai.onnx": 17}, [()] * 2).constants
    with pytest.raises(olc_core.InvalidModelError, match="Constant node 'broken_const' cannot be read"):
        olc_core.Session(broken)


def _tv(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


@pytest.mark.parametrize("case", ["loop_body_outputs", "loop_body_inputs", "if_branch_outputs", "scan_body",
                                  "subgraph_reads_undefined"])
def test_malformed_control_flow_is_refused_at_construction(case):
    n = helper.make_node
    cond_id = n("Identity", ["cond_in"], ["cond_out"])
    loop_inputs = [_tv("i", TensorProto.INT64, []), _tv("cond_in", TensorProto.BOOL, []), _tv("v_in")]
    if case == "loop_body_outputs":  # no value for the loop-carried v
        body = helper.make_graph([cond_id], "b", loop_inputs, [_tv("cond_out", TensorProto.BOOL, [])])
        node, match = n("Loop", ["M", "", "v0"], ["v"], name="cf", body=body), r"the body returns 1 values"
    elif case == "loop_body_inputs":
        body = helper.make_graph([cond_id, n("Identity", ["cond_in"], ["v_out"])], "b", loop_inputs[:2],
                                 [_tv("cond_out", TensorProto.BOOL, []), _tv("v_out", TensorProto.BOOL, [])])
        node, match = n("Loop", ["M", "", "v0"], ["v"], name="cf", body=body), r"the body takes 2 inputs"
    elif case == "if_branch_outputs":
        one = helper.make_graph([n("Identity", ["v0"], ["a"])], "t", [], [_tv("a")])
        two = helper.make_graph([n("Identity", ["v0"], ["b"]), n("Identity", ["v0"], ["c"])], "e", [],
                                [_tv("b"), _tv("c")])
        node, match = n("If", ["c"], ["v"], name="cf", then_branch=one, else_branch=two), r"else_branch has 2 outputs"
    elif case == "scan_body":
        body = helper.make_graph([n("Identity", ["s"], ["s2"])], "b", [_tv("s"), _tv("x_i")], [_tv("s2")])
        node, match = (n("Scan", ["v0", "v0"], ["v", "ys"], name="cf", body=body, num_scan_inputs=1),
                       r"the body returns 1 values, the node has 2 outputs")
    else:
        branch = helper.make_graph([n("Identity", ["nowhere"], ["a"])], "t", [], [_tv("a")])
        node, match = (n("If", ["c"], ["v"], name="cf", then_branch=branch, else_branch=branch),
                       r"subgraph reads 'nowhere'")
    graph = helper.make_graph([node], "g", [_tv("M", TensorProto.INT64, []), _tv("c", TensorProto.BOOL, []),
                                            _tv("v0", TensorProto.FLOAT, [2])], [_tv("v")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    with pytest.raises(olc_core.OlcError, match=r"node 'cf' \((Loop|If|Scan)\): " + match):
        olc_core.Session(model)


def test_an_output_declared_without_element_type_is_no_crash():
    # blocksize 0 makes shape inference fail, so nothing types y, which the
    # graph declares without an element type: the session must still build,
    # and the bad attribute is the node's clear error.
    graph = helper.make_graph([helper.make_node("DepthToSpace", ["x"], ["y"], name="d2s", blocksize=0)], "g",
                              [tensor("x", TensorProto.FLOAT, [1, 4, 2, 2])], [helper.make_tensor_value_info("y", 0, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    with pytest.raises(olc_core.OlcError, match=r"node 'd2s' \(DepthToSpace\)"):
        s = olc_core.Session(model)
        assert [o.name for o in s.get_outputs()] == ["y"]
        s.run(None, {"x": np.ones((1, 4, 2, 2), np.float32)})


def test_unknown_element_type_codes_are_invalid_models_not_key_errors():
    # A corrupt model (a flipped byte) may carry element type codes onnx does
    # not know: a clear InvalidModelError or OlcError, never a KeyError.
    init = onnx.numpy_helper.from_array(np.ones(2, np.float32), "w")
    init.data_type = 127
    model = make_model([helper.make_node("Identity", ["w"], ["y"])], [], [tensor("y", shape=None)],
                       initializers=[init])
    with pytest.raises(olc_core.InvalidModelError, match=r"initializer 'w' cannot be read \(unknown element type 127\)"):
        olc_core.Session(model)
    x = helper.make_tensor_value_info("x", 127, [2])
    model = make_model([helper.make_node("Identity", ["x"], ["y"])], [x], [tensor("y", shape=None)])
    with pytest.raises(olc_core.InvalidModelError, match="graph input 'x' has unknown element type 127"):
        olc_core.Session(model)
