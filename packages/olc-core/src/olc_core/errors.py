"""Exceptions raised by olc. Every message names the node, the op and the reason."""

from __future__ import annotations


class OlcError(RuntimeError):
    """Base class of every error olc raises about a model, a feed or a kernel."""


class InvalidModelError(OlcError, ValueError):
    """The model cannot be loaded or is not a valid ONNX graph."""


class NoKernelError(OlcError):
    """strict=True and a node has no olc kernel (it would need the fallback)."""


class DispatchConflictError(OlcError):
    """Two registrations of equal priority cover the same operator, opsets and types."""
