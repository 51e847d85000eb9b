"""olc-ml's Python kernels: the operators over strings and maps, which a
native kernel cannot see (the runtime holds string tensors, maps and
sequences as Python objects), and the string-labelled classifiers.

Each factory takes the node's :class:`olc_core.NodeInfo`, validates the
attributes once (a ValueError names the problem; the session reports it with
the node's name) and returns the callable the session runs. Work over
arrays is done by numpy on whole arrays (lookups by ``np.searchsorted`` on
sorted keys, never a Python call per element), except where the values are
Python objects anyway (the dicts ZipMap returns, the maps DictVectorizer
and CastMap read). Semantics are onnxruntime's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np
import onnx
from onnx import helper, numpy_helper

import olc_core
from olc_core.session import TYPE_CODES

Kernel = Callable[..., list[Any]]


def _fail(why: str) -> NoReturn:
    """A bad input seen at run time (the session's error names the node)."""
    raise ValueError(why)


def _decode(v: Any) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def _strings(values: Any) -> np.ndarray:
    """A 1-D object array of str from an attribute's list of bytes."""
    return np.array([_decode(v) for v in values], dtype=object)


def _as_strings(x: Any) -> np.ndarray:
    """A string tensor (object, unicode or bytes array) as an object array of str."""
    x = np.asarray(x)
    if x.dtype.kind == "S":
        return np.vectorize(_decode, otypes=[object])(x) if x.size else x.astype(object)
    if x.dtype.kind not in "OU":
        _fail(f"expected a string tensor, got {x.dtype}")
    return x.astype(object)


def _string_output(values: np.ndarray) -> np.ndarray:
    """String outputs as onnxruntime returns them: object arrays of str."""
    return np.asarray(values, dtype=object)


class Lookup:
    """Maps keys to values over whole arrays: keys sorted once, each input
    found by binary search; a missing key takes the default. Float keys
    compare as floats (-0.0 finds 0.0) and a NaN key matches NaN inputs
    (LabelEncoder 4's rule). A repeated key keeps its last value
    (LabelEncoder 4's rule), or its first with ``first=True`` (onnxruntime's
    at every opset; the earlier schemas say nothing)."""

    def __init__(self, keys: np.ndarray, values: np.ndarray, default: Any, first: bool = False):
        keys = np.asarray(keys)
        self.float_keys = keys.dtype.kind == "f"
        self.nan_value = None
        if self.float_keys:
            nan = np.isnan(keys)
            if nan.any():
                self.nan_value = values[np.flatnonzero(nan)[-1]]
            keys, values = keys[~nan], values[~nan]
            keys = keys + 0.0  # -0.0 -> +0.0: one key for both zeros
        # Sort stably (the reversed lists for the last occurrence), keep the first of each key.
        rk, rv = (keys, values) if first else (keys[::-1], values[::-1])
        order = np.argsort(rk, kind="stable")
        sk, sv = rk[order], rv[order]
        unique = np.ones(len(sk), dtype=bool)
        if len(sk) > 1:
            unique[1:] = sk[1:] != sk[:-1]
        self.keys, self.values = sk[unique], sv[unique]
        self.default = default

    def __call__(self, x: np.ndarray, out_dtype: Any) -> np.ndarray:
        flat = x.reshape(-1)
        if self.float_keys:
            flat = flat.astype(np.float64) + 0.0
        out = np.empty(flat.shape, dtype=out_dtype)
        out[...] = self.default
        if len(self.keys):
            pos = np.searchsorted(self.keys, flat)
            pos = np.minimum(pos, len(self.keys) - 1)
            hit = self.keys[pos] == flat
            out[hit] = self.values[pos[hit]]
        if self.nan_value is not None:
            out[np.isnan(flat)] = self.nan_value
        return out.reshape(x.shape)


def _key_array(values: Sequence[Any], kind: str) -> np.ndarray:
    if kind == "string":
        return _strings(values)
    if kind == "float":
        return np.asarray(values, dtype=np.float64)
    return np.asarray(values, dtype=np.int64)


def label_encoder(info: Any) -> Kernel:
    """LabelEncoder 1 (classes_strings), 2 (keys_* / values_*, defaults by
    type) and 4 (also keys_tensor / values_tensor / default_tensor)."""
    a = info.attributes
    if "classes_strings" in a:  # opset 1: string -> index, or index -> string
        classes = _strings(a["classes_strings"])
        if info.input_types[0] == "string":
            lookup = Lookup(classes, np.arange(len(classes), dtype=np.int64), int(a.get("default_int64", -1)))
            return lambda x: [lookup(_as_strings(x), np.int64)]
        missing = _decode(a.get("default_string", b"_Unused"))

        def to_string(x: Any) -> list[Any]:
            idx = np.asarray(x, dtype=np.int64)
            ok = (idx >= 0) & (idx < len(classes))
            out = np.full(idx.shape, missing, dtype=object)
            out[ok] = classes[idx[ok]]
            return [out]

        return to_string
    keys_given = [k for k in ("keys_strings", "keys_int64s", "keys_floats", "keys_tensor") if k in a]
    values_given = [k for k in ("values_strings", "values_int64s", "values_floats", "values_tensor") if k in a]
    if len(keys_given) != 1 or len(values_given) != 1:
        raise ValueError("exactly one keys_* and one values_* attribute must be set")

    def as_array(name: str) -> np.ndarray:
        v = a[name]
        if name.endswith("_tensor"):
            arr = numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)
            arr = arr.reshape(-1)
            return arr.astype(object) if arr.dtype.kind in "OUS" else arr
        return _key_array(v, {"strings": "string", "int64s": "int", "floats": "float"}[name.split("_")[1]])

    keys, values = as_array(keys_given[0]), as_array(values_given[0])
    if len(keys) != len(values):
        raise ValueError(f"{keys_given[0]} has {len(keys)} entries, {values_given[0]} {len(values)}")
    if keys.dtype == object:
        keys = np.array([_decode(k) for k in keys], dtype=object)
    if values.dtype == object:
        values = np.array([_decode(v) for v in values], dtype=object)
    out_type = info.output_types[0]
    out_dtype: Any = object if out_type == "string" else np.dtype(helper.tensor_dtype_to_np_dtype(TYPE_CODES[out_type]))
    if "default_tensor" in a:
        d = a["default_tensor"]
        d_arr = (numpy_helper.to_array(d) if isinstance(d, onnx.TensorProto) else np.asarray(d)).reshape(-1)
        if d_arr.size != 1:
            raise ValueError("default_tensor must hold one value")
        default: Any = _decode(d_arr[0]) if out_dtype is object else d_arr[0]
    elif out_dtype is object:
        default = _decode(a.get("default_string", b"_Unused"))
    elif out_dtype.kind == "f":
        default = float(a.get("default_float", -0.0))
    else:
        default = int(a.get("default_int64", -1))
    string_keys = keys.dtype == object
    values = values if out_dtype is object else values.astype(out_dtype)
    if keys.dtype.kind == "f" and info.opset < 4:
        # Opsets 2-3 compare float keys bit by bit (a NaN key finds the same
        # NaN, -0.0 is not 0.0); from opset 4 as floats, NaN finding any NaN.
        bits = Lookup(keys.astype(np.float32).view(np.int32), values, default, first=True)
        return lambda x: [bits(np.ascontiguousarray(x, dtype=np.float32).view(np.int32), out_dtype)]
    lookup = Lookup(keys, values, default, first=info.opset < 4)

    def run(x: Any) -> list[Any]:
        x = _as_strings(x) if string_keys else np.asarray(x)
        return [lookup(x, out_dtype)]

    return run


def category_mapper(info: Any) -> Kernel:
    """CategoryMapper: strings to their int64 category, or back."""
    a = info.attributes
    strings = _strings(a.get("cats_strings", []))
    ints = np.asarray(a.get("cats_int64s", []), dtype=np.int64)
    if len(strings) != len(ints):
        raise ValueError(f"cats_strings has {len(strings)} entries, cats_int64s {len(ints)}")
    if info.input_types[0] == "string":
        to_int = Lookup(strings, ints, int(a.get("default_int64", -1)))
        return lambda x: [to_int(_as_strings(x), np.int64)]
    to_str = Lookup(ints, strings, _decode(a.get("default_string", b"_Unused")))
    return lambda x: [to_str(np.asarray(x, dtype=np.int64), object)]


def zip_map(info: Any) -> Kernel:
    """ZipMap: each row of scores as a dict {label: score}, the labels in
    ascending order (onnxruntime's map order), the scores as Python floats."""
    a = info.attributes
    if ("classlabels_strings" in a) == ("classlabels_int64s" in a):
        raise ValueError("exactly one of classlabels_strings and classlabels_int64s must be set")
    labels: list[Any] = ([_decode(s) for s in a["classlabels_strings"]] if "classlabels_strings" in a
                         else [int(v) for v in a["classlabels_int64s"]])
    if not labels:
        raise ValueError("no class labels")
    order = sorted(range(len(labels)), key=lambda k: (labels[k].encode() if isinstance(labels[k], str)
                                                        else labels[k], k))
    # The dicts are built in C++ (olc_ml._ext.ZipRows), which checks the shape.
    zip_rows = olc_core.load_extension("olc_ml._ext").ZipRows([labels[k] for k in order], order)
    return lambda x: [zip_rows(x)]


def _map_items(m: Any) -> list[tuple[Any, Any]]:
    if not isinstance(m, dict):
        _fail(f"expected a map (a dict), got {type(m).__name__}")
    return list(m.items())


def dict_vectorizer(info: Any) -> Kernel:
    """DictVectorizer: a map (or a sequence of maps: one row each) as a row
    of the vocabulary's values, zero for a word the map lacks; keys outside
    the vocabulary are ignored."""
    a = info.attributes
    if ("string_vocabulary" in a) == ("int64_vocabulary" in a):
        raise ValueError("exactly one of string_vocabulary and int64_vocabulary must be set")
    vocab: list[Any] = ([_decode(s) for s in a["string_vocabulary"]] if "string_vocabulary" in a
                        else [int(v) for v in a["int64_vocabulary"]])
    column = {k: i for i, k in enumerate(vocab)}
    out_type = info.output_types[0] or "float32"
    dtype: Any = object if out_type == "string" else np.dtype(helper.tensor_dtype_to_np_dtype(TYPE_CODES[out_type]))
    zero: Any = "" if dtype is object else 0

    def run(x: Any) -> list[Any]:
        maps = x if isinstance(x, list) else [x]
        out = np.full((len(maps), len(vocab)), zero, dtype=dtype)
        for r, m in enumerate(maps):
            for k, v in _map_items(m):
                c = column.get(_decode(k) if isinstance(k, (str, bytes)) else k)
                if c is not None:
                    out[r, c] = v
        return [out]

    return run


def cast_map(info: Any) -> Kernel:
    """CastMap: a map from int64 keys as a [1, n] tensor, its values in key
    order (DENSE) or at the position their key names (SPARSE, max_map
    values; keys outside [0, max_map) dropped), cast to float32, int64
    (truncated) or strings (floats written with six decimals)."""
    a = info.attributes
    cast_to = _decode(a.get("cast_to", b"TO_FLOAT"))
    form = _decode(a.get("map_form", b"DENSE"))
    max_map = int(a.get("max_map", 1))
    if cast_to not in ("TO_FLOAT", "TO_STRING", "TO_INT64"):
        raise ValueError(f"unknown cast_to {cast_to!r} (TO_FLOAT, TO_STRING or TO_INT64)")
    if form not in ("DENSE", "SPARSE"):
        raise ValueError(f"unknown map_form {form!r} (DENSE or SPARSE)")
    if form == "SPARSE" and max_map < 1:
        raise ValueError("max_map must be positive for the SPARSE form")

    def cast(v: Any) -> Any:
        if cast_to == "TO_STRING":
            return v if isinstance(v, str) else f"{float(np.float32(v)):f}"
        try:
            f = float(v)
        except ValueError:
            _fail(f"cannot cast {v!r} to a number")
        if cast_to == "TO_FLOAT":
            return f
        if not math.isfinite(f):
            _fail(f"cannot cast {v!r} to int64")
        return int(f)

    dtype: Any = {"TO_FLOAT": np.float32, "TO_INT64": np.int64, "TO_STRING": object}[cast_to]
    zero: Any = "" if cast_to == "TO_STRING" else 0

    def run(x: Any) -> list[Any]:
        items = sorted((int(k), v) for k, v in _map_items(x))
        if form == "DENSE":
            return [np.array([[cast(v) for _, v in items]], dtype=dtype).reshape(1, len(items))]
        out = np.full((1, max_map), zero, dtype=dtype)
        for k, v in items:
            if 0 <= k < max_map:
                out[0, k] = cast(v)
        return [out]

    return run


def one_hot_strings(info: Any) -> Kernel:
    """OneHotEncoder over strings: a row of len(cats_strings) per value."""
    a = info.attributes
    cats = _strings(a.get("cats_strings", []))
    if not len(cats):
        raise ValueError("a string input needs cats_strings")
    zeros = int(a.get("zeros", 1))
    lookup = Lookup(cats, np.arange(len(cats), dtype=np.int64), -1)

    def run(x: Any) -> list[Any]:
        x = _as_strings(x)
        idx = lookup(x, np.int64).reshape(-1)
        if not zeros and (idx < 0).any():
            _fail(f"element {int(np.flatnonzero(idx < 0)[0])} is not a known category and zeros is 0")
        out = np.zeros((idx.size, len(cats)), dtype=np.float32)
        hit = idx >= 0
        out[np.flatnonzero(hit), idx[hit]] = 1.0
        return [out.reshape((*x.shape, len(cats)))]

    return run


def array_feature_extractor_strings(info: Any) -> Kernel:
    """ArrayFeatureExtractor over strings: X[..., Y]."""

    def run(x: Any, y: Any) -> list[Any]:
        x = _as_strings(x)
        idx = np.asarray(y, dtype=np.int64).reshape(-1)
        if x.ndim < 1:
            _fail("X must have at least one dimension")
        if idx.size == 0:
            _fail("the indices Y are empty")
        bad = np.flatnonzero((idx < 0) | (idx >= x.shape[-1]))
        if bad.size:
            j = int(bad[0])
            _fail(f"index Y[{j}] = {int(idx[j])} is out of range for a last dimension of {x.shape[-1]}")
        out = x[..., idx]
        return [out.reshape(1, -1) if x.ndim == 1 else out]

    return run


# The attribute naming a classifier's int64 labels, per operator.
_INT_LABELS = {"TreeEnsembleClassifier": "classlabels_int64s", "LinearClassifier": "classlabels_ints",
               "SVMClassifier": "classlabels_ints"}


def string_labels(info: Any) -> Kernel:
    """A classifier with string class labels: the node runs on its native
    kernel with the labels replaced by their indices (an olc session of that
    one node, built once), and the indices it returns are mapped to the
    labels (an index past them, a binary form's 0 / 1, to "0" / "1")."""
    node = info.proto
    labels = _strings(info.attributes["classlabels_strings"])
    inner = onnx.NodeProto()
    inner.CopyFrom(node)
    inner.name = "indices"
    del inner.attribute[:]
    inner.attribute.extend(a for a in node.attribute if a.name != "classlabels_strings")
    inner.attribute.append(helper.make_attribute(_INT_LABELS[node.op_type], list(range(len(labels)))))
    x_type = TYPE_CODES[info.input_types[0]]
    inner.output[:] = ["label", "scores"]
    graph = helper.make_graph(
        [inner], "string_labels", [helper.make_tensor_value_info(inner.input[0], x_type, None)],
        [helper.make_tensor_value_info("label", onnx.TensorProto.INT64, None),
         helper.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(info.domain, info.opset),
                                                    helper.make_opsetid("", 17)])
    model.ir_version = 9
    session = olc_core.Session(model, strict=True)
    x_name = inner.input[0]
    lookup = np.concatenate([labels, np.array(["0", "1"], dtype=object)])

    def run(x: Any) -> list[Any]:
        idx, scores = session.run(None, {x_name: x})
        idx = np.where((idx >= 0) & (idx < len(labels)), idx, len(labels) + np.clip(idx, 0, 1))
        return [lookup[idx], scores]

    return run
