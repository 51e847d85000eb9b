"""The plugin hooks olc-core calls. Families and third parties implement them.

A plugin is a module (or object) registered under the entry-point group
``olc.kernels``; it implements the hooks below, decorated with
:data:`olc_core.hookimpl`. Hooks are called with keyword arguments.
"""

from __future__ import annotations

from collections.abc import Sequence

import pluggy

from .graph_passes import GraphPass
from .registration import KernelRegistration

PROJECT_NAME = "olc"
ENTRY_POINT_GROUP = "olc.kernels"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def olc_register_kernels() -> Sequence[KernelRegistration]:
    """Return the kernels this plugin provides.

    Called once per process when the dispatch table is first built. Every
    returned record joins the dispatch table; a conflict between records of
    equal priority covering the same operator, opset and types is an error
    that names both kernels.
    """
    raise NotImplementedError


@hookspec
def olc_register_graph_passes() -> Sequence[GraphPass]:
    """Return the graph passes this plugin offers (optional hook).

    Called once per process, when a session first needs the passes. A
    session created with ``fusion=True`` (the default) calls every
    ``"fusion"`` pass on the graph after type/shape inference and before
    kernels are chosen; with ``fusion=False`` none runs. A pass returns
    :class:`olc_core.Rewrite` records; the session applies one only when it
    is well formed and a registered native kernel accepts the replacement
    node, and otherwise runs the original nodes. Passes run in the order
    (order, family, name), never in import order.
    """
    raise NotImplementedError
