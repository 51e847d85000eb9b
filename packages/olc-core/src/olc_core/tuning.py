"""Tuning parameters: named, typed knobs that kernels declare with portable
defaults (byte thresholds, block sizes, participant limits).

A parameter is keyed by (library, kernel, implementation, dtype) and a name.
Kernels declare them from C++ (the first declaration wins) and read them with
one atomic load. From Python they can be listed, read, overridden and reset,
and saved to or loaded from a JSON profile::

    {"version": 1,
     "params": [{"library": "olc_matmul", "kernel": "MatMul",
                 "implementation": "avx512", "dtype": "float32",
                 "name": "block_k", "value": 256}]}

An override for a parameter that no kernel has declared yet (a profile loaded
at start-up, before any session exists) is kept pending and applied when the
kernel declares it. ``OLC_TUNING_PROFILE`` names a profile loaded at import.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _native

Number = int | float

PROFILE_VERSION = 1
ANY_DTYPE = "any"
DEFAULT_IMPLEMENTATION = "default"

_CODE_TO_DTYPE: dict[int, str] = dict(_native.tuning_dtype_names())
_DTYPE_TO_CODE: dict[str, int] = {name: code for code, name in _CODE_TO_DTYPE.items()}
# ONNX TensorProto spellings that differ from the canonical names.
_DTYPE_TO_CODE.update({"float": 1, "double": 11, "undefined": 0})

_REQUIRED_FIELDS = ("library", "kernel", "name", "value")
_OPTIONAL_FIELDS = {"implementation": DEFAULT_IMPLEMENTATION, "dtype": ANY_DTYPE}


@dataclass(frozen=True)
class TuningKey:
    """Which kernel variant a parameter belongs to."""

    library: str
    kernel: str
    implementation: str = DEFAULT_IMPLEMENTATION
    dtype: str = ANY_DTYPE


@dataclass(frozen=True)
class TuningParam:
    """A declared parameter and its current value."""

    key: TuningKey
    name: str
    kind: str  # "int" or "float"
    default: Number
    value: Number
    overridden: bool

    # Flat access to the key, for listings.
    @property
    def library(self) -> str:
        return self.key.library

    @property
    def kernel(self) -> str:
        return self.key.kernel

    @property
    def implementation(self) -> str:
        return self.key.implementation

    @property
    def dtype(self) -> str:
        return self.key.dtype


def _dtype_code(dtype: str | int) -> int:
    if isinstance(dtype, bool):
        raise TypeError("dtype must be an ONNX type name or code, not bool")
    if isinstance(dtype, int):
        if dtype not in _CODE_TO_DTYPE:
            raise ValueError(f"unknown ONNX dtype code {dtype}")
        return dtype
    if not isinstance(dtype, str):
        raise TypeError(f"dtype must be an ONNX type name or code, not {type(dtype).__name__}")
    code = _DTYPE_TO_CODE.get(dtype.lower())
    if code is None:
        raise ValueError(
            f"unknown dtype {dtype!r}; expected 'any' or one of "
            + ", ".join(n for c, n in sorted(_CODE_TO_DTYPE.items()) if c)
        )
    return code


def _check_str(field: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{field} must be a non-empty string, got {value!r}")
    return value


def _check_value(value: object) -> Number:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"tuning value must be an int or a float, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"tuning value must be finite, got {value!r}")
    return value


def _args(library: str, kernel: str, implementation: str, dtype: str | int,
          name: str) -> tuple[str, str, str, int, str]:  # fmt: skip
    return (
        _check_str("library", library),
        _check_str("kernel", kernel),
        _check_str("implementation", implementation),
        _dtype_code(dtype),
        _check_str("name", name),
    )


def _param(d: dict[str, Any]) -> TuningParam:
    key = TuningKey(d["library"], d["kernel"], d["implementation"], d["dtype"])
    return TuningParam(key, d["name"], d["kind"], d["default"], d["value"], d["overridden"])


def list_params() -> list[TuningParam]:
    """Every declared parameter, in declaration order."""
    return [_param(d) for d in _native.tuning_list()]


def pending() -> list[tuple[TuningKey, str, Number]]:
    """Overrides waiting for a kernel to declare their parameter."""
    return [
        (TuningKey(d["library"], d["kernel"], d["implementation"], d["dtype"]), d["name"], d["value"])
        for d in _native.tuning_pending()
    ]


def get(library: str, kernel: str, name: str, implementation: str = DEFAULT_IMPLEMENTATION,
        dtype: str | int = ANY_DTYPE) -> Number:  # fmt: skip
    """Current value of a parameter (or its pending override when not yet
    declared). KeyError when neither exists."""
    return _native.tuning_get(*_args(library, kernel, implementation, dtype, name))


def set(library: str, kernel: str, name: str, value: Number,
        implementation: str = DEFAULT_IMPLEMENTATION, dtype: str | int = ANY_DTYPE) -> None:  # fmt: skip
    """Overrides a parameter. An int fits a float parameter; a float fits an
    int parameter only when integral (TypeError otherwise). When the parameter
    is not declared yet, the override is kept until it is."""
    _native.tuning_set(*_args(library, kernel, implementation, dtype, name), _check_value(value))


def reset(library: str | None = None, kernel: str | None = None, name: str | None = None,
          implementation: str = DEFAULT_IMPLEMENTATION, dtype: str | int = ANY_DTYPE) -> None:  # fmt: skip
    """With no arguments: every parameter back to its default and every pending
    override dropped. With library, kernel and name: that parameter only."""
    if library is None and kernel is None and name is None:
        _native.tuning_reset()
        return
    if library is None or kernel is None or name is None:
        raise TypeError("reset() takes either no key or library, kernel and name")
    _native.tuning_reset(*_args(library, kernel, implementation, dtype, name))


def errors() -> list[str]:
    """Pending overrides dropped when their parameter was declared with a kind
    they do not fit (a non-integral float for an int parameter)."""
    return list(_native.tuning_errors())


# ---- profiles ---------------------------------------------------------------


def _parse_profile(data: object, source: str) -> list[tuple[tuple[str, str, str, int, str], Number]]:
    if not isinstance(data, dict):
        raise ValueError(f"{source}: a tuning profile is a JSON object, got {type(data).__name__}")
    unknown = sorted(k for k in data if k not in ("version", "params"))
    if unknown:
        raise ValueError(f"{source}: unknown top-level keys {unknown}")
    if data.get("version") != PROFILE_VERSION:
        raise ValueError(
            f"{source}: unsupported tuning profile version {data.get('version')!r} "
            f"(this olc-core reads version {PROFILE_VERSION})"
        )
    params = data.get("params")
    if not isinstance(params, list):
        raise ValueError(f"{source}: 'params' must be a list")
    entries = []
    for i, entry in enumerate(params):
        where = f"{source}: params[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected an object, got {type(entry).__name__}")
        missing = [k for k in _REQUIRED_FIELDS if k not in entry]
        if missing:
            raise ValueError(f"{where}: missing {', '.join(missing)}")
        extra = sorted(k for k in entry if k not in _REQUIRED_FIELDS and k not in _OPTIONAL_FIELDS)
        if extra:
            raise ValueError(f"{where}: unknown keys {extra}")
        try:
            args = _args(
                entry["library"],
                entry["kernel"],
                entry.get("implementation", DEFAULT_IMPLEMENTATION),
                entry.get("dtype", ANY_DTYPE),
                entry["name"],
            )
            value = _check_value(entry["value"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        entries.append((args, value))
    return entries


def load_profile(path: str | os.PathLike[str]) -> int:
    """Applies the overrides in a JSON profile on top of the current values.

    The whole profile is checked before anything is applied; bad content is
    a ValueError naming the file and the entry. Returns how many overrides
    were applied (or kept pending).
    """
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{source}: cannot read tuning profile: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source}: not valid JSON: {exc}") from None
    entries = _parse_profile(data, source)

    # Check kinds against declared parameters first, so a bad entry leaves
    # every value as it was.
    declared = {
        (d["library"], d["kernel"], d["implementation"], d["dtype_code"], d["name"]): d["kind"]
        for d in _native.tuning_list()
    }
    for i, (args, value) in enumerate(entries):
        if declared.get(args) == "int" and isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{source}: params[{i}]: {args[4]!r} is an int parameter, got {value!r}")
    for args, value in entries:
        _native.tuning_set(*args, value)
    return len(entries)


def profile(include_defaults: bool = False) -> dict[str, Any]:
    """The current overrides (and pending ones) as a profile object; with
    include_defaults, every declared parameter."""
    params = []
    for d in _native.tuning_list():
        if d["overridden"] or include_defaults:
            params.append({k: d[k] for k in ("library", "kernel", "implementation", "dtype", "name", "value")})
    for d in _native.tuning_pending():
        params.append({k: d[k] for k in ("library", "kernel", "implementation", "dtype", "name", "value")})
    return {"version": PROFILE_VERSION, "params": params}


def save_profile(path: str | os.PathLike[str], include_defaults: bool = False) -> None:
    """Writes profile(include_defaults) as JSON; load_profile reads it back."""
    text = json.dumps(profile(include_defaults), indent=2) + "\n"
    Path(path).write_text(text, encoding="utf-8")


def _load_env_profile() -> None:
    path = os.environ.get("OLC_TUNING_PROFILE", "").strip()
    if path:
        try:
            load_profile(path)
        except ValueError as exc:
            raise ValueError(f"OLC_TUNING_PROFILE: {exc}") from None


_load_env_profile()

__all__ = [
    "TuningKey",
    "TuningParam",
    "errors",
    "get",
    "list_params",
    "load_profile",
    "pending",
    "profile",
    "reset",
    "save_profile",
    "set",
]
