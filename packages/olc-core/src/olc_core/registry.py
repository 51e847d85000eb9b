"""Plugin discovery (pluggy, entry-point group ``olc.kernels``) and the dispatch table."""

from __future__ import annotations

import importlib
import os
import threading
import warnings
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, cast

import pluggy

from . import hookspecs
from .errors import DispatchConflictError
from .graph_passes import GraphPass
from .registration import KernelRegistration, normalize_domain

AUTOLOAD_ENV = "OLC_DISABLE_PLUGIN_AUTOLOAD"

_lock = threading.RLock()
_manager: pluggy.PluginManager | None = None
_table: DispatchTable | None = None
_passes: tuple[GraphPass, ...] | None = None
_load_errors: list[str] = []


@dataclass(frozen=True)
class Selection:
    """The outcome of a dispatch look-up: a registration or the reason there is none."""

    registration: KernelRegistration | None
    reason: str


def _new_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    # olc-core's own kernels (views, Shape, Size): part of the runtime, so
    # loaded also when entry-point autoloading is off.
    from . import builtin_kernels

    pm.register(builtin_kernels, name=builtin_kernels.FAMILY)
    if not os.environ.get(AUTOLOAD_ENV):
        # Load each entry point ourselves so that one broken plugin is reported
        # (olc info lists it) instead of making every model unusable.
        from importlib.metadata import entry_points

        for ep in entry_points(group=hookspecs.ENTRY_POINT_GROUP):
            if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # noqa: BLE001 - any import failure is reported, not raised
                message = f"plugin {ep.name!r} ({ep.value}) failed to load: {type(exc).__name__}: {exc}"
                cause = exc.__cause__
                if cause is not None:
                    message += f" (caused by {type(cause).__name__}: {cause})"
                _load_errors.append(message)
                warnings.warn(message, RuntimeWarning, stacklevel=3)
                continue
            pm.register(plugin, name=ep.name)
    pm.check_pending()
    return pm


def plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, created (and entry points loaded) on first use."""
    global _manager
    with _lock:
        if _manager is None:
            _manager = _new_manager()
        return _manager


def register_plugin(plugin: object, name: str | None = None) -> None:
    """Registers an in-process plugin (an object or module implementing the hooks)."""
    global _table, _passes
    with _lock:
        pm = plugin_manager()
        pm.register(plugin, name=name)
        pm.check_pending()
        _table = None
        _passes = None


def _hook_failure(plugin_name: str) -> str:
    return f"plugin {plugin_name!r}: olc_register_kernels failed: "


def unregister_plugin(plugin: object) -> None:
    global _table, _passes
    with _lock:
        pm = plugin_manager()
        # A hook failure of a plugin that is gone no longer describes this process.
        name = pm.get_name(plugin)
        if name is not None:
            _load_errors[:] = [e for e in _load_errors if not e.startswith(_hook_failure(name))]
        pm.unregister(plugin)
        _table = None
        _passes = None


def load_extension(module_name: str) -> ModuleType:
    """Imports a family's native extension module for its plugin.

    A failed import is re-raised as an ImportError naming the module and the
    underlying reason (pybind11 reports a failed module init only as
    "initialization failed" and keeps the reason in ``__cause__``), which
    the registry then lists in :func:`plugin_load_errors`.
    """
    try:
        return importlib.import_module(module_name)
    except ImportError as e:
        cause = e.__cause__ or e.__context__
        detail = f"{e}: {cause}" if cause is not None else str(e)
        raise ImportError(f"{module_name}: cannot load the native extension ({detail})") from e


def plugin_load_errors() -> list[str]:
    plugin_manager()
    return list(_load_errors)


def plugins() -> list[tuple[str, object]]:
    """(name, plugin) of every registered plugin, in registration order."""
    return [(str(name), p) for name, p in plugin_manager().list_name_plugin()]


class DispatchTable:
    """Registrations keyed by (domain, op_type, device), best first.

    Order is fixed by (priority descending, kernel name): never by import
    order. Two registrations of equal priority that could both cover one node
    are refused when the table is built.
    """

    def __init__(self, registrations: Iterable[KernelRegistration]):
        by_key: dict[tuple[str, str, str], list[KernelRegistration]] = defaultdict(list)
        seen: set[int] = set()
        for r in registrations:
            # A plugin registered twice yields the same records: keep one.
            if id(r) in seen:
                continue
            seen.add(id(r))
            by_key[(r.domain, r.op_type, r.device)].append(r)
        for regs in by_key.values():
            regs.sort(key=lambda r: (-r.priority, r.kernel_name, r.since_version))
            _check_conflicts(regs)
        self._by_key = dict(by_key)
        self.registrations: tuple[KernelRegistration, ...] = tuple(
            r for key in sorted(self._by_key) for r in self._by_key[key]
        )

    def candidates(self, domain: str, op_type: str, device: str = "cpu") -> Sequence[KernelRegistration]:
        return self._by_key.get((normalize_domain(domain), op_type, device), ())

    def select(
        self, domain: str, op_type: str, opset: int, input_types: tuple[str | None, ...], device: str = "cpu",
        naive: bool | frozenset[str] = False, node: Any = None,
    ) -> Selection:
        """The first registration covering the node. ``naive``: True, or the
        families whose naive registrations come first (otherwise naive ones
        are never taken). With ``node`` (its NodeProto), a registration whose
        ``supports`` declines the node is passed over for the next one (a
        family may register a native kernel for the common form of an op and
        a Python one for the rest, such as string class labels)."""
        candidates = self.candidates(domain, op_type, device)
        if not candidates:
            return Selection(None, f"no kernel is registered for {normalize_domain(domain)}::{op_type}")

        def wanted(r: KernelRegistration) -> bool:
            return naive is True or (bool(naive) and r.family in cast(frozenset, naive))

        naive_first = [r for r in candidates if r.implementation == "naive" and wanted(r)]
        ordered = naive_first + [r for r in candidates if r.implementation != "naive"]
        reasons = []
        for r in ordered:
            if not r.covers_opset(opset):
                until = "" if r.until_version >= 2**31 - 1 else str(r.until_version)
                reasons.append(f"{r.kernel_name} covers opset {r.since_version}-{until}, the model uses {opset}")
                continue
            why = r.match_types(input_types)
            if why is None and node is not None and r.supports is not None:
                why = r.supports(node)
            if why is not None:
                reasons.append(f"{r.kernel_name}: {why}")
                continue
            shown = ", ".join(t if t else ("absent" if t == "" else "?") for t in input_types)
            return Selection(r, f"opset {opset}, input types ({shown})")
        return Selection(None, "; ".join(reasons))


def _types_overlap(a: KernelRegistration, b: KernelRegistration) -> bool:
    for i in range(max(len(a.inputs), len(b.inputs))):
        ca = a.inputs[i] if i < len(a.inputs) else None
        cb = b.inputs[i] if i < len(b.inputs) else None
        if ca is None or cb is None:
            continue
        if not set(a.types[ca]) & set(b.types[cb]):
            return False
    return True


def _check_conflicts(regs: list[KernelRegistration]) -> None:
    for i, a in enumerate(regs):
        for b in regs[i + 1 :]:
            if a.priority != b.priority or a.implementation != b.implementation:
                continue
            if a.until_version < b.since_version or b.until_version < a.since_version:
                continue
            if _types_overlap(a, b):
                raise DispatchConflictError(
                    f"{a.domain}::{a.op_type}: kernels {a.kernel_name} ({a.family or 'unknown family'}, "
                    f"opset {a.since_version}-{a.until_version}) and {b.kernel_name} "
                    f"({b.family or 'unknown family'}, opset {b.since_version}-{b.until_version}) both cover "
                    f"the same opsets and types at priority {a.priority}; give one a higher priority"
                )


def dispatch_table() -> DispatchTable:
    """The dispatch table of every installed plugin (built once, rebuilt after register_plugin)."""
    global _table
    with _lock:
        if _table is None:
            records: list[KernelRegistration] = []
            # Each implementation is called on its own so a bad record names its plugin.
            for impl in plugin_manager().hook.olc_register_kernels.get_hookimpls():
                try:
                    returned = list(cast(Iterable[object], impl.function() or ()))
                except Exception as exc:  # noqa: BLE001 - reported like an import failure
                    # A plugin whose hook raises (a stale extension, say) loses
                    # its kernels, not every other plugin's.
                    message = f"{_hook_failure(impl.plugin_name)}{type(exc).__name__}: {exc}"
                    if message not in _load_errors:
                        _load_errors.append(message)
                        warnings.warn(message, RuntimeWarning, stacklevel=3)
                    continue
                for r in returned:
                    if not isinstance(r, KernelRegistration):
                        raise TypeError(
                            f"plugin {impl.plugin_name!r} returned {type(r).__name__}, expected KernelRegistration"
                        )
                    records.append(r)
            _table = DispatchTable(records)
        return _table


def registered_kernels() -> tuple[KernelRegistration, ...]:
    """Every registration of every installed plugin, in dispatch order per operator."""
    return dispatch_table().registrations


def graph_passes() -> tuple[GraphPass, ...]:
    """The graph passes of every installed plugin, ordered by (order, family, name).

    Two passes with the same name are an error naming both plugins.
    """
    global _passes
    with _lock:
        if _passes is None:
            found: list[tuple[GraphPass, str]] = []
            for impl in plugin_manager().hook.olc_register_graph_passes.get_hookimpls():
                for p in cast(Iterable[object], impl.function() or ()):
                    if not isinstance(p, GraphPass):
                        raise TypeError(
                            f"plugin {impl.plugin_name!r} returned {type(p).__name__}, expected GraphPass"
                        )
                    found.append((p, impl.plugin_name))
            by_name: dict[str, str] = {}
            unique: list[GraphPass] = []
            seen: set[int] = set()
            for p, plugin_name in found:
                if id(p) in seen:
                    continue
                seen.add(id(p))
                if p.name in by_name:
                    raise DispatchConflictError(
                        f"graph pass {p.name!r} is offered by plugins {by_name[p.name]!r} and {plugin_name!r}"
                    )
                by_name[p.name] = plugin_name
                unique.append(p)
            _passes = tuple(sorted(unique, key=lambda p: (p.order, p.family, p.name)))
        return _passes
