"""The recurrent ops' (LSTM, GRU, RNN, DynamicQuantizeLSTM) attributes
restated for the native kernels.

The kernel ABI carries INT, FLOAT, STRING, INTS and FLOATS attributes;
``activations`` is a STRINGS list. This registration hook hands it
over as the indices of ``manifest.RNN_ACTIVATIONS`` (the kernel's RnnAct
codes) and every other attribute as it is. An unknown name is a ValueError,
which the session reports as an OlcError naming the node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from olc_core.session import native_attribute

from .manifest import RNN_ACTIVATIONS

_CODES = {name.lower(): i for i, name in enumerate(RNN_ACTIVATIONS)}


def activation_codes(names: Sequence[bytes | str]) -> np.ndarray:
    codes = []
    for raw in names:
        name = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        code = _CODES.get(name.lower())
        if code is None:
            raise ValueError(f"activation {name!r} is not one of {', '.join(RNN_ACTIVATIONS)}")
        codes.append(code)
    return np.asarray(codes, np.int64)


def native_attributes(node: onnx.NodeProto, input_shapes: Sequence[Any]) -> list[tuple[str, int, Any]]:
    del input_shapes  # the kernel checks the ranks it gets at creation
    out = []
    for a in node.attribute:
        if a.name == "activations" and a.type == onnx.AttributeProto.STRINGS:
            out.append((a.name, int(onnx.AttributeProto.INTS), activation_codes(a.strings)))
        else:
            out.append(native_attribute(a))
    return out
