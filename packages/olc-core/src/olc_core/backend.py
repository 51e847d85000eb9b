"""An ``onnx.backend`` for olc, so the official ONNX backend test suite runs on it.

    import onnx.backend.test
    from olc_core.backend import OlcBackend

    backend_test = onnx.backend.test.BackendTest(OlcBackend, __name__)

``OlcBackend.prepare`` builds an :class:`olc_core.Session` with kernel-usage
recording on; the returned :class:`OlcBackendRep` keeps it as ``.session``
so a caller can check which kernels ran (``rep.session.kernel_usage()``).
Only the CPU device exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

__all__ = ["OlcBackend", "OlcBackendRep", "prepare", "run_model", "run_node", "supports_device"]


def _feed_names(model: onnx.ModelProto) -> list[str]:
    # Graph inputs that are also initializers have defaults: positional
    # inputs bind only to the others, in graph order.
    initializers = {t.name for t in model.graph.initializer}
    initializers.update(t.name for t in model.graph.sparse_initializer)
    return [i.name for i in model.graph.input if i.name not in initializers]


def _latest_opset(op_type: str, domain: str) -> int:
    if domain in ("", "ai.onnx"):
        return onnx.defs.onnx_opset_version()
    try:
        # Other domains (ai.onnx.ml, ...) version separately: the op's newest schema.
        return int(onnx.defs.get_schema(op_type, domain=domain).since_version)
    except onnx.defs.SchemaError:
        return 1  # a domain onnx does not know (com.microsoft, a plugin's own)


class OlcBackendRep(BackendRep):
    """A prepared model: positional or named inputs in, a namedtupledict out."""

    def __init__(self, session: Any, model: onnx.ModelProto) -> None:
        self.session = session
        self.input_names = _feed_names(model)
        self.output_names = [o.name for o in model.graph.output]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if isinstance(inputs, Mapping):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray) or not isinstance(inputs, Sequence):
                inputs = [inputs]
            if len(inputs) > len(self.input_names):
                raise ValueError(
                    f"got {len(inputs)} inputs, the model takes at most {len(self.input_names)} "
                    f"({', '.join(self.input_names)})"
                )
            # Trailing graph inputs left out are optional inputs not fed.
            feeds = dict(zip(self.input_names, inputs))
        outputs = self.session.run(None, feeds)
        return namedtupledict("Outputs", self.output_names)(*outputs)


class OlcBackend(Backend):
    """ONNX backend running models through :class:`olc_core.Session` on the CPU."""

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except Exception:  # noqa: BLE001 - an unknown device string is simply unsupported
            return False

    @classmethod
    def prepare(
        cls,
        model: onnx.ModelProto | bytes | str,
        device: str = "CPU",
        **kwargs: Any,
    ) -> OlcBackendRep:
        """Builds a session; ``threads`` and ``strict`` pass through, other
        keyword arguments (test tolerances and the like) are ignored."""
        from .session import Session, load_model  # late: keeps ``import olc_core.backend`` cheap

        if not cls.supports_device(device):
            raise NotImplementedError(f"olc runs on CPU only, not {device!r}")
        proto = load_model(model)
        session = Session(
            proto,
            threads=kwargs.get("threads"),
            strict=bool(kwargs.get("strict", False)),
            record_usage=True,
        )
        return OlcBackendRep(session, proto)

    @classmethod
    def run_model(
        cls,
        model: onnx.ModelProto | bytes | str,
        inputs: Any,
        device: str = "CPU",
        **kwargs: Any,
    ) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls,
        node: onnx.NodeProto,
        inputs: Any,
        device: str = "CPU",
        outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
        **kwargs: Any,
    ) -> tuple[Any, ...] | None:
        """Runs one node by wrapping it in a one-node model.

        ``inputs`` are numpy arrays, positional (matched to ``node.input``,
        empty names skipped) or keyed by input name. ``opset_version``
        selects the opset of the node's domain (default: onnx's current).
        """
        if isinstance(inputs, Mapping):
            arrays = {k: np.asarray(v) for k, v in inputs.items()}
        else:
            names = [n for n in node.input if n]
            arrays = {n: np.asarray(v) for n, v in zip(names, inputs)}
        graph_inputs = [
            onnx.helper.make_tensor_value_info(
                name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape
            )
            for name, a in arrays.items()
        ]
        graph_outputs = []
        for i, name in enumerate(n for n in node.output if n):
            if outputs_info is not None and i < len(outputs_info):
                dtype, shape = outputs_info[i]
                graph_outputs.append(
                    onnx.helper.make_tensor_value_info(
                        name, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape
                    )
                )
            else:
                # Type left empty: the session infers it.
                graph_outputs.append(onnx.ValueInfoProto(name=name))
        graph = onnx.helper.make_graph([node], "olc_run_node", graph_inputs, graph_outputs)
        domain = node.domain or ""
        opset = kwargs.pop("opset_version", None) or _latest_opset(node.op_type, domain)
        imports = [onnx.helper.make_opsetid(domain, opset)]
        if domain not in ("", "ai.onnx"):
            imports.append(onnx.helper.make_opsetid("", onnx.defs.onnx_opset_version()))
        model = onnx.helper.make_model(graph, opset_imports=imports)
        return cls.prepare(model, device, **kwargs).run(arrays)


prepare = OlcBackend.prepare
run_model = OlcBackend.run_model
run_node = OlcBackend.run_node
supports_device = OlcBackend.supports_device
