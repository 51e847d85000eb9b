"""olc-ml's Python kernels: the operators over strings and maps, which a
native kernel cannot see (the runtime holds string tensors, maps and
sequences as Python objects), and the string-labelled classifiers.

Each factory takes the node's :class:`olc_core.NodeInfo`, validates the
attributes once (a ValueError names the problem; the session reports it with
the node's name) and returns the callable the session runs. Work on numbers
is done by numpy over whole arrays, never element by element in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import helper

import olc_core
from olc_core.session import TYPE_CODES

Kernel = Callable[..., list[Any]]


def _strings(values: Any) -> np.ndarray:
    """A 1-D object array of str from an attribute's list of bytes."""
    return np.array([v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values], dtype=object)


def string_labels(info: Any) -> Kernel:
    """A classifier with string class labels: the node runs on its native
    kernel with the labels replaced by their indices (an olc session of that
    one node, built once), and the indices it returns are mapped to the
    labels."""
    node = info.proto
    labels = _strings(info.attributes["classlabels_strings"])
    inner = onnx.NodeProto()
    inner.CopyFrom(node)
    inner.name = "indices"
    del inner.attribute[:]
    inner.attribute.extend(a for a in node.attribute if a.name != "classlabels_strings")
    inner.attribute.append(helper.make_attribute("classlabels_int64s", list(range(len(labels)))))
    x_type = TYPE_CODES[info.input_types[0]]
    outputs = list(node.output)
    inner.output[:] = ["label", "scores"][: len(outputs)]
    graph = helper.make_graph(
        [inner], "string_labels", [helper.make_tensor_value_info(inner.input[0], x_type, None)],
        [helper.make_tensor_value_info("label", onnx.TensorProto.INT64, None),
         helper.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, None)][: len(outputs)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(info.domain, info.opset),
                                                    helper.make_opsetid("", 17)])
    model.ir_version = 9
    session = olc_core.Session(model, strict=True)
    x_name = inner.input[0]

    def run(x: Any) -> list[Any]:
        got = session.run(None, {x_name: x})
        return [labels[got[0]], *got[1:]]

    return run
