"""The ``olc`` command line: run a model, list kernels, describe the machine.

    olc run [MODEL] [--threads N] [--compare onnxruntime|none] [--repeat K]
            [--strict] [--no-fusion] [--seed S] [--dim NAME=VALUE ...] [--debug]
    olc kernels [--family F] [--op OP] [--json]
    olc info [--json]

Exit status: 0 success; 1 an error (missing file, malformed model, a
session or run error; the message is printed, the traceback only with
``--debug``); 2 a usage error; 3 ``olc run --compare`` found outputs that
differ from onnxruntime beyond ``--rtol``/``--atol``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_MISMATCH = 3

# A symbolic or unknown dimension gets this size unless --dim names it.
DEFAULT_SYMBOLIC_DIM = 1

NO_KERNELS_MESSAGE = "no native kernels registered (install a family such as olc-elementwise)"


class CliError(Exception):
    """An error reported to the user as one line, without a traceback."""


def _progress(msg: str) -> None:
    print(f"olc: {msg}", file=sys.stderr, flush=True)


def _format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, r in enumerate(cells):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ---------------------------------------------------------------- model input




def _numpy_dtype(elem_type: int) -> np.dtype:
    from onnx import helper

    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception as exc:  # an element type numpy (and ml_dtypes) cannot hold
        raise CliError(f"cannot generate inputs of ONNX element type {elem_type}") from exc


def parse_dims(specs: Sequence[str]) -> dict[str, int]:
    """Parses ``--dim NAME=VALUE`` options."""
    dims: dict[str, int] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name:
            raise CliError(f"--dim expects NAME=VALUE, got {spec!r}")
        try:
            dims[name] = int(value)
        except ValueError:
            raise CliError(f"--dim {name}: {value!r} is not an integer") from None
        if dims[name] < 0:
            raise CliError(f"--dim {name}: size must be >= 0")
    return dims


def input_specs(model: Any, dims: dict[str, int]) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
    """Graph inputs that need a feed: (name, dtype, concrete shape)."""
    initializers = {init.name for init in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in initializers:
            continue  # an initializer listed as an input has a default value
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            raise CliError(f"input {vi.name!r}: only tensor inputs can be generated")
        shape: list[int] = []
        if tt.HasField("shape"):
            for d in tt.shape.dim:
                if d.HasField("dim_value"):
                    shape.append(d.dim_value)
                elif d.HasField("dim_param") and d.dim_param in dims:
                    shape.append(dims[d.dim_param])
                else:
                    shape.append(DEFAULT_SYMBOLIC_DIM)
        specs.append((vi.name, _numpy_dtype(tt.elem_type), tuple(shape)))
    return specs


def random_inputs(specs: Sequence[tuple[str, np.dtype, tuple[int, ...]]], seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs: floats ~ N(0, 1), integers in [0, 10), booleans 50/50.

    Small non-negative integers are valid as indices, counts and axes in most
    models that take integer inputs.
    """
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, dtype, shape in specs:
        if dtype == np.bool_:
            arr = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            arr = rng.integers(0, 10, size=shape).astype(dtype)
        elif dtype.kind in "fV" or np.issubdtype(dtype, np.floating):
            # float16/bfloat16/float8 (ml_dtypes) go through float32.
            arr = rng.standard_normal(shape).astype(np.float32).astype(dtype)
        elif np.issubdtype(dtype, np.complexfloating):
            arr = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
        else:
            raise CliError(f"input {name!r}: cannot generate values of type {dtype}")
        feeds[name] = np.ascontiguousarray(arr)
    return feeds


def load_model(path: str) -> Any:
    import onnx

    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory, expected an .onnx file")
    try:
        model = onnx.load(path)
    except Exception as exc:
        raise CliError(f"{path}: not a valid ONNX model ({type(exc).__name__}: {exc})") from exc
    if not model.graph.node and not model.graph.output:
        # protobuf parses many non-model byte strings into an empty message
        raise CliError(f"{path}: not a valid ONNX model (no graph)")
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        # The checker refuses some models that onnxruntime and olc run (IR
        # versions, contrib domains): warn and let the session decide.
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        _progress(f"warning: onnx.checker: {first}")
    return model


# ------------------------------------------------------------------ olc run


def _op_label(domain: str, op_type: str) -> str:
    return op_type if domain in ("", "ai.onnx") else f"{domain}::{op_type}"


def node_rows(plan: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per node of the model: a fused entry expands into the nodes it
    replaced, each naming the fused node and kernel that run it."""
    rows: list[dict[str, Any]] = []
    for e in plan:
        fused = tuple(getattr(e, "fused_nodes", ()) or ())
        if not fused:
            rows.append({"node": e.node_name, "domain": e.domain, "op": e.op_type, "kernel": e.kernel,
                         "native": bool(e.native), "reason": e.reason, "fused_into": None})
            continue
        for name, op in fused:
            rows.append({"node": name, "domain": "ai.onnx", "op": op, "kernel": e.kernel, "native": bool(e.native),
                         "reason": f"fused into {e.node_name} by {e.graph_pass}", "fused_into": e.node_name})
    return rows


def plan_rows(plan: Sequence[Any]) -> list[list[str]]:
    return [
        [
            r["node"] or "(unnamed)",
            _op_label(r["domain"], r["op"]),
            r["kernel"],
            ("native" if r["native"] else "fallback") + (" (fused)" if r["fused_into"] else ""),
            r["reason"] or "",
        ]
        for r in node_rows(plan)
    ]


def compare_outputs(names: Sequence[str], ours: Sequence[np.ndarray], theirs: Sequence[np.ndarray],
                    rtol: float, atol: float) -> list[dict[str, Any]]:
    """Per output: max abs difference, max relative difference, agreement.

    The relative difference divides by max(|reference|, atol), so outputs
    that are exactly zero in the reference do not report an infinite ratio.
    """
    rows = []
    for name, a, b in zip(names, ours, theirs):
        row: dict[str, Any] = {"output": name, "shape": list(np.shape(b)), "dtype": str(np.asarray(b).dtype)}
        a = np.asarray(a)
        b = np.asarray(b)
        if a.shape != b.shape:
            row.update(max_abs=float("nan"), max_rel=float("nan"), ok=False,
                       note=f"shape {a.shape} vs {b.shape}")
        elif a.size == 0:
            row.update(max_abs=0.0, max_rel=0.0, ok=True)
        elif a.dtype.kind in "biu" or a.dtype == np.bool_:
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            row.update(max_abs=float(diff.max()), max_rel=float((diff / np.maximum(np.abs(b.astype(np.float64)), 1)).max()),
                       ok=bool(np.array_equal(a, b)))
        elif a.dtype.kind in "fcV":
            a64 = a.astype(np.float64) if a.dtype.kind != "c" else a.astype(np.complex128)
            b64 = b.astype(np.float64) if b.dtype.kind != "c" else b.astype(np.complex128)
            same_nan = np.isnan(a64) & np.isnan(b64)
            same_inf = np.isinf(a64) & (a64 == b64)
            with np.errstate(invalid="ignore"):
                diff = np.where(same_nan | same_inf, 0.0, np.abs(a64 - b64))
            diff = np.where(np.isnan(diff), np.inf, diff)
            rel = diff / np.maximum(np.abs(np.where(np.isfinite(b64), b64, 1.0)), max(atol, 1e-30))
            row.update(max_abs=float(diff.max()), max_rel=float(rel.max()),
                       ok=bool(np.all(diff <= atol + rtol * np.abs(np.where(np.isfinite(b64), b64, 0.0)))))
        else:
            row.update(max_abs=float("nan"), max_rel=float("nan"), ok=bool(np.array_equal(a, b)))
        rows.append(row)
    return rows


def time_alternating(fns: Sequence[Callable[[], Any]], repeat: int) -> list[list[int]]:
    """Runs each fn ``repeat`` times, rotating which goes first every round so
    that neither side always runs with the warmer cache; per-run ns."""
    samples: list[list[int]] = [[] for _ in fns]
    order = list(range(len(fns)))
    for r in range(repeat):
        rot = order[r % len(order):] + order[: r % len(order)]
        for i in rot:
            t0 = time.perf_counter_ns()
            fns[i]()
            samples[i].append(time.perf_counter_ns() - t0)
    return samples


def _fmt_ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def _onnxruntime_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None


def cmd_run(args: argparse.Namespace) -> int:
    import olc_core

    from . import demo

    dims = parse_dims(args.dim)
    if args.model is None:
        model = demo.build_demo_model(seed=args.seed)
        dims = {**demo.DEMO_DIMS, **dims}
        label = "built-in demo model"
    else:
        _progress(f"loading {args.model}")
        model = load_model(args.model)
        label = args.model

    compare = args.compare
    if compare is None:
        # On by default for the demo, when onnxruntime is there to compare with.
        compare = "onnxruntime" if args.model is None and _onnxruntime_available() else "none"
        if args.model is None and compare == "none":
            _progress("onnxruntime is not installed: skipping the comparison "
                      "(pip install onnxruntime, or olc-core[compare])")
    if compare == "onnxruntime" and not _onnxruntime_available():
        raise CliError("--compare onnxruntime: onnxruntime is not installed "
                       "(pip install onnxruntime, or olc-core[compare])")

    specs = input_specs(model, dims)
    feeds = random_inputs(specs, args.seed)
    for name, dtype, shape in specs:
        _progress(f"input {name}: {dtype} {list(shape)}")

    _progress(f"preparing an olc session for the {label}")
    session = olc_core.Session(model, threads=args.threads, strict=args.strict, record_usage=True,
                               fusion=args.fusion)
    threads = int(session.threads)
    output_names = [o.name for o in model.graph.output]

    _progress(f"running olc ({threads} thread{'s' if threads != 1 else ''})")
    ours = session.run(output_names, feeds)
    usage = list(session.kernel_usage())
    plan = list(session.kernel_plan())

    result: dict[str, Any] = {"model": label, "threads": threads, "inputs": {
        n: {"dtype": str(d), "shape": list(s)} for n, d, s in specs}}
    print(f"model: {label}")
    print(f"threads: {threads}")
    print()
    print("kernel plan:")
    print(_format_table(["node", "op", "kernel", "path", "reason"], plan_rows(plan)))
    rows = node_rows(plan)
    n_native = sum(1 for r in rows if r["native"])
    n_fused = sum(1 for r in rows if r["fused_into"])
    n_groups = sum(1 for e in plan if getattr(e, "fused_nodes", ()))
    print(f"{n_native} of {len(rows)} nodes on native kernels, {len(rows) - n_native} on fallbacks"
          + (f"; {n_fused} of them fused into {n_groups} kernel call(s)" if n_fused else ""))
    print(f"kernels run: {len(usage)}")
    result["plan"] = rows  # one entry per model node; fused ones name the node that ran them

    status = EXIT_OK
    if compare == "onnxruntime":
        from .compare import onnxruntime_session

        _progress("preparing an onnxruntime session (CPUExecutionProvider)")
        ort_sess = onnxruntime_session(model, threads)
        theirs = ort_sess.run(output_names, feeds)
        rows = compare_outputs(output_names, ours, theirs, args.rtol, args.atol)
        print()
        print(f"olc vs onnxruntime {_ort_version()} (rtol {args.rtol:g}, atol {args.atol:g}):")
        print(_format_table(
            ["output", "shape", "max abs diff", "max rel diff", "agree"],
            [[r["output"], "x".join(map(str, r["shape"])) or "scalar", f"{r['max_abs']:.3g}",
              f"{r['max_rel']:.3g}", "yes" if r["ok"] else "NO"] for r in rows]))
        result["comparison"] = rows
        if not all(r["ok"] for r in rows):
            status = EXIT_MISMATCH

        if args.repeat > 0:
            _progress(f"timing {args.repeat} alternating runs each")
            # One untimed run each first: first-run allocation is not steady state.
            session.run(output_names, feeds)
            ort_sess.run(output_names, feeds)
            olc_ns, ort_ns = time_alternating(
                [lambda: session.run(output_names, feeds), lambda: ort_sess.run(output_names, feeds)],
                args.repeat)
            m_olc, m_ort = statistics.median(olc_ns), statistics.median(ort_ns)
            print()
            print(f"median time per run over {args.repeat} runs, {threads} thread(s):")
            print(f"  olc          {_fmt_ms(m_olc)}")
            print(f"  onnxruntime  {_fmt_ms(m_ort)}")
            print(f"  ratio onnxruntime/olc = {m_ort / m_olc:.2f} (> 1: olc is faster)")
            result["timing"] = {"repeat": args.repeat, "olc_ns": olc_ns, "ort_ns": ort_ns,
                                "olc_median_ns": m_olc, "ort_median_ns": m_ort, "ratio": m_ort / m_olc}
        if status == EXIT_MISMATCH:
            bad = ", ".join(r["output"] for r in rows if not r["ok"])
            print(f"olc: outputs differ from onnxruntime beyond tolerance: {bad}", file=sys.stderr)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=2)
    return status


def _ort_version() -> str:
    try:
        import onnxruntime

        return onnxruntime.__version__
    except Exception:
        return "?"


# -------------------------------------------------------------- olc kernels


def _opset_range(since: int, until: int) -> str:
    from .registration import MAX_OPSET

    return f"{since}+" if until >= MAX_OPSET else (str(since) if since == until else f"{since}-{until}")


def _types_label(types: Any) -> str:
    return "; ".join(f"{c}: {','.join(ts)}" for c, ts in types.items())


def _family_key(name: str) -> str:
    # "olc-elementwise", "olc_elementwise" and "elementwise" name the same family.
    key = name.strip().lower().replace("-", "_")
    return key[4:] if key.startswith("olc_") else key


def cmd_kernels(args: argparse.Namespace) -> int:
    import olc_core

    regs = list(olc_core.registered_kernels())
    if not regs:
        if args.json:
            print("[]")
        print(NO_KERNELS_MESSAGE, file=sys.stderr if args.json else sys.stdout)
        return EXIT_OK
    if args.family:
        want = _family_key(args.family)
        regs = [r for r in regs if _family_key(r.family or r.kernel_name.split("::")[0]) == want]
    if args.op:
        regs = [r for r in regs if r.op_type.lower() == args.op.lower()]
    regs.sort(key=lambda r: (r.domain, r.op_type, r.since_version, r.kernel_name))
    if args.json:
        print(json.dumps([
            {"domain": r.domain, "op_type": r.op_type, "kernel_name": r.kernel_name,
             "types": {k: list(v) for k, v in r.types.items()}, "inputs": list(r.inputs),
             "since_version": r.since_version, "until_version": r.until_version,
             "device": r.device, "priority": r.priority, "family": r.family}
            for r in regs], indent=2))
        return EXIT_OK
    if not regs:
        what = " and ".join(x for x in (args.family and f"family {args.family!r}", args.op and f"op {args.op!r}") if x)
        print(f"no registered kernel matches {what}")
        return EXIT_OK
    print(_format_table(
        ["domain", "op", "types", "opset", "kernel", "family"],
        [[r.domain, r.op_type, _types_label(r.types), _opset_range(r.since_version, r.until_version),
          r.kernel_name, r.family or "-"] for r in regs]))
    families = sorted({r.family or "-" for r in regs})
    print(f"{len(regs)} registration(s) from {len(families)} famil{'y' if len(families) == 1 else 'ies'}")
    return EXIT_OK


# ----------------------------------------------------------------- olc info


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _plugins() -> list[dict[str, Any]]:
    from importlib.metadata import entry_points

    from .hookspecs import ENTRY_POINT_GROUP

    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        out.append({"name": ep.name, "module": ep.value,
                    "distribution": dist.metadata["Name"] if dist else None,
                    "version": dist.version if dist else None})
    return sorted(out, key=lambda p: p["name"])


def collect_info() -> dict[str, Any]:
    import platform

    import olc_core

    simd = str(olc_core.simd_level())
    features = {str(k): bool(v) for k, v in dict(olc_core.cpu_features()).items()}
    regs = list(olc_core.registered_kernels())
    per_family: dict[str, int] = {}
    for r in regs:
        per_family[r.family or r.kernel_name.split("::")[0]] = per_family.get(r.family or r.kernel_name.split("::")[0], 0) + 1
    params = []
    try:
        from . import tuning

        for p in tuning.list_params():
            params.append({k: _get(p, k) for k in
                           ("library", "kernel", "implementation", "dtype", "name", "value", "default")})
    except Exception as exc:  # keep `olc info` useful when the registry cannot be read
        params = [{"error": f"{type(exc).__name__}: {exc}"}]
    try:
        from importlib.metadata import version

        core_version = version("olc-core")
    except Exception:
        core_version = getattr(olc_core, "__version__", "unknown")
    return {
        "olc_core_version": core_version,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "simd_level": simd,
        "detected_simd_level": olc_core.detected_simd_level(),
        "olc_simd_cap": os.environ.get("OLC_SIMD") or None,
        "cpu_features": features,
        "default_threads": olc_core.default_thread_count(),
        "plugins": _plugins(),
        "plugin_load_errors": [str(e) for e in getattr(olc_core, "plugin_load_errors", list)()],
        "kernels_per_family": per_family,
        "tuning": params,
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def cmd_info(args: argparse.Namespace) -> int:
    info = collect_info()
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return EXIT_OK
    print(f"olc-core {info['olc_core_version']} (python {info['python']}, {info['platform']})")
    print(f"cpu: {info['cpu']}")
    print(f"simd level: {info['simd_level']} (detected: {info['detected_simd_level']}; "
          f"OLC_SIMD cap: {info['olc_simd_cap'] or 'not set'})")
    present = [k for k, v in info["cpu_features"].items() if v]
    absent = [k for k, v in info["cpu_features"].items() if not v]
    print(f"cpu features: {' '.join(present) or '(none)'}")
    if absent:
        print(f"  absent: {' '.join(absent)}")
    print(f"default threads: {info['default_threads']}")
    print()
    if info["plugins"]:
        print("plugins (entry-point group olc.kernels):")
        print(_format_table(["name", "module", "distribution", "version", "kernels"],
                            [[p["name"], p["module"], p["distribution"] or "-", p["version"] or "-",
                              _plugin_kernel_count(p, info["kernels_per_family"])] for p in info["plugins"]]))
    else:
        print(f"plugins: none; {NO_KERNELS_MESSAGE}")
    for err in info["plugin_load_errors"]:
        print(f"plugin load error: {err}")
    print()
    params = info["tuning"]
    if params and "error" in params[0]:
        print(f"tuning profile: unavailable ({params[0]['error']})")
    elif params:
        print("tuning profile:")
        print(_format_table(["library", "kernel", "implementation", "dtype", "name", "value", "default"],
                            [[p[k] if p[k] is not None else "-" for k in
                              ("library", "kernel", "implementation", "dtype", "name", "value", "default")]
                             for p in params]))
    else:
        print("tuning profile: no parameters declared")
    return EXIT_OK


def _plugin_kernel_count(plugin: dict[str, Any], per_family: dict[str, int]) -> str:
    keys = {_family_key(plugin["name"]), _family_key(plugin["module"].split(".")[0])}
    if plugin["distribution"]:
        keys.add(_family_key(plugin["distribution"]))
    n = sum(v for k, v in per_family.items() if _family_key(k) in keys)
    return str(n) if n else "-"


# ------------------------------------------------------------------ parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="olc", description="optimized ONNX CPU kernels: run models, list kernels")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run a model (the built-in demo when MODEL is omitted)",
                       description="Runs MODEL (or the built-in demo) on seeded random inputs, prints the "
                                   "per-node kernel plan and, with --compare onnxruntime, the differences "
                                   "and timing against onnxruntime.")
    r.add_argument("model", nargs="?", help="path to an .onnx file")
    r.add_argument("--threads", type=int, default=None, help="executor threads (default: the session's default)")
    r.add_argument("--compare", choices=["onnxruntime", "none"], default=None,
                   help="compare with onnxruntime (default: on for the demo when onnxruntime is installed)")
    r.add_argument("--repeat", type=int, default=20, help="timed runs per runtime for --compare (default 20; 0: no timing)")
    r.add_argument("--strict", action="store_true", help="refuse fallbacks (error when a node has no native kernel)")
    r.add_argument("--no-fusion", dest="fusion", action="store_false",
                   help="run every node on its own kernel (no fusion graph passes)")
    r.add_argument("--seed", type=int, default=0, help="seed for the random inputs (default 0)")
    r.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help=f"size of a symbolic dimension (default {DEFAULT_SYMBOLIC_DIM}; the demo's batch is "
                        f"64); repeatable")
    r.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance for --compare (default 1e-4)")
    r.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance for --compare (default 1e-5)")
    r.add_argument("--json", dest="json_out", metavar="PATH", help="also write the results as JSON to PATH")
    r.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    r.set_defaults(func=cmd_run)

    k = sub.add_parser("kernels", help="list the registered kernels")
    k.add_argument("--family", help="only this family (elementwise, olc-elementwise, ...)")
    k.add_argument("--op", help="only this operator")
    k.add_argument("--json", action="store_true", help="JSON output")
    k.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    k.set_defaults(func=cmd_kernels)

    i = sub.add_parser("info", help="SIMD level, CPU features, threads, plugins, tuning")
    i.add_argument("--json", action="store_true", help="JSON output")
    i.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    i.set_defaults(func=cmd_info)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "threads", None) is not None and args.threads < 1:
        parser.error("--threads must be >= 1")
    if getattr(args, "repeat", 0) < 0:
        parser.error("--repeat must be >= 0")
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("olc: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout closed early (olc ... | head): not an error; keep the interpreter
        # from complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:
        if args.debug:
            raise
        print(f"olc: error: {_describe(exc)}", file=sys.stderr)
        return EXIT_ERROR


def _describe(exc: BaseException) -> str:
    if isinstance(exc, CliError):
        return str(exc)
    from olc_core import OlcError  # the package is loaded: this module lives in it

    if isinstance(exc, OlcError):
        return str(exc)
    return f"{type(exc).__name__}: {exc} (run with --debug for the traceback)"


if __name__ == "__main__":
    sys.exit(main())
