"""The preprocessing operators of scikit-learn pipelines on strict olc
sessions, against onnxruntime where it runs the case and a numpy reference
written here where it does not (types it does not register, ranks it
refuses): Scaler, Normalizer, Binarizer, Imputer, FeatureVectorizer,
ArrayFeatureExtractor, OneHotEncoder, LabelEncoder (1, 2, 4),
CategoryMapper, ZipMap, DictVectorizer and CastMap."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import olc_core
from olc_core.testing import guarded, one_node_model, run_on_every_level

RNG = np.random.default_rng(11)
F, D, I64, I32, S = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.INT32, TensorProto.STRING
NP = {F: np.float32, D: np.float64, I64: np.int64, I32: np.int32}


def model(op, inputs, outputs, attrs, opset=1):
    return one_node_model(op, inputs, outputs, attrs, opset=opset, domain="ai.onnx.ml")


def olc_run(m, feeds, kernel=None):
    s = olc_core.Session(m, strict=True, record_usage=True)
    out = s.run(None, feeds)
    if kernel:
        assert s.kernel_usage() == [kernel], s.kernel_usage()
    return out


def ort_run(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def values(elem, shape):
    x = RNG.normal(0, 3, size=shape)
    return (np.round(x) if NP[elem]().dtype.kind == "i" else x).astype(NP[elem])


# ---- Scaler ----------------------------------------------------------------

@pytest.mark.parametrize("elem", [F, D, I64, I32])
@pytest.mark.parametrize("per_column", [True, False])
def test_scaler(elem, per_column):
    f = 5 if per_column else 1
    scale, offset = RNG.uniform(0.5, 2, f).astype(np.float32), RNG.normal(size=f).astype(np.float32)
    m = model("Scaler", [("x", elem, [None, 5])], [("y", F, None)],
              {"scale": scale.tolist(), "offset": offset.tolist()})
    x = values(elem, (31, 5))
    (got,) = olc_run(m, {"x": x}, "olc_ml::Scaler")
    if elem == D:
        ref = ((x - offset.astype(np.float64)) * scale.astype(np.float64)).astype(np.float32)
    else:
        ref = (x.astype(np.float32) - offset) * scale
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, ort_run(m, {"x": x})[0])


@pytest.mark.parametrize("n", [1, 7, 8, 9, 15, 16, 17, 33])
def test_scaler_at_every_level_against_guard_pages(n):
    scale, offset = RNG.uniform(0.5, 2, n).astype(np.float32), RNG.normal(size=n).astype(np.float32)
    m = model("Scaler", [("x", F, [None, n])], [("y", F, None)], {"scale": scale.tolist(), "offset": offset.tolist()})
    x = RNG.normal(size=(3, n)).astype(np.float32)
    for at in ("end", "start"):
        for level, (y,) in run_on_every_level(m, {"x": guarded(x, at=at)}, expected_kernel="olc_ml::Scaler").items():
            np.testing.assert_array_equal(y, (x - offset) * scale, err_msg=level)


def test_scaler_with_the_wrong_feature_count():
    m = model("Scaler", [("x", F, [None, 3])], [("y", F, None)], {"scale": [1.0, 2.0], "offset": [0.0, 0.0]})
    with pytest.raises(olc_core.OlcError, match=r"node 'node' \(Scaler\): scale has 2 values for 3 features"):
        olc_core.Session(m, strict=True)


# ---- Normalizer ------------------------------------------------------------

@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("elem", [F, D, I64, I32])
def test_normalizer(norm, elem):
    m = model("Normalizer", [("x", elem, [None, 6])], [("y", F, None)], {"norm": norm})
    x = values(elem, (20, 6))
    x[3] = 0  # a zero row stays as it is
    x[4, :] = -np.abs(x[4, :]) - 1  # a row whose max is negative
    got, want = olc_run(m, {"x": x}, "olc_ml::Normalizer")[0], ort_run(m, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_normalizer_with_nan():
    m = model("Normalizer", [("x", F, [None, 3])], [("y", F, None)], {"norm": "L2"})
    x = np.array([[1, np.nan, 2], [3, 4, 0]], np.float32)
    np.testing.assert_allclose(olc_run(m, {"x": x})[0], ort_run(m, {"x": x})[0])


# ---- Binarizer -------------------------------------------------------------

@pytest.mark.parametrize("elem", [F, D, I64, I32])
def test_binarizer(elem):
    m = model("Binarizer", [("x", elem, None)], [("y", elem, None)], {"threshold": 0.5})
    x = values(elem, (4, 7, 3))
    (got,) = olc_run(m, {"x": x}, "olc_ml::Binarizer")
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, (x.astype(np.float32) > 0.5).astype(x.dtype))
    if elem == F:
        np.testing.assert_array_equal(got, ort_run(m, {"x": x})[0])


def test_binarizer_nan_is_not_greater():
    # onnxruntime refuses a NaN input; the schema: not greater than the threshold, 0.
    m = model("Binarizer", [("x", F, None)], [("y", F, None)], {"threshold": -1.0})
    x = guarded(np.array([np.nan, 0.0, -2.0, np.inf, -np.inf] * 7, np.float32))
    for level, (y,) in run_on_every_level(m, {"x": x}).items():
        np.testing.assert_array_equal(y, np.array([0, 1, 0, 1, 0] * 7, np.float32), err_msg=level)


# ---- Imputer ---------------------------------------------------------------

@pytest.mark.parametrize("elem", [F, D, I64, I32])
@pytest.mark.parametrize("per_column", [True, False])
@pytest.mark.parametrize("replace_nan", [True, False])
def test_imputer(elem, per_column, replace_nan):
    integer = NP[elem]().dtype.kind == "i"
    if integer and replace_nan:
        pytest.skip("integers have no NaN")
    f = 4
    x = values(elem, (25, f))
    attrs = {}
    if integer:
        imputed = RNG.integers(-9, 9, f if per_column else 1)
        attrs.update(imputed_value_int64s=imputed.tolist(), replaced_value_int64=1)
        hit = x == 1
    else:
        imputed = RNG.normal(size=f if per_column else 1).astype(np.float32)
        attrs.update(imputed_value_floats=imputed.tolist(), replaced_value_float=np.nan if replace_nan else 1.0)
        if replace_nan:
            x[RNG.random(x.shape) < 0.3] = np.nan
            hit = np.isnan(x)
        else:
            x[RNG.random(x.shape) < 0.3] = 1.0
            hit = x == 1.0
    m = model("Imputer", [("x", elem, [None, f])], [("y", elem, None)], attrs)
    (got,) = olc_run(m, {"x": x}, "olc_ml::Imputer")
    ref = np.where(hit, np.broadcast_to(imputed.astype(x.dtype), x.shape), x)
    np.testing.assert_array_equal(got, ref)
    if elem in (F, I64):
        np.testing.assert_array_equal(got, ort_run(m, {"x": x})[0])


def test_imputer_needs_values_for_its_type():
    m = model("Imputer", [("x", I64, [None, 2])], [("y", I64, None)], {"imputed_value_floats": [1.0]})
    with pytest.raises(olc_core.OlcError, match="a int64 input needs imputed_value_int64s"):
        olc_core.Session(m, strict=True)


# ---- FeatureVectorizer -----------------------------------------------------

@pytest.mark.parametrize("elems", [[F, F, F, F], [I64] * 4, [D] * 4, [F, I64, D, I32]])
def test_feature_vectorizer(elems):
    xs = [values(e, (6, c)) for e, c in zip(elems, (3, 1, 4, 2))]
    dims = [3, 2, 2, 2]  # a wider slot is zero-padded, a narrower one drops columns
    m = one_node_model("FeatureVectorizer", [(f"x{k}", e, list(x.shape)) for k, (e, x) in enumerate(zip(elems, xs))],
                       [("y", F, None)], {"inputdimensions": dims}, opset=1, domain="ai.onnx.ml")
    feeds = {f"x{k}": x for k, x in enumerate(xs)}
    (got,) = olc_run(m, feeds, "olc_ml::FeatureVectorizer")
    ref = np.zeros((6, sum(dims)), np.float32)
    col = 0
    for x, d in zip(xs, dims):
        take = min(d, x.shape[1])
        ref[:, col:col + take] = x[:, :take]
        col += d
    np.testing.assert_array_equal(got, ref)
    if len(set(elems)) == 1:  # onnxruntime binds every input to one type
        np.testing.assert_array_equal(got, ort_run(m, feeds)[0])


# ---- ArrayFeatureExtractor -------------------------------------------------

@pytest.mark.parametrize("elem", [F, D, I64, I32, S])
@pytest.mark.parametrize("shape", [(7,), (4, 7), (2, 3, 7)])
def test_array_feature_extractor(elem, shape):
    x = np.array([f"w{v}" for v in range(np.prod(shape))], dtype=object).reshape(shape) if elem == S \
        else values(elem, shape)
    idx = np.array([6, 0, 2, 2], np.int64)
    m = model("ArrayFeatureExtractor", [("x", elem, None), ("i", I64, None)], [("z", elem, None)], {})
    (got,) = olc_run(m, {"x": x, "i": idx})
    ref = x[..., idx]
    np.testing.assert_array_equal(got, ref.reshape(1, -1) if x.ndim == 1 else ref)
    np.testing.assert_array_equal(got, ort_run(m, {"x": x, "i": idx})[0])


@pytest.mark.parametrize("elem", [F, S])
def test_array_feature_extractor_index_out_of_range(elem):
    m = model("ArrayFeatureExtractor", [("x", elem, None), ("i", I64, None)], [("z", elem, None)], {})
    x = np.array([["a", "b"]], dtype=object) if elem == S else np.ones((1, 2), np.float32)
    s = olc_core.Session(m, strict=True)
    for bad in (2, -1):
        with pytest.raises(olc_core.OlcError, match=rf"node 'node' \(ArrayFeatureExtractor\).*Y\[0\] = {bad} is out"):
            s.run(None, {"x": x, "i": np.array([bad], np.int64)})


# ---- OneHotEncoder ---------------------------------------------------------

@pytest.mark.parametrize("elem", [I64, I32, F, D])
def test_one_hot_numbers(elem):
    cats = [3, -1, 7, 0]
    x = RNG.choice([3, -1, 7, 0, 5], size=(8, 2)).astype(NP[elem])
    if elem in (F, D):
        x[0, 0] = 3.7  # truncated to 3, as onnxruntime casts
        x[1, 1] = -0.5  # truncated to 0
        x[2, 0] = np.nan  # no category
    m = model("OneHotEncoder", [("x", elem, [None, 2])], [("y", F, None)], {"cats_int64s": cats, "zeros": 1})
    (got,) = olc_run(m, {"x": x}, "olc_ml::OneHotEncoder")
    safe = np.where(np.isfinite(x.astype(np.float64)), x.astype(np.float64), 1e9)
    ref = (np.trunc(safe)[..., None] == np.array(cats)).astype(np.float32)
    np.testing.assert_array_equal(got, ref)
    if elem != I32:  # onnxruntime registers no int32 OneHotEncoder
        x_ort = x.copy()
        if elem in (F, D):
            x_ort[2, 0] = 5  # its cast of NaN is undefined behaviour
            ref[2, 0] = 0
        np.testing.assert_array_equal(olc_run(m, {"x": x_ort})[0], ort_run(m, {"x": x_ort})[0])


def test_one_hot_strings():
    cats = ["red", "green", "blue"]
    x = np.array([["green", "red"], ["pink", "blue"]], dtype=object)
    m = model("OneHotEncoder", [("x", S, [None, 2])], [("y", F, None)], {"cats_strings": cats})
    (got,) = olc_run(m, {"x": x})
    np.testing.assert_array_equal(got, ort_run(m, {"x": x})[0])
    assert got.shape == (2, 2, 3)


@pytest.mark.parametrize("elem", [I64, S])
def test_one_hot_unknown_category_without_zeros(elem):
    attrs = {"cats_strings": ["a"]} if elem == S else {"cats_int64s": [1]}
    m = model("OneHotEncoder", [("x", elem, None)], [("y", F, None)], {**attrs, "zeros": 0})
    x = np.array(["a", "b"], dtype=object) if elem == S else np.array([1, 2], np.int64)
    with pytest.raises(olc_core.OlcError, match=r"node 'node' \(OneHotEncoder\).*element 1 is not a known category"):
        olc_core.Session(m, strict=True).run(None, {"x": x})


# ---- LabelEncoder, CategoryMapper ------------------------------------------

KEYS = {"string": ["a", "b", "c", "zz"], "int64": [5, -3, 9, 0], "float": [0.5, -1.0, float("nan"), 0.0]}
VALS = {"string": ["x", "y", "z", "w"], "int64": [10, 20, 30, 40], "float": [1.5, 2.5, -3.5, 4.5]}
INPUT = {"string": np.array(["b", "q", "a", "zz", "c"], dtype=object),
         "int64": np.array([[9, 1], [5, 0]], np.int64),
         "float": np.array([0.5, np.nan, 7.0, -0.0, -1.0], np.float32)}
ELEM = {"string": S, "int64": I64, "float": F}


@pytest.mark.parametrize("key", ["string", "int64", "float"])
@pytest.mark.parametrize("value", ["string", "int64", "float"])
@pytest.mark.parametrize("defaults", [False, True])
def test_label_encoder_v2(key, value, defaults):
    attrs = {f"keys_{key}s": KEYS[key], f"values_{value}s": VALS[value]}
    if defaults:
        attrs.update(default_string="?", default_int64=-9, default_float=0.25)
    for opset in (2, 4):
        m = model("LabelEncoder", [("x", ELEM[key], None)], [("y", ELEM[value], None)], attrs, opset=opset)
        x = INPUT[key]
        got, want = olc_run(m, {"x": x})[0], ort_run(m, {"x": x})[0]
        assert got.shape == want.shape and got.dtype == want.dtype
        if key == "float" and opset == 2:
            # The schema at opset 2: keys compared bit by bit, so the NaN key
            # finds the input NaN and the 0.0 key not -0.0 (onnxruntime
            # compares as floats and finds no NaN).
            np.testing.assert_array_equal(got[[0, 2, 4]], want[[0, 2, 4]])
            fallback = {"string": "?" if defaults else "_Unused", "int64": -9 if defaults else -1,
                        "float": 0.25 if defaults else -0.0}[value]
            assert got[1] == VALS[value][2] and got[3] == fallback
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("key_type,value_type", [(np.int16, np.float64), (np.float64, np.int32), (np.int32, np.int16),
                                                 (np.int64, np.int16)])
def test_label_encoder_v4_tensors(key_type, value_type):
    keys = np.array([1, 2, 3, 70], key_type)
    vals = np.array([7, 8, 9, 10], value_type)
    attrs = {"keys_tensor": numpy_helper.from_array(keys), "values_tensor": numpy_helper.from_array(vals),
             "default_tensor": numpy_helper.from_array(np.array([-1], value_type))}
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(key_type))
    out_elem = helper.np_dtype_to_tensor_dtype(np.dtype(value_type))
    m = model("LabelEncoder", [("x", elem, None)], [("y", out_elem, None)], attrs, opset=4)
    x = np.array([[3, 1, 5], [70, 2, 0]], key_type)
    (got,) = olc_run(m, {"x": x})
    assert got.dtype == value_type
    # onnxruntime implements none of these type pairs: the expected values.
    np.testing.assert_array_equal(got, np.array([[9, 7, -1], [10, 8, -1]], value_type))


def test_label_encoder_v1():
    to_int = model("LabelEncoder", [("x", S, None)], [("y", I64, None)],
                   {"classes_strings": ["a", "b"], "default_int64": -3})
    x = np.array(["b", "a", "z"], dtype=object)
    np.testing.assert_array_equal(olc_run(to_int, {"x": x})[0], ort_run(to_int, {"x": x})[0])
    to_str = model("LabelEncoder", [("x", I64, None)], [("y", S, None)],
                   {"classes_strings": ["a", "b"], "default_string": "?"})
    i = np.array([1, 0, 5, -1], np.int64)
    np.testing.assert_array_equal(olc_run(to_str, {"x": i})[0], ort_run(to_str, {"x": i})[0])


def test_label_encoder_repeated_keys():
    # Opset 4's schema: the last value of a repeated key; before it, the first
    # (as onnxruntime at every opset).
    for opset, want in ((2, [10, 20]), (4, [30, 20])):
        m = model("LabelEncoder", [("x", I64, None)], [("y", I64, None)],
                  {"keys_int64s": [1, 2, 1], "values_int64s": [10, 20, 30]}, opset=opset)
        assert olc_run(m, {"x": np.array([1, 2], np.int64)})[0].tolist() == want


def test_category_mapper():
    attrs = {"cats_strings": ["cat", "dog"], "cats_int64s": [1, 7], "default_int64": -1, "default_string": "?"}
    s2i = model("CategoryMapper", [("x", S, None)], [("y", I64, None)], attrs)
    x = np.array(["dog", "eel", "cat"], dtype=object)
    np.testing.assert_array_equal(olc_run(s2i, {"x": x})[0], ort_run(s2i, {"x": x})[0])
    i2s = model("CategoryMapper", [("x", I64, None)], [("y", S, None)], attrs)
    i = np.array([[7, 2], [1, 1]], np.int64)
    np.testing.assert_array_equal(olc_run(i2s, {"x": i})[0], ort_run(i2s, {"x": i})[0])


# ---- ZipMap, DictVectorizer, CastMap ---------------------------------------

def _seq_of_maps(key):
    return helper.make_sequence_type_proto(helper.make_map_type_proto(key, helper.make_tensor_type_proto(F, [])))


@pytest.mark.parametrize("labels", [[5, 1, 3], ["b", "a", "c"]])
@pytest.mark.parametrize("shape", [(4, 3), (3,), (0, 3)])
def test_zip_map(labels, shape):
    key = S if isinstance(labels[0], str) else I64
    attrs = {"classlabels_strings" if key == S else "classlabels_int64s": labels}
    node = helper.make_node("ZipMap", ["x"], ["z"], domain="ai.onnx.ml", name="node", **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, None)],
                          [helper.make_value_info("z", _seq_of_maps(key))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
    m.ir_version = 9
    x = RNG.random(shape).astype(np.float32)
    s = olc_core.Session(m, strict=True)
    (got,) = s.run(None, {"x": x})
    (want,) = ort_run(m, {"x": x})
    assert got == want
    assert [list(d) for d in got] == [list(d) for d in want]  # the same key order
    assert s.get_outputs()[0].type == ort.InferenceSession(m.SerializeToString()).get_outputs()[0].type
    with pytest.raises(olc_core.OlcError, match=r"node 'node' \(ZipMap\).*2 scores per row for 3 class labels"):
        s.run(None, {"x": np.zeros((2, 2), np.float32)})


def _map_input(key, value):
    return helper.make_value_info("m", helper.make_map_type_proto(key, helper.make_tensor_type_proto(value, [])))


def _map_model(op, key, value, out_elem, attrs):
    node = helper.make_node(op, ["m"], ["y"], domain="ai.onnx.ml", name="node", **attrs)
    g = helper.make_graph([node], "g", [_map_input(key, value)], [helper.make_tensor_value_info("y", out_elem, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
    m.ir_version = 9
    return m


def test_dict_vectorizer():
    m = _map_model("DictVectorizer", S, F, F, {"string_vocabulary": ["a", "b", "c"]})
    feed = {"m": {"a": 1.5, "c": 2.0, "unknown": 9.0}}
    got = olc_run(m, feed)[0]
    np.testing.assert_array_equal(got, ort_run(m, feed)[0])
    m64 = _map_model("DictVectorizer", I64, F, F, {"int64_vocabulary": [4, 2]})
    feed = {"m": {2: 0.5, 3: 7.0}}
    np.testing.assert_array_equal(olc_run(m64, feed)[0], ort_run(m64, feed)[0])


@pytest.mark.parametrize("attrs", [{"cast_to": "TO_FLOAT"}, {"cast_to": "TO_STRING"}, {"cast_to": "TO_INT64"},
                                   {"cast_to": "TO_FLOAT", "map_form": "SPARSE", "max_map": 5},
                                   {"cast_to": "TO_INT64", "map_form": "SPARSE", "max_map": 3}])
def test_cast_map(attrs):
    out = {"TO_FLOAT": F, "TO_STRING": S, "TO_INT64": I64}[attrs["cast_to"]]
    m = _map_model("CastMap", I64, F, out, attrs)
    feed = {"m": {4: 1.5, 1: 2.7, 2: -3.5, 0: 1e10}}
    got, want = olc_run(m, feed)[0], ort_run(m, feed)[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_cast_map_of_strings():
    # onnxruntime's Python API cannot feed map(int64, string): a reference here.
    m = _map_model("CastMap", I64, S, F, {"cast_to": "TO_FLOAT"})
    np.testing.assert_array_equal(olc_run(m, {"m": {3: "2.5", 1: "-1"}})[0], [[-1.0, 2.5]])
    with pytest.raises(olc_core.OlcError, match=r"node 'node' \(CastMap\).*cannot cast 'x' to a number"):
        olc_run(m, {"m": {1: "x"}})
