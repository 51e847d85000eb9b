"""The olc-ml graph pass: TreeEnsembleRegressor / TreeEnsembleClassifier
restated for the native kernel.

The native ABI carries INT, FLOAT, STRING, INTS and FLOATS attributes; a
tree ensemble has ``nodes_modes`` (STRINGS) and, in models of float64 or
exported at ai.onnx.ml opset 3, ``*_as_tensor`` (TENSOR, float64). The pass
restates each node as the same operator in domain ``olc.ml`` with the modes
as integer codes (``nodes_mode_codes``), each float64 tensor as the bit
patterns of its values (``<name>_f64``, INTS: nothing is rounded), and the
input's feature count when inference knows it (``n_features``). The pass
also checks the restated attributes as the kernel will, so a malformed
ensemble is an OlcError naming the node when the session is created.
Nodes with string class labels are left alone (the onnx.reference fallback
runs them: a native kernel cannot return strings). With ``fusion=False``
no pass runs and these nodes run on the fallback.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

import olc_core
from olc_core import GraphPass, GraphPassContext, OlcError, Rewrite

from . import manifest

PASS_NAME = "tree_ensemble_restate"

_INTS = ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_truenodeids", "nodes_falsenodeids",
         "nodes_missing_value_tracks_true", "classlabels_int64s")
_VALUES = ("nodes_values", "base_values")
_STRINGS = ("post_transform", "aggregate_function")
_IGNORED = ("nodes_hitrates", "nodes_hitrates_as_tensor")


_MODE_BYTES = {m.encode(): c for m, c in manifest.MODE_CODES.items()}


def _ints_attribute(name: str, values: np.ndarray) -> onnx.AttributeProto:
    a = onnx.AttributeProto(name=name, type=onnx.AttributeProto.INTS)
    a.ints.extend(values.tolist())
    return a


def restated_node(node: onnx.NodeProto, name: str, n_features: int | None) -> tuple[onnx.NodeProto, dict[str, Any]]:
    """The restated node and its attributes as the kernel's parser takes
    them (numpy arrays, ints, strs); raises ValueError for a value the pass
    cannot restate (an unknown mode or attribute).

    The node is copied whole; only the modes and the float64 tensors are
    rewritten (whole arrays at a time), and the hit rates dropped."""
    spec = manifest.BY_NAME[node.op_type]
    ints = _INTS + tuple(spec.weights + s for s in ("ids", "nodeids", "treeids"))
    values = _VALUES + (spec.weights + "weights",)
    out = onnx.NodeProto()
    out.CopyFrom(node)  # one copy of the whole node: faster than attribute by attribute
    out.name = name
    out.domain = manifest.RESTATED_DOMAIN
    drop: list[int] = []
    extra: list[onnx.AttributeProto] = []
    check: dict[str, Any] = {}
    for k, a in enumerate(node.attribute):
        key = a.name
        if key in _IGNORED:
            drop.append(k)
        elif key in ints:
            check[key] = np.array(a.ints, dtype=np.int64)
        elif key == "nodes_modes":
            try:
                codes = np.array([_MODE_BYTES[m] for m in a.strings], dtype=np.int64)
            except KeyError:
                bad = next(m for m in a.strings if m not in _MODE_BYTES)
                raise ValueError(f"unknown node mode {bad.decode(errors='replace')!r} (BRANCH_LEQ, BRANCH_LT, "
                                 "BRANCH_GTE, BRANCH_GT, BRANCH_EQ, BRANCH_NEQ or LEAF)") from None
            check["nodes_mode_codes"] = codes
            drop.append(k)
            extra.append(_ints_attribute("nodes_mode_codes", codes))
        elif key in values:
            check[key] = np.array(a.floats, dtype=np.float64)
        elif key.endswith("_as_tensor") and key[: -len("_as_tensor")] in values:
            arr = np.ascontiguousarray(numpy_helper.to_array(a.t), dtype=np.float64).reshape(-1)
            bits = arr.view(np.int64)
            check[key[: -len("_as_tensor")] + "_f64"] = bits
            drop.append(k)
            extra.append(_ints_attribute(key[: -len("_as_tensor")] + "_f64", bits))
        elif key in _STRINGS:
            check[key] = a.s.decode()
        elif key == "n_targets":
            check[key] = int(a.i)
        else:
            raise ValueError(f"attribute {key!r} is not one of {node.op_type}'s")
    for k in reversed(drop):
        del out.attribute[k]
    if n_features is not None:
        check["n_features"] = int(n_features)
        extra.append(helper.make_attribute("n_features", int(n_features)))
    out.attribute.extend(extra)
    return out, check


def _check(op: str, attrs: dict[str, Any]) -> str:
    ext = olc_core.load_extension("olc_ml._ext")
    return str(ext.check_attributes(op, attrs))


def restate_tree_ensembles(ctx: GraphPassContext) -> list[Rewrite]:
    opset = ctx.opsets.get(manifest.ML_DOMAIN, 0)
    out = []
    for i, node in enumerate(ctx.graph.node):
        spec = manifest.BY_NAME.get(node.op_type)
        if spec is None or node.domain != manifest.ML_DOMAIN or not spec.since <= opset <= spec.until:
            continue
        if any(a.name == "classlabels_strings" for a in node.attribute):
            continue  # string labels: not a native output
        name = ctx.node_names[i]
        label = f"node '{name}' ({node.op_type})"
        shape = ctx.shape(node.input[0]) if node.input else None
        n_features = None
        if shape:
            last = shape[-1]
            if isinstance(last, int) and last >= 0:
                n_features = last
        try:
            restated, attrs = restated_node(node, f"{name}/olc_ml", n_features)
        except ValueError as exc:
            raise OlcError(f"{label}: {exc}") from None
        reason = _check(node.op_type, attrs)
        if reason:
            raise OlcError(f"{label}: {reason}")
        out.append(Rewrite(restated, (name,)))
    return out


GRAPH_PASS = GraphPass(
    PASS_NAME, manifest.FAMILY, restate_tree_ensembles,
    description="ai.onnx.ml TreeEnsembleRegressor/Classifier -> olc.ml with native attributes (modes as codes, "
                "float64 tensors as bit patterns)",
)
