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


def restated_attributes(node: onnx.NodeProto, n_features: int | None) -> dict[str, Any]:
    """The attributes of the restated node; raises ValueError for a value
    the pass cannot restate (an unknown mode)."""
    spec = manifest.BY_NAME[node.op_type]
    ints = _INTS + tuple(spec.weights + s for s in ("ids", "nodeids", "treeids"))
    values = _VALUES + (spec.weights + "weights",)
    out: dict[str, Any] = {}
    for a in node.attribute:
        name = a.name
        if name in _IGNORED:
            continue
        if name in ints:
            out[name] = [int(v) for v in a.ints]
        elif name == "nodes_modes":
            modes = [m.decode() if isinstance(m, bytes) else m for m in a.strings]
            bad = [m for m in modes if m not in manifest.MODE_CODES]
            if bad:
                raise ValueError(f"unknown node mode {bad[0]!r} (BRANCH_LEQ, BRANCH_LT, BRANCH_GTE, BRANCH_GT, "
                                 "BRANCH_EQ, BRANCH_NEQ or LEAF)")
            out["nodes_mode_codes"] = [manifest.MODE_CODES[m] for m in modes]
        elif name in values:
            out[name] = [float(v) for v in a.floats]
        elif name.endswith("_as_tensor") and name[: -len("_as_tensor")] in values:
            arr = np.ascontiguousarray(numpy_helper.to_array(a.t), dtype=np.float64).reshape(-1)
            out[name[: -len("_as_tensor")] + "_f64"] = [int(v) for v in arr.view(np.int64)]
        elif name in _STRINGS:
            out[name] = a.s.decode()
        elif name == "n_targets":
            out[name] = int(a.i)
        else:
            raise ValueError(f"attribute {name!r} is not one of {node.op_type}'s")
    if n_features is not None:
        out["n_features"] = int(n_features)
    return out


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
            attrs = restated_attributes(node, n_features)
        except ValueError as exc:
            raise OlcError(f"{label}: {exc}") from None
        reason = _check(node.op_type, attrs)
        if reason:
            raise OlcError(f"{label}: {reason}")
        restated = helper.make_node(node.op_type, list(node.input), list(node.output), name=f"{name}/olc_ml",
                                    domain=manifest.RESTATED_DOMAIN, **attrs)
        out.append(Rewrite(restated, (name,)))
    return out


GRAPH_PASS = GraphPass(
    PASS_NAME, manifest.FAMILY, restate_tree_ensembles,
    description="ai.onnx.ml TreeEnsembleRegressor/Classifier -> olc.ml with native attributes (modes as codes, "
                "float64 tensors as bit patterns)",
)
