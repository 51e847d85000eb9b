#!/usr/bin/env python3
"""Times olc against onnxruntime (CPUExecutionProvider) on one-node models.

    python tools/benchmark_parity.py [--suite unary|overhead|FAMILY ...]
        [--cases MODULE[:FUNC] ...] [--ops Abs,Exp] [--groups gemm,const]
        [--sizes 4096,65536]
        [--threads 1,2] [--min-time 0.5] [--json out.json] [--markdown out.md]
        [--enforce] [--quick] [--retime N]

Method (the performance contract in ARCHITECTURE.md): both runtimes get the
same input arrays, the same thread count (olc ``Session(threads=N)``; ORT
``intra_op_num_threads=N``, ``inter_op_num_threads=1``, sequential
execution) and run in this one process. Before timing, olc's
``kernel_usage()`` must show the expected native kernel and the outputs
must agree with ORT; a case failing either is reported and not timed. After
a warm-up, runs alternate in blocks of about 50 ms (at most 1000 runs) whose
order flips every block pair (olc block, ort block, ort block, olc block,
...), with at least 50 ms of idle time before each block, and until the
process's other threads have stopped using CPU (Linux: their schedstat), so
a runtime's threads still spinning after its own runs do not land on the
other's samples; the run count comes from the per-case time budget
(``--min-time``). Every raw sample (``perf_counter_ns``) is kept in the JSON.
The ratio is ort_median / olc_median: above 1 means olc is faster.
One-thread cases also record each block's thread CPU time per run
(``olc_cpu_ns``, ``ort_cpu_ns``: both runtimes run a one-thread session on
the calling thread) and ``cpu_ratio``, the ratio of their medians; the
summary gives its median and minimum per suite. CPU time leaves out what
the hypervisor or other processes took from the thread, so on a shared VM
it shows what wall-clock medians moving 30 % between runs cannot; the
gates stay on wall-clock time. Each case
also records the CPUs that other processes (``other_cpus``) and the
hypervisor (``steal_cpus``) took on average while it was timed (Linux
/proc/stat); the report lists the cases where either exceeded
DISTURBED_CPUS, since a busy second core slows two-thread runs. A disturbed
case is timed again (``--retime``, 1 more try by default, none with
``--quick``) until a try is undisturbed, and the try with the least
interference is kept, whatever its ratio; the case records every try's
interference (``tries``). This helps against a passing disturbance; a VM
whose vCPUs are overcommitted shows steal on every two-thread case (a
quarter to a third of a CPU on a 2-vCPU cloud VM), which no retry avoids.

The ISA: each case records the olc SIMD level its sessions ran at
(``simd_level``: the detected level, lowered by OLC_SIMD) and the kernels'
usage details (which name the variant that ran), and the environment the
host's CPU features (``cpu_features``, and ``cpu_features_in_force`` under
the cap). Host probes, measured once per report (``host``): the
single-thread float32 FMA peak of AVX2 (ymm) and of AVX-512 (zmm) where the
CPU has them (from ``olc_matmul.fma_peak_gflops`` when olc-matmul is
installed), and the copy bandwidth of numpy on 1 and on each thread count
of the run (64 MiB: memory). Against them each timed case reports its
efficiency: with ``flops`` (float operations per run, given by the case)
its GFLOP/s over the FMA peak of the level that ran times the threads (so
on an AVX-512 host, a run under OLC_SIMD=avx2 is judged against the AVX2
peak); and its GB/s (``bytes`` per run given by the case, else the bytes
of its inputs and outputs) over the copy bandwidth of its thread count at
its own footprint: a numpy copy of half its bytes (to the nearest power of
two), probed once per size and thread count (``host.copy_gbps_at``), so a
case that the last-level cache holds is judged against the cache's
bandwidth, not memory's. Cases under 4 MiB get no bandwidth efficiency.
OLC_SIMD does not cap
onnxruntime: on an AVX-512 host these efficiencies judge olc's AVX2 paths,
and ``tools/avx2_host.py`` (CPUID answering without AVX-512 for the whole
process, where the CPU has CPUID faulting) runs this benchmark with both
runtimes on their AVX2 paths, to be compared directly.

Suites:
  unary     float32 unary ops, one node on a 1-D tensor of each size. The op
            list comes from the elementwise family (``benchmark_cases()`` or
            its manifest) when installed, else from the built-in list.
  overhead  per-run cost on 1-element tensors: one Abs node (gate: olc <=
            0.6 x ort), and a chain of 100 alternating Abs/Neg nodes
            (per-node cost = (chain - one node) / 99; gate: olc <= ort).
  models    whole models from tools/model_builders.py (a BERT-style encoder
            with its shape glue, batch 1, sequence 128; gate: ratio >= 1.0;
            four CNNs; the genai-shaped decoder LLM decoding after a past of
            512 and on a 128-token prompt; gate: median ratio >= 1.2).
  conv      the convolution work of several families, one report: olc-matmul's
            Conv/ConvTranspose cases (groups conv, conv_layers: ResNet-50 and
            MobileNetV2 layers at batch 1 and 8), olc-tensor's pooling and
            Resize cases (pool, resize) and the four CNN models of the models
            suite (cnn), with those groups' gates.
  FAMILY    any other name imports ``olc_FAMILY`` and calls its
            ``benchmark_cases()`` (or ``olc_FAMILY.benchmarks.benchmark_cases``).

A family's case list (``--cases pkg.module:func`` or the FAMILY suite) is a
list of dicts (or anything with those attributes)::

    {"op": "MatMul", "domain": "", "opset": 21, "attributes": {},
     "inputs": [{"shape": [512, 512], "dtype": "float32", "generator": "normal"}, ...],
     "outputs": ["float32"],               # optional: default one, the first input's type
     "expected_kernel": "olc_matmul::MatMul",  # optional: default every node native
     "name": "MatMul 512x512", "size": 262144,  # optional labels
     "group": "gemm",                      # optional: what family gates select
     "flops": 2 * 512 ** 3,                # optional: float operations per run (GFLOP/s, FMA efficiency)
     "bytes": None,                        # optional: bytes moved per run (default: inputs + outputs)
     "rtol": 1e-4, "atol": 1e-5}           # optional tolerances

``generator`` is a name from GENERATORS or a callable ``(rng, shape, dtype)
-> ndarray``. An input with ``"constant": True`` becomes an initializer of
the model (a weight: olc may pre-pack it at session creation) instead of a
feed. A case may give ``"model"``: a callable returning a whole ModelProto
(several nodes, its own initializers); its graph inputs, in order, take the
arrays generated from ``inputs`` and ``op`` only labels the case. For an op
onnxruntime's CPU has no kernel for, ``"ort_model"``: a callable taking the
case's model and returning the model onnxruntime runs instead, computing the
same function with the same input and output names (BiasSoftmax as Add +
Softmax); the report lists its ops under ``ort_nodes``. The
function may take a ``sizes`` keyword (the ``--sizes``).

The module giving the cases may also define
``benchmark_gates() -> [{"name", "group", "median_at_least", "min_at_least"}]``
(``group`` None: every case of the suite; either bound may be None), checked
over the timed cases of the suite (and group), and
``benchmark_extras(threads) -> [{"name", "value", "unit", "at_least", "detail"}]``
(``threads``: the list of thread counts of the run)
for figures that are not ratios against onnxruntime (a kernel's GFLOP/s
against the machine's peak, say); ``at_least`` None reports without a gate.

Gates (``--enforce``, exit 1 when any fails): unary median ratio >= 1.2 and
every unary case >= 0.95; the two overhead gates above; the family gates and
extras; any case that ran on a fallback or disagreed with ORT fails its
suite's gate.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from olc_core.compare import settle, time_in_blocks

DEFAULT_SIZES = (4096, 65536, 1048576, 4194304)
QUICK_SIZES = (4096, 65536)
DEFAULT_THREADS = (1, 2)
DEFAULT_OPSET = 20  # Gelu needs 20
FALLBACK_KERNEL = "onnx.reference"

UNARY_MEDIAN_GATE = 1.2
UNARY_CASE_GATE = 0.95
OVERHEAD_ONE_NODE_GATE = 0.6  # olc <= 0.6 x ort per run
CHAIN_LENGTH = 100


# ---------------------------------------------------------------- generators


def _normal(scale: float = 1.0) -> Callable[..., np.ndarray]:
    def gen(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
        return (scale * rng.standard_normal(shape)).astype(dtype)

    return gen


def _uniform(lo: float, hi: float) -> Callable[..., np.ndarray]:
    def gen(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
        return rng.uniform(lo, hi, size=shape).astype(dtype)

    return gen


def _nonzero(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
    # |x| in [0.5, 2] with random signs: Reciprocal stays finite and well-conditioned.
    mag = rng.uniform(0.5, 2.0, size=shape)
    return np.where(rng.random(shape) < 0.5, -mag, mag).astype(dtype)


def _integers(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
    return rng.integers(-100, 100, size=shape).astype(dtype)


GENERATORS: dict[str, Callable[..., np.ndarray]] = {
    "normal": _normal(),
    "wide": _normal(4.0),  # reaches the saturated ranges of Tanh/Sigmoid/Erf
    "positive": _uniform(0.01, 100.0),
    "nonzero": _nonzero,
    "integers": _integers,
}

# Built-in unary list: (op, attributes, generator).
BUILTIN_UNARY: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("Abs", {}, "normal"),
    ("Neg", {}, "normal"),
    ("Exp", {}, "wide"),
    ("Log", {}, "positive"),
    ("Sqrt", {}, "positive"),
    ("Reciprocal", {}, "nonzero"),
    ("Sigmoid", {}, "wide"),
    ("HardSigmoid", {"alpha": 0.2, "beta": 0.5}, "wide"),
    ("Tanh", {}, "wide"),
    ("Relu", {}, "normal"),
    ("LeakyRelu", {"alpha": 0.1}, "normal"),
    ("Elu", {"alpha": 1.0}, "normal"),
    ("Selu", {}, "normal"),
    ("Softplus", {}, "wide"),
    ("Gelu", {"approximate": "none"}, "wide"),
    ("Erf", {}, "wide"),
    ("Floor", {}, "wide"),
    ("Ceil", {}, "wide"),
    ("Round", {}, "wide"),
    ("Sign", {}, "normal"),
    ("Sin", {}, "wide"),
    ("Cos", {}, "wide"),
)
_UNARY_GENERATOR = {op: gen for op, _, gen in BUILTIN_UNARY}
_UNARY_ATTRS = {op: attrs for op, attrs, _ in BUILTIN_UNARY}


# --------------------------------------------------------------------- cases


@dataclass
class Case:
    suite: str
    op: str
    inputs: list[dict[str, Any]]  # {"shape", "dtype", "generator"}
    domain: str = ""
    opset: int = DEFAULT_OPSET
    attributes: dict[str, Any] = field(default_factory=dict)
    outputs: list[str] | None = None
    expected_kernel: str | None = None
    name: str | None = None
    size: int | None = None
    rtol: float = 1e-4
    atol: float = 1e-5
    group: str | None = None
    model: Callable[[], Any] | None = None  # builds a multi-node model; inputs feed its graph inputs
    ort_model: Callable[[Any], Any] | None = None  # the model onnxruntime runs instead, from olc's
    flops: float | None = None  # float operations per run
    bytes: float | None = None  # bytes moved per run (default: inputs + outputs)

    @property
    def label(self) -> str:
        return self.name or self.op


def _field(obj: Any, key: str, default: Any = None) -> Any:
    return obj.get(key, default) if isinstance(obj, dict) else getattr(obj, key, default)


def case_from_family(obj: Any, suite: str) -> Case:
    """Normalizes a case given by a family (dict or object)."""
    if isinstance(obj, Case):
        return obj
    inputs = []
    for spec in _field(obj, "inputs"):
        if isinstance(spec, dict):
            inputs.append({"shape": list(spec["shape"]), "dtype": spec.get("dtype", "float32"),
                           "generator": spec.get("generator", "normal"), "constant": bool(spec.get("constant", False))})
        else:  # (shape, dtype[, generator])
            inputs.append({"shape": list(spec[0]), "dtype": spec[1] if len(spec) > 1 else "float32",
                           "generator": spec[2] if len(spec) > 2 else "normal"})
    outputs = _field(obj, "outputs")
    if isinstance(outputs, int):
        outputs = [inputs[0]["dtype"]] * outputs
    size = _field(obj, "size")
    if size is None:
        size = int(np.prod(inputs[0]["shape"])) if inputs else None
    return Case(suite=_field(obj, "suite", suite), op=_field(obj, "op") or _field(obj, "op_type"), inputs=inputs,
                domain=_field(obj, "domain", "") or "", opset=int(_field(obj, "opset", DEFAULT_OPSET)),
                attributes=dict(_field(obj, "attributes", {}) or {}), outputs=outputs,
                expected_kernel=_field(obj, "expected_kernel"), name=_field(obj, "name"), size=size,
                rtol=float(_field(obj, "rtol", 1e-4)), atol=float(_field(obj, "atol", 1e-5)),
                group=_field(obj, "group"), model=_field(obj, "model"), ort_model=_field(obj, "ort_model"),
                flops=_field(obj, "flops"), bytes=_field(obj, "bytes"))


def _call_case_function(fn: Callable[..., Any], sizes: Sequence[int]) -> list[Any]:
    try:
        takes_sizes = "sizes" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        takes_sizes = False
    return list(fn(sizes=list(sizes)) if takes_sizes else fn())


def load_case_function(spec: str) -> Callable[..., Any]:
    module_name, _, func = spec.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, func or "benchmark_cases")


def _special(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
    # Normal values with about 1% each of NaN, +inf and -inf: IsNaN / IsInf have work to do.
    x = rng.standard_normal(shape)
    u = rng.random(shape)
    x = np.where(u < 0.01, np.nan, np.where(u < 0.02, np.inf, np.where(u < 0.03, -np.inf, x)))
    return x.astype(dtype)


GENERATORS["special"] = _special
_UNARY_GENERATOR.update(IsNaN="special", IsInf="special")


@dataclass(frozen=True)
class UnaryOp:
    op: str
    attributes: dict[str, Any]
    generator: str
    output: str = "float32"
    kernel: str | None = None


def unary_ops(opset: int = DEFAULT_OPSET) -> tuple[list[UnaryOp], str]:
    """The float32 unary ops of the elementwise family's manifest at ``opset``,
    else the built-in list."""
    builtin = [UnaryOp(op, dict(attrs), gen, kernel=f"olc_elementwise::{op}") for op, attrs, gen in BUILTIN_UNARY]
    try:
        manifest = importlib.import_module("olc_elementwise.manifest")
        rows = manifest.UNARY_OPS
    except (ImportError, AttributeError):
        return builtin, "built-in list"
    ops = []
    for row in rows:
        if "float32" not in row.types_at(opset):
            continue
        kernel = manifest.kernel_name(row.op) if hasattr(manifest, "kernel_name") else f"olc_elementwise::{row.op}"
        # The manifest's attributes carry ONNX defaults; the built-in list may set
        # a non-default value (e.g. LeakyRelu alpha) to exercise the attribute path.
        ops.append(UnaryOp(row.op, dict(_UNARY_ATTRS.get(row.op, {})), _UNARY_GENERATOR.get(row.op, "normal"),
                           output="bool" if getattr(row, "out_bool", False) else "float32", kernel=kernel))
    if not ops:
        return builtin, "built-in list (olc_elementwise.manifest has no float32 unary op)"
    return ops, "olc_elementwise.manifest"


def unary_cases(sizes: Sequence[int]) -> tuple[list[Case], str]:
    try:
        fam = importlib.import_module("olc_elementwise")
        fn = getattr(fam, "benchmark_cases", None)
    except ImportError:
        fn = None
    if fn is not None:
        raw = _call_case_function(fn, sizes)
        cases = [case_from_family(c, "unary") for c in raw]
        cases = [c for c in cases if c.suite == "unary"]
        if cases:
            return cases, "olc_elementwise.benchmark_cases()"
    ops, source = unary_ops()
    cases = []
    for u in ops:
        for n in sizes:
            cases.append(Case(suite="unary", op=u.op, attributes=u.attributes, size=n,
                              inputs=[{"shape": [n], "dtype": "float32", "generator": u.generator}],
                              outputs=[u.output], expected_kernel=u.kernel))
    return cases, source


def family_module(suite: str) -> Any:
    """The module whose benchmark_cases() gives a family suite (``models``:
    the whole test models of tools/model_builders.py)."""
    names = ["model_builders"] if suite == "models" else [f"olc_{suite}", f"olc_{suite}.benchmarks"]
    for module_name in names:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if getattr(module, "benchmark_cases", None) is not None:
            return module
    return None


# A suite drawn from several families: suite -> [(family suite, its groups)].
COMPOSITE_SUITES: dict[str, list[tuple[str, frozenset[str]]]] = {
    "conv": [("matmul", frozenset({"conv", "conv_layers"})), ("tensor", frozenset({"pool", "resize"})),
             ("models", frozenset({"cnn", "cnn_more"}))],
}


class _CompositeGates:
    """Stands for a composite suite's module: the gates of its families that
    select one of its groups (a family gate over its whole suite would judge
    cases it was not written for)."""

    def __init__(self, gates: list[dict[str, Any]]) -> None:
        self._gates = gates

    def benchmark_gates(self) -> list[dict[str, Any]]:
        return list(self._gates)


def composite_cases(suite: str, sizes: Sequence[int]) -> tuple[list[Case], str, _CompositeGates]:
    cases: list[Case] = []
    gates: list[dict[str, Any]] = []
    sources = []
    for family, groups in COMPOSITE_SUITES[suite]:
        module = family_module(family)
        if module is None:  # a family not installed: its part of the suite is left out, and said
            print(f"benchmark_parity: suite {suite!r}: olc_{family} is not installed, its cases are left out",
                  file=sys.stderr)
            continue
        found = [case_from_family(c, family) for c in _call_case_function(module.benchmark_cases, sizes)]
        cases += [replace(c, suite=suite) for c in found if c.group in groups]
        gates += [g for g in getattr(module, "benchmark_gates", list)() if g.get("group") in groups]
        sources.append(f"{module.__name__}.benchmark_cases() groups {', '.join(sorted(groups))}")
    return cases, "; ".join(sources), _CompositeGates(gates)


def family_cases(suite: str, sizes: Sequence[int]) -> tuple[list[Case], str]:
    module = family_module(suite)
    if module is not None:
        return ([case_from_family(c, suite) for c in _call_case_function(module.benchmark_cases, sizes)],
                f"{module.__name__}.benchmark_cases()")
    raise SystemExit(f"benchmark_parity: unknown suite {suite!r}: not built in (unary, overhead) and no "
                     f"olc_{suite}.benchmark_cases() is installed")


# -------------------------------------------------------------------- models


def _np_dtype(name: str) -> Any:
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(name)


def _onnx_elem(name: str) -> int:
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(_np_dtype(name)))


def build_model(nodes: Sequence[Any], inputs: Sequence[tuple[str, str, Sequence[int]]],
                outputs: Sequence[tuple[str, str]], opsets: dict[str, int]) -> Any:
    from onnx import helper

    graph = helper.make_graph(
        list(nodes), "bench",
        [helper.make_tensor_value_info(n, _onnx_elem(t), list(s)) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, _onnx_elem(t), None) for n, t in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    model.ir_version = 9  # readable by onnxruntime >= 1.17
    return model


def case_model(case: Case, arrays: Sequence[np.ndarray]) -> tuple[Any, dict[str, np.ndarray]]:
    """The case's model and its feeds: a one-node model whose constant inputs
    are initializers, or the case's own multi-node model fed in input order."""
    from onnx import helper, numpy_helper

    if case.model is not None:
        model = case.model()
        initialized = {t.name for t in model.graph.initializer}
        names = [i.name for i in model.graph.input if i.name not in initialized]
        if len(names) != len(arrays):
            raise ValueError(f"case {case.label!r}: its model has {len(names)} graph inputs, the case gives {len(arrays)}")
        return model, dict(zip(names, arrays))
    in_names = [f"x{i}" for i in range(len(case.inputs))]
    out_types = case.outputs or [case.inputs[0]["dtype"]]
    out_names = [f"y{i}" for i in range(len(out_types))]
    node = helper.make_node(case.op, in_names, out_names, domain=case.domain, name=case.op.lower(),
                            **case.attributes)
    opsets = {"": case.opset} if case.domain in ("", "ai.onnx") else {"": DEFAULT_OPSET, case.domain: case.opset}
    fed = [(n, s, a) for n, s, a in zip(in_names, case.inputs, arrays) if not s.get("constant")]
    model = build_model([node], [(n, s["dtype"], s["shape"]) for n, s, _ in fed],
                        list(zip(out_names, out_types)), opsets)
    for n, s, a in zip(in_names, case.inputs, arrays):
        if s.get("constant"):
            model.graph.initializer.append(numpy_helper.from_array(a, n))
    return model, {n: a for n, _, a in fed}


def chain_model(length: int) -> Any:
    from onnx import helper

    nodes = []
    prev = "x0"
    for i in range(length):
        out = "y0" if i == length - 1 else f"t{i}"
        nodes.append(helper.make_node("Abs" if i % 2 == 0 else "Neg", [prev], [out], name=f"n{i}"))
        prev = out
    return build_model(nodes, [("x0", "float32", [1])], [("y0", "float32")], {"": DEFAULT_OPSET})


def make_arrays(case_inputs: Sequence[dict[str, Any]], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in case_inputs:
        gen = spec.get("generator", "normal")
        gen = GENERATORS[gen] if isinstance(gen, str) else gen
        shape = tuple(spec["shape"])
        # np.ascontiguousarray would turn a 0-d (scalar) input into shape (1,).
        a = np.asarray(gen(rng, shape, _np_dtype(spec["dtype"]))).reshape(shape)
        arrays.append(a if a.flags.c_contiguous else a.copy(order="C"))
    return arrays


def make_feeds(case_inputs: Sequence[dict[str, Any]], seed: int) -> dict[str, np.ndarray]:
    return {f"x{i}": a for i, a in enumerate(make_arrays(case_inputs, seed))}


# ------------------------------------------------------------------- timing


@dataclass
class Runner:
    """The two runtimes prepared for one model and thread count."""

    olc: Any
    ort: Any
    feeds: dict[str, np.ndarray]
    out_names: list[str]

    def run_olc(self) -> Any:
        return self.olc.run(self.out_names, self.feeds)

    def run_ort(self) -> Any:
        return self.ort.run(self.out_names, self.feeds)


def prepare(model: Any, threads: int, feeds: dict[str, np.ndarray], ort_model: Any = None) -> tuple[Runner, Any]:
    """Returns the timing runner and a usage-recording olc session for checks
    (onnxruntime runs ``ort_model`` when given, else the same model)."""
    import olc_core
    from olc_core.compare import onnxruntime_session

    data = model.SerializeToString()
    out_names = [o.name for o in model.graph.output]
    checker = olc_core.Session(data, threads=threads, record_usage=True)
    runner = Runner(olc_core.Session(data, threads=threads), onnxruntime_session(ort_model or model, threads), feeds,
                    out_names)
    return runner, checker


def verify(case_expected: str | None, checker: Any, runner: Runner, rtol: float, atol: float) -> dict[str, Any]:
    """Checks the kernel that ran and the agreement with ORT, before timing."""
    ours = checker.run(runner.out_names, runner.feeds)
    usage = list(checker.kernel_usage())
    plan = list(checker.kernel_plan())
    from olc_core.session import CONSTANT_FOLDED_REASON

    # Constant nodes are read once at load: nothing of theirs runs per run. A
    # family's Python kernel (strings, maps: ZipMap) is an olc kernel, not a fallback.
    fallbacks = [f"{e.node_name} ({e.op_type}): {e.reason}" for e in plan
                 if not e.native and e.kernel.startswith(FALLBACK_KERNEL) and e.reason != CONSTANT_FOLDED_REASON]
    details = list(checker.kernel_usage_details()) if hasattr(checker, "kernel_usage_details") else []
    result: dict[str, Any] = {"kernel_usage": usage[:8] + (["..."] if len(usage) > 8 else []),
                              "kernel_details": details[:8] + (["..."] if len(details) > 8 else []),
                              "output_bytes": int(sum(np.asarray(o).nbytes for o in ours)),
                              "status": "ok", "detail": ""}
    if fallbacks:
        result.update(status="fallback", detail="; ".join(fallbacks[:3]))
        return result
    folded = [e for e in plan if getattr(e, "shape_plan", "") == "folded"]
    if case_expected and case_expected not in usage and any(e.kernel == case_expected for e in folded):
        # Every input is known at construction: the value is a plan constant
        # (onnxruntime's constant folding does the same); nothing runs to time.
        result.update(status="folded", detail=f"{case_expected} ran once at construction (all inputs constant)")
        return result
    if case_expected and case_expected not in usage:
        result.update(status="wrong-kernel", detail=f"expected {case_expected}, ran {', '.join(usage) or 'nothing'}")
        return result
    if any(k.startswith(FALLBACK_KERNEL) for k in usage):
        result.update(status="fallback", detail=f"{FALLBACK_KERNEL} ran")
        return result
    theirs = runner.run_ort()
    worst = 0.0
    for name, a, b in zip(runner.out_names, ours, theirs):
        if _is_maps(b):
            # A sequence of maps (ai.onnx.ml ZipMap): the same keys in the same
            # order, then the values compared as an array.
            if not _is_maps(a) or [list(d) for d in a] != [list(d) for d in b]:
                result.update(status="mismatch", detail=f"{name}: the sequences of maps differ in their keys")
                return result
            a, b = _map_values(a), _map_values(b)
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            result.update(status="mismatch", detail=f"{name}: {a.dtype}{a.shape} vs ORT {b.dtype}{b.shape}")
            return result
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if not np.allclose(a64, b64, rtol=rtol, atol=atol, equal_nan=True):
            diff = np.abs(a64 - b64)
            i = int(np.nanargmax(diff))
            result.update(status="mismatch", detail=f"{name}: max abs diff {float(np.nanmax(diff)):.3g} at {i} "
                                                     f"(olc {a64.flat[i]!r}, ort {b64.flat[i]!r}, rtol {rtol}, atol {atol})")
            return result
        with np.errstate(invalid="ignore"):
            d = np.abs(a64 - b64)
        d = d[~np.isnan(d)]
        worst = max(worst, float(d.max()) if d.size else 0.0)
    result["max_abs_diff"] = worst
    return result


def _is_maps(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(d, dict) for d in x)


def _map_values(maps: list[dict[Any, Any]]) -> np.ndarray:
    return np.array([list(d.values()) for d in maps], dtype=np.float64).reshape(len(maps), -1)


# Runs alternate in blocks of about this long rather than one by one, with an
# idle gap after each block: a runtime's worker threads may keep spinning for
# a while after its run (ORT's do by default) and would take the cores from
# whichever runtime ran next. Measured on 4M-element Abs, 2 threads: without
# the gap olc's samples had 4-8 ms stalls (a worker time-sliced against ORT's
# spinner), with it both runtimes start every block from idle. A fixed gap is
# not enough: ORT's worker spins for 40-50 ms after a run on this machine
# (measured from its CPU time), so the gap lasts until the process's other
# threads have stopped using CPU (MatMulNBits 128x2048x2048 on 2 threads:
# olc 8.3 ms while ORT's worker spun, 5.9 ms after it stopped).
BLOCK_NS = 50_000_000
MAX_BLOCK_RUNS = 1000
# A case during whose timed runs other processes (or the hypervisor) took
# more than this many CPUs on average is listed as disturbed in the report.
DISTURBED_CPUS = 0.1


def _machine_cpu_s() -> tuple[float, float, float] | None:
    """(CPU seconds the whole machine has spent busy, seconds the hypervisor
    has stolen from its vCPUs, CPU seconds of this process) so far; None
    where /proc/stat does not say."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 8:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    steal = int(fields[8]) if len(fields) > 8 else 0
    own = os.times()
    return (user + nice + system + irq + softirq) / hz, steal / hz, own.user + own.system


def _interference(before: tuple[float, float, float] | None, after: tuple[float, float, float] | None,
                  wall_s: float) -> dict[str, float]:
    """CPUs used on average by other processes, and stolen by the
    hypervisor, between two _machine_cpu_s() readings wall_s apart."""
    if before is None or after is None or wall_s <= 0:
        return {}
    busy, stolen, own = (a - b for a, b in zip(after, before))
    return {"other_cpus": round(max(0.0, busy - own) / wall_s, 3), "steal_cpus": round(max(0.0, stolen) / wall_s, 3)}


def timed_pairs(fa: Callable[[], Any], fb: Callable[[], Any], min_time_s: float,
                min_pairs: int = 5, max_pairs: int = 100_000, warmup: int = 3,
                cpu: dict[str, list[float]] | None = None) -> tuple[list[int], list[int]]:
    """Samples of fa and fb taken in alternating blocks (olc_core.compare's
    time_in_blocks: the order flips every block pair, each block after
    settle()), as many as take about min_time_s by a probe run first.
    cpu: when given, cpu["a"] and cpu["b"] get each block's calling-thread
    CPU time per run (ns)."""
    clock = time.perf_counter_ns
    for _ in range(warmup):
        fa()
        fb()
    # Size the run from a short probe so the whole case takes about min_time_s.
    t0 = clock()
    probe = 0
    while probe < 3 or (clock() - t0 < 0.05e9 * min(1.0, min_time_s * 4) and probe < 1000):
        fa()
        fb()
        probe += 1
    per_pair = (clock() - t0) / probe
    pairs = int(min(max_pairs, max(min_pairs, min_time_s * 1e9 / max(per_pair, 1))))
    block = int(min(MAX_BLOCK_RUNS, max(1, BLOCK_NS * 2 // max(per_pair, 1)), max(1, pairs // 4)))
    # The probe ended with a run of fb, whose workers may still spin: every
    # block, the first included, starts after settle().
    cpu_lists: list[list[float]] | None = [[], []] if cpu is not None else None
    a, b = time_in_blocks([fa, fb], pairs, block, cpu_lists)
    if cpu is not None and cpu_lists is not None:
        cpu["a"], cpu["b"] = cpu_lists
    return a, b


# --------------------------------------------------------------------- suites


def run_case(case: Case, threads: int, args: argparse.Namespace,
             host: dict[str, Any] | None = None) -> dict[str, Any]:
    import olc_core

    rec: dict[str, Any] = {
        "suite": case.suite, "group": case.group, "name": case.label, "op": case.op, "domain": case.domain or "ai.onnx",
        "opset": case.opset, "attributes": case.attributes, "size": case.size, "threads": threads,
        "inputs": [{"shape": s["shape"], "dtype": s["dtype"],
                    "generator": s["generator"] if isinstance(s["generator"], str) else getattr(s["generator"], "__name__", "custom"),
                    "constant": bool(s.get("constant"))}
                   for s in case.inputs],
        "expected_kernel": case.expected_kernel,
        "nodes": None,
        "simd_level": str(olc_core.simd_level()),  # the level the case's sessions are created at
    }
    try:
        arrays = make_arrays(case.inputs, args.seed)
        rec["input_bytes"] = int(sum(a.nbytes for a in arrays))
        model, feeds = case_model(case, arrays)
        rec["nodes"] = len(model.graph.node)
        ort_model = case.ort_model(model) if case.ort_model is not None else None
        if ort_model is not None:
            rec["ort_nodes"] = [n.op_type for n in ort_model.graph.node]
        runner, checker = prepare(model, threads, feeds, ort_model)
        rec.update(verify(case.expected_kernel, checker, runner, case.rtol, case.atol))
    except Exception as exc:  # a case that cannot even be prepared is a finding, not a crash
        rec.update(status="error", detail=f"{type(exc).__name__}: {exc}")
        return rec
    if rec["status"] != "ok":
        return rec
    rec.update(timed_runner(runner, args.min_time, threads=threads))
    rec.update(efficiency(rec, case, host))
    return rec


def interference(rec: dict[str, Any]) -> float:
    """The CPUs other processes or the hypervisor took while a case was timed."""
    return max(rec.get("other_cpus", 0.0), rec.get("steal_cpus", 0.0))


def run_case_settled(case: Case, threads: int, args: argparse.Namespace,
                     host: dict[str, Any] | None = None) -> dict[str, Any]:
    """run_case, timed again (at most args.retime more tries) while the
    machine was disturbed: the try with the least interference is kept,
    chosen by interference alone, never by its ratio."""
    rec = run_case(case, threads, args, host)
    tries = [rec]
    while (rec["status"] == "ok" and interference(rec) > DISTURBED_CPUS and len(tries) <= args.retime):
        again = run_case(case, threads, args, host)
        if again["status"] != "ok":
            break
        tries.append(again)
        rec = min(tries, key=interference)
    if len(tries) > 1:
        rec["tries"] = [{"other_cpus": t.get("other_cpus"), "steal_cpus": t.get("steal_cpus"), "ratio": t.get("ratio")}
                        for t in tries]
    return rec


def efficiency(rec: dict[str, Any], case: Case, host: dict[str, Any] | None) -> dict[str, Any]:
    """olc's GFLOP/s (cases giving flops) against the FMA peak of the level
    that ran times the threads, and its GB/s against the copy bandwidth at
    that thread count. The same for onnxruntime (ort_*), its GFLOP/s against
    the host's best peak (it picks its own level): a runtime near the limit
    bounds the ratio any schedule can reach."""
    out: dict[str, Any] = {}
    t_ns = rec.get("olc_median_ns")
    if not t_ns:
        return out
    ort_ns = rec.get("ort_median_ns")
    host = host or {}
    if case.flops:
        out["flops"] = float(case.flops)
        out["olc_gflops"] = case.flops / t_ns
        peaks = host.get("fma_peak_gflops") or {}
        peak = peaks.get(rec.get("simd_level"))
        if peak:
            out["peak_gflops"] = peak * rec["threads"]
            out["flops_efficiency"] = out["olc_gflops"] / out["peak_gflops"]
        if ort_ns:
            out["ort_gflops"] = case.flops / ort_ns
            if peaks:
                out["ort_flops_efficiency"] = out["ort_gflops"] / (max(peaks.values()) * rec["threads"])
    nbytes = case.bytes if case.bytes is not None else rec.get("input_bytes", 0) + rec.get("output_bytes", 0)
    if nbytes:
        out["bytes"] = float(nbytes)
        out["olc_gbps"] = nbytes / t_ns
        bw = footprint_bandwidth(host, rec["threads"], int(nbytes))
        if bw:
            out["copy_gbps"] = bw
            out["bw_efficiency"] = out["olc_gbps"] / bw
        if ort_ns:
            out["ort_gbps"] = nbytes / ort_ns
            if bw:
                out["ort_bw_efficiency"] = out["ort_gbps"] / bw
    return out


# onnxruntime at this share of the FMA peak or of the copy bandwidth: a case
# below a gate floor is marked as bound by the hardware in the gate's detail.
AT_LIMIT = 0.85


def at_limit(c: dict[str, Any]) -> str:
    """A note for a gate's list of slow cases, such as ' (ort at 91 % of the
    FMA peak)', when onnxruntime ran the case at the hardware's limit (olc
    cannot be much faster there); empty otherwise."""
    for key, what in (("ort_flops_efficiency", "FMA peak"), ("ort_bw_efficiency", "copy bandwidth")):
        if (c.get(key) or 0.0) >= AT_LIMIT:
            return f" (ort at {100 * c[key]:.0f} % of the {what})"
    return ""


def footprint_bucket(nbytes: int) -> int | None:
    """The copy that stands for a case moving nbytes (read plus write): the
    power of two nearest nbytes / 2 copied, so that source and destination
    take the case's footprint in the caches; None below FOOTPRINT_MIN_BYTES,
    where a copy times its call more than its bytes."""
    if nbytes < FOOTPRINT_MIN_BYTES:
        return None
    return 1 << max(0, round(np.log2(nbytes / 2)))


def footprint_bandwidth(host: dict[str, Any], threads: int, nbytes: int) -> float | None:
    """The copy bandwidth at a case's footprint and thread count, probed on
    first need and kept in host["copy_gbps_at"] ("threads:bytes copied").
    A single probe of 64 MiB judges every case against memory; on a host
    whose last-level cache holds a 4M-element case (Sapphire Rapids' 105
    MiB and more) that case runs from the cache and showed 200 % of it.
    Hosts given without the table (a report's own figures) keep their
    single probe."""
    bucket = footprint_bucket(nbytes)
    if bucket is None:
        return None
    table = host.get("copy_gbps_at")
    if table is None:
        return (host.get("copy_gbps") or {}).get(str(threads))
    key = f"{threads}:{bucket}"
    if key not in table:
        settle()  # the runtimes' workers done spinning before the copies
        table[key] = copy_bandwidth(threads, bucket, reps=max(5, min(100, (256 << 20) // bucket)))
    return table[key]


# ------------------------------------------------------------------- probes

COPY_PROBE_BYTES = 64 << 20  # far above any L2 and most L3 slices: memory, not cache
FOOTPRINT_MIN_BYTES = 4 << 20  # smaller cases: no bandwidth efficiency (call costs, not bytes)


def fma_peaks(quick: bool = False) -> dict[str, float]:
    """Single-thread float32 FMA peaks by SIMD level ("avx2": ymm, "avx512":
    zmm), best of three, from olc-matmul's probe; {} without olc-matmul."""
    try:
        import olc_matmul
    except ImportError:
        return {}
    probe = getattr(olc_matmul, "fma_peak_gflops", None)
    if probe is None:
        return {}
    iters = 2_000_000 if quick else 20_000_000
    best: dict[str, float] = {}
    # The levels take turns, so that a slow moment of the host (a vCPU
    # coming back from idle, a neighbour's burst) cannot make all three
    # tries of one level: one run read AVX2 at 74.6 GFLOP/s, 120-130 at
    # every other time on the same host.
    for _ in range(3):
        for isa in ("avx2", "avx512"):
            try:
                g = probe(iters, isa=isa)
            except TypeError:  # an olc-matmul whose probe knows AVX-512 only
                if isa != "avx512":
                    continue
                g = probe(iters)
            best[isa] = max(best.get(isa, 0.0), float(g))
    return {isa: g for isa, g in best.items() if g > 0}


def copy_bandwidth(threads: int, nbytes: int = COPY_PROBE_BYTES, reps: int = 5) -> float:
    """GB/s (bytes read plus bytes written) of numpy copies of nbytes split
    over `threads` Python threads (numpy releases the GIL while copying),
    best of reps. The workers start once and meet at a barrier before and
    after each copy, so a thread's start is not timed with a small copy."""
    n = nbytes // 4
    src = np.ones(n, np.float32)
    dst = np.empty_like(src)
    parts = [(i * n // threads, (i + 1) * n // threads) for i in range(threads)]
    start, done = threading.Barrier(threads), threading.Barrier(threads)

    def copies(lo: int, hi: int) -> None:
        for _ in range(reps + 1):
            start.wait()
            np.copyto(dst[lo:hi], src[lo:hi])
            done.wait()

    workers = [threading.Thread(target=copies, args=p) for p in parts[1:]]
    for w in workers:
        w.start()
    best = float("inf")
    lo, hi = parts[0]
    for _ in range(reps + 1):  # the first run touches the pages
        start.wait()
        t0 = time.perf_counter()
        np.copyto(dst[lo:hi], src[lo:hi])
        done.wait()
        best = min(best, time.perf_counter() - t0)
    for w in workers:
        w.join()
    return 2 * n * 4 / best * 1e-9


def host_probes(threads: Sequence[int], quick: bool = False) -> dict[str, Any]:
    """The ceilings the efficiencies are measured against."""
    counts = sorted({1, *threads})
    mib = 16 if quick else COPY_PROBE_BYTES >> 20
    return {"fma_peak_gflops": fma_peaks(quick),
            "copy_gbps": {str(t): copy_bandwidth(t, mib << 20, 2 if quick else 5) for t in counts},
            "copy_probe_mib": mib, "copy_gbps_at": {}}


def timed_runner(runner: Runner, min_time_s: float, min_pairs: int = 5, threads: int | None = None) -> dict[str, Any]:
    """The medians and ratio of timed_pairs over both runtimes, with the
    CPUs that others took meanwhile (_interference); at one thread also the
    calling thread's CPU time per run and its ratio (_cpu_stats)."""
    before, start = _machine_cpu_s(), time.perf_counter()
    cpu: dict[str, list[float]] | None = {} if threads == 1 else None
    olc_ns, ort_ns = timed_pairs(runner.run_olc, runner.run_ort, min_time_s, min_pairs=min_pairs, cpu=cpu)
    rec = {**_interference(before, _machine_cpu_s(), time.perf_counter() - start), **_stats(olc_ns, ort_ns)}
    if cpu:
        rec.update(_cpu_stats(cpu["a"], cpu["b"]))
    return rec


def _cpu_stats(olc_cpu: list[float], ort_cpu: list[float]) -> dict[str, Any]:
    m_olc, m_ort = statistics.median(olc_cpu), statistics.median(ort_cpu)
    return {"olc_cpu_ns": olc_cpu, "ort_cpu_ns": ort_cpu, "olc_cpu_median_ns": m_olc, "ort_cpu_median_ns": m_ort,
            "cpu_ratio": m_ort / m_olc if m_olc > 0 else None}


def _stats(olc_ns: list[int], ort_ns: list[int]) -> dict[str, Any]:
    m_olc, m_ort = statistics.median(olc_ns), statistics.median(ort_ns)
    return {"samples": len(olc_ns), "olc_ns": olc_ns, "ort_ns": ort_ns, "olc_median_ns": m_olc,
            "ort_median_ns": m_ort, "ratio": m_ort / m_olc if m_olc else float("nan")}


def run_overhead(threads: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One Abs node and a 100-node chain, both on one element."""
    from onnx import helper

    one = build_model([helper.make_node("Abs", ["x0"], ["y0"], name="abs")], [("x0", "float32", [1])],
                      [("y0", "float32")], {"": DEFAULT_OPSET})
    feeds = make_feeds([{"shape": [1], "dtype": "float32", "generator": "normal"}], args.seed)
    recs = []
    runners = {}
    for name, model, expected in (("one_node", one, "olc_elementwise::Abs"),
                                  (f"chain{CHAIN_LENGTH}", chain_model(CHAIN_LENGTH), "olc_elementwise::Neg")):
        rec: dict[str, Any] = {"suite": "overhead", "name": name, "op": "Abs" if name == "one_node" else "Abs/Neg chain",
                               "domain": "ai.onnx", "opset": DEFAULT_OPSET, "size": 1, "threads": threads,
                               "nodes": len(model.graph.node), "expected_kernel": expected}
        try:
            runner, checker = prepare(model, threads, feeds)
            rec.update(verify(expected, checker, runner, 0.0, 0.0))
        except Exception as exc:
            rec.update(status="error", detail=f"{type(exc).__name__}: {exc}")
        if rec["status"] == "ok":
            runners[name] = runner
            # Overhead cases are cheap; a few times the budget steadies the medians of µs-scale runs.
            rec.update(timed_runner(runner, args.min_time * 2, min_pairs=50))
        recs.append(rec)
    one_rec, chain_rec = recs
    if one_rec["status"] == "ok":
        one_rec["olc_over_ort"] = one_rec["olc_median_ns"] / one_rec["ort_median_ns"]
    if one_rec["status"] == "ok" and chain_rec["status"] == "ok":
        chain_rec["olc_per_node_ns"] = (chain_rec["olc_median_ns"] - one_rec["olc_median_ns"]) / (CHAIN_LENGTH - 1)
        chain_rec["ort_per_node_ns"] = (chain_rec["ort_median_ns"] - one_rec["ort_median_ns"]) / (CHAIN_LENGTH - 1)
    return recs


# ------------------------------------------------------------------- reports


def environment(threads: Sequence[int], host: dict[str, Any] | None = None) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, entry_points, version

    import olc_core

    def ver(dist: str) -> str | None:
        try:
            return version(dist)
        except PackageNotFoundError:
            return None

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    families = {}
    for ep in entry_points(group="olc.kernels"):
        dist = getattr(ep, "dist", None)
        families[ep.name] = {"module": ep.value, "distribution": dist.metadata["Name"] if dist else None,
                             "version": dist.version if dist else None}
    affinity: int | None
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        affinity = os.cpu_count()
    return {
        "cpu": cpu, "cpu_count": os.cpu_count(), "cpu_affinity": affinity, "machine": platform.machine(),
        "os": platform.platform(), "python": platform.python_version(),
        "simd_level": str(olc_core.simd_level()), "olc_simd_env": os.environ.get("OLC_SIMD"),
        "detected_simd_level": str(olc_core.simd.detected_simd_level()),
        "cpu_features": sorted(k for k, v in olc_core.simd.detected_cpu_features().items() if v),
        "cpu_features_in_force": sorted(k for k, v in olc_core.simd.cpu_features().items() if v),
        "host": host or {},
        "versions": {d: ver(d) for d in ("olc-core", "onnxruntime", "onnx", "numpy")},
        "families": families, "threads": list(threads),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _family_gate(suite: str, spec: dict[str, Any], cases: list[dict[str, Any]]) -> dict[str, Any]:
    """One gate a family declared, over its suite's timed cases (of one group)."""
    group = spec.get("group")
    # A folded case has nothing to time on either side: not counted.
    mine = [c for c in cases if c["suite"] == suite and (group is None or c.get("group") == group)
            and c["status"] != "folded"]
    timed = [c for c in mine if c["status"] == "ok"]
    name = spec.get("name") or f"{suite}{'/' + group if group else ''}"
    if not mine:  # --ops, --groups, --sizes or --threads left every case of it out: not judged
        return {**_gate(suite, name, True, "none of its cases ran (--ops, --groups, --sizes or --threads left "
                                           "them out)"),
                "skipped": True}
    if not timed or len(timed) != len(mine):
        return _gate(suite, name, False, f"{len(timed)} of {len(mine)} cases timed")
    ratios = [c["ratio"] for c in timed]
    med, worst = statistics.median(ratios), min(timed, key=lambda c: c["ratio"])
    passed = True
    parts = [f"{len(timed)} cases, median {med:.3f}, min {worst['ratio']:.3f} ({worst['name']}, {worst['threads']}t)"]
    if spec.get("median_at_least") is not None:
        passed &= med >= spec["median_at_least"]
        parts.append(f"median >= {spec['median_at_least']}")
    if spec.get("min_at_least") is not None:
        slow = [c for c in timed if c["ratio"] < spec["min_at_least"]]
        passed &= not slow
        parts.append(f"min >= {spec['min_at_least']}" +
                     (": below: " + ", ".join(f"{c['name']}/{c['threads']}t {c['ratio']:.2f}{at_limit(c)}"
                                               for c in slow[:8]) if slow else ""))
    return _gate(suite, name, passed, "; ".join(parts))


def summarize(cases: list[dict[str, Any]], enforce_suites: set[str],
              family_gates: dict[str, list[dict[str, Any]]] | None = None,
              extras: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    summary: dict[str, Any] = {}
    gates: list[dict[str, Any]] = []
    suites = sorted({c["suite"] for c in cases})
    for suite in suites:
        mine = [c for c in cases if c["suite"] == suite]
        bad = [c for c in mine if c["status"] != "ok"]
        if suite == "overhead":
            s: dict[str, Any] = {"cases": len(mine), "not_run": len(bad)}
            for c in mine:
                t = c["threads"]
                if c["name"] == "one_node" and "olc_over_ort" in c:
                    s[f"one_node_olc_over_ort@{t}"] = c["olc_over_ort"]
                    gates.append(_gate(suite, f"overhead one-node, {t} thread(s): olc <= {OVERHEAD_ONE_NODE_GATE} x ort",
                                       c["olc_over_ort"] <= OVERHEAD_ONE_NODE_GATE,
                                       f"olc {c['olc_median_ns'] / 1e3:.2f} µs, ort {c['ort_median_ns'] / 1e3:.2f} µs, "
                                       f"olc/ort {c['olc_over_ort']:.2f}"))
                if "olc_per_node_ns" in c:
                    s[f"per_node_olc_ns@{t}"] = c["olc_per_node_ns"]
                    s[f"per_node_ort_ns@{t}"] = c["ort_per_node_ns"]
                    gates.append(_gate(suite, f"overhead per node, {t} thread(s): olc <= ort",
                                       c["olc_per_node_ns"] <= c["ort_per_node_ns"],
                                       f"olc {c['olc_per_node_ns']:.0f} ns, ort {c['ort_per_node_ns']:.0f} ns per node"))
            summary[suite] = s
        else:
            ratios = [c["ratio"] for c in mine if c["status"] == "ok"]
            med = statistics.median(ratios) if ratios else None
            ok_cases = [c for c in mine if c["status"] == "ok"]
            worst = min(ok_cases, key=lambda c: c["ratio"]) if ok_cases else None
            summary[suite] = {"cases": len(mine), "timed": len(ratios), "median_ratio": med,
                              "min_ratio": worst["ratio"] if worst else None,
                              "min_case": f"{worst['name']} size {worst['size']} threads {worst['threads']}" if worst else None}
            cpu_cases = [c for c in ok_cases if c.get("cpu_ratio") is not None]
            if cpu_cases:
                low = min(cpu_cases, key=lambda c: c["cpu_ratio"])
                summary[suite].update(cpu_cases=len(cpu_cases),
                                      cpu_median_ratio=statistics.median(c["cpu_ratio"] for c in cpu_cases),
                                      cpu_min_ratio=low["cpu_ratio"], cpu_min_case=f"{low['name']} size {low['size']}")
            if suite == "unary":
                gates.append(_gate(suite, f"unary median ratio >= {UNARY_MEDIAN_GATE}", med is not None and med >= UNARY_MEDIAN_GATE,
                                   f"median {med:.3f}" if med is not None else "no case timed"))
                slow = [c for c in ok_cases if c["ratio"] < UNARY_CASE_GATE]
                gates.append(_gate(suite, f"every unary case ratio >= {UNARY_CASE_GATE}", not slow and bool(ok_cases),
                                   ", ".join(f"{c['name']}/{c['size']}/{c['threads']}t {c['ratio']:.2f}" for c in slow[:10])
                                   or (f"min {worst['ratio']:.3f}" if worst else "no case timed")))
        if bad:
            gates.append(_gate(suite, f"{suite}: every case native and agreeing with onnxruntime", False,
                               "; ".join(f"{c['name']}/{c.get('size')}/{c['threads']}t {c['status']}: {c.get('detail', '')}"
                                         for c in bad[:5]) + (f" (+{len(bad) - 5} more)" if len(bad) > 5 else "")))
        elif mine:
            gates.append(_gate(suite, f"{suite}: every case native and agreeing with onnxruntime", True, f"{len(mine)} cases"))
        for spec in (family_gates or {}).get(suite, []):
            gates.append(_family_gate(suite, spec, cases))
    for x in extras or []:
        if x.get("at_least") is not None:
            gates.append(_gate(x["suite"], f"{x['name']} >= {x['at_least']} {x.get('unit', '')}".rstrip(),
                               x["value"] is not None and x["value"] >= x["at_least"],
                               f"{x['value']:.3g} {x.get('unit', '')} {x.get('detail', '')}".strip()
                               if x["value"] is not None else x.get("detail", "not measured")))
    for g in gates:
        g["enforced"] = g["suite"] in enforce_suites
    return summary, gates


def _gate(suite: str, name: str, passed: bool, detail: str) -> dict[str, Any]:
    return {"suite": suite, "name": name, "passed": bool(passed), "detail": detail}


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e3:.2f}"


def _rate(c: dict[str, Any], key: str, eff: str) -> str:
    """A rate with its efficiency, e.g. "93.1 (83 %)"; "-" when not measured."""
    if c.get(key) is None:
        return "-"
    return f"{c[key]:.1f}" + (f" ({100 * c[eff]:.0f} %)" if c.get(eff) is not None else "")


def markdown(report: dict[str, Any]) -> str:
    env = report["environment"]
    lines = [
        "# olc vs onnxruntime parity",
        "",
        f"CPU {env['cpu']} ({env['cpu_affinity']} usable cores), olc simd level {env['simd_level']}, "
        f"olc-core {env['versions']['olc-core']}, onnxruntime {env['versions']['onnxruntime']}, "
        f"python {env['python']}. Ratio = ort median / olc median (> 1: olc faster).",
        "",
    ]
    if env.get("cpu_features") is not None:
        lines += [f"Host: detected level {env.get('detected_simd_level')}, features "
                  f"{' '.join(env['cpu_features'])}; OLC_SIMD={env.get('olc_simd_env') or '(unset)'}.", ""]
    host = env.get("host") or {}
    if host:
        peaks = ", ".join(f"{k} {v:.1f}" for k, v in sorted((host.get("fma_peak_gflops") or {}).items())) or "not measured"
        copies = ", ".join(f"{t} thread(s) {v:.1f}" for t, v in (host.get("copy_gbps") or {}).items())
        lines += [f"Probes: float32 FMA peak per thread (GFLOP/s): {peaks}; copy bandwidth "
                  f"({host.get('copy_probe_mib')} MiB, GB/s read + write): {copies}. Efficiencies below are olc's "
                  "against the FMA peak of the level that ran times the threads (onnxruntime's against the "
                  "host's best level), and against the copy bandwidth "
                  "of the thread count at the case's footprint (a copy of half its bytes; none below "
                  f"{FOOTPRINT_MIN_BYTES >> 20} MiB).", ""]
    sized = [c for c in report["cases"] if c["suite"] != "overhead"]
    if sized:
        lines += ["| suite | op | size | threads | olc µs | ort µs | ratio | status | level | olc GFLOP/s | ort GFLOP/s "
                  "| olc GB/s |",
                  "|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|---:|"]
        for c in sized:
            ratio = f"{c['ratio']:.2f}" if c.get("ratio") is not None else "-"
            status = c["status"] if c["status"] == "ok" else f"{c['status']}: {c.get('detail', '')}".replace("|", "/")
            lines.append(f"| {c['suite']} | {c['name']} | {c['size']} | {c['threads']} | {_us(c.get('olc_median_ns'))} "
                         f"| {_us(c.get('ort_median_ns'))} | {ratio} | {status} | {c.get('simd_level', '-')} "
                         f"| {_rate(c, 'olc_gflops', 'flops_efficiency')} | {_rate(c, 'ort_gflops', 'ort_flops_efficiency')} "
                         f"| {_rate(c, 'olc_gbps', 'bw_efficiency')} |")
        lines.append("")
    over = [c for c in report["cases"] if c["suite"] == "overhead"]
    if over:
        lines += ["| overhead case | nodes | threads | olc µs/run | ort µs/run | olc/ort | olc ns/node | ort ns/node | status |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for c in over:
            ratio = (f"{c['olc_median_ns'] / c['ort_median_ns']:.2f}" if c.get("ort_median_ns") else "-")
            pn_olc = f"{c['olc_per_node_ns']:.0f}" if "olc_per_node_ns" in c else "-"
            pn_ort = f"{c['ort_per_node_ns']:.0f}" if "ort_per_node_ns" in c else "-"
            status = c["status"] if c["status"] == "ok" else f"{c['status']}: {c.get('detail', '')}".replace("|", "/")
            lines.append(f"| {c['name']} | {c['nodes']} | {c['threads']} | {_us(c.get('olc_median_ns'))} | "
                         f"{_us(c.get('ort_median_ns'))} | {ratio} | {pn_olc} | {pn_ort} | {status} |")
        lines.append("")
    if report.get("extras"):
        lines += ["| suite | figure | value | unit | detail |", "|---|---|---:|---|---|"]
        for x in report["extras"]:
            value = "-" if x["value"] is None else f"{x['value']:.4g}"
            lines.append(f"| {x['suite']} | {x['name']} | {value} | {x.get('unit', '')} | "
                         f"{str(x.get('detail', '')).replace('|', '/')} |")
        lines.append("")
    disturbed = [c for c in report["cases"] if interference(c) > DISTURBED_CPUS]
    if disturbed:
        lines += ["## Disturbed cases", "",
                  f"Other processes or the hypervisor took more than {DISTURBED_CPUS} CPUs on average while these "
                  "were timed; their ratios may say more about that than about either runtime.", ""]
        lines += [f"- {c['suite']} {c['name']} size {c.get('size')} threads {c['threads']}: ratio "
                  f"{c['ratio']:.2f}, other processes {c.get('other_cpus', 0.0):.2f} CPUs, "
                  f"stolen {c.get('steal_cpus', 0.0):.2f}" for c in disturbed]
        lines.append("")
    lines.append("## Summary")
    lines.append("")
    for suite, s in report["summary"].items():
        if suite == "overhead":
            lines.append("- overhead: " + ", ".join(f"{k} {v:.3g}" for k, v in s.items() if isinstance(v, float)))
        else:
            med = "-" if s["median_ratio"] is None else f"{s['median_ratio']:.3f}"
            mn = "-" if s["min_ratio"] is None else f"{s['min_ratio']:.3f} ({s['min_case']})"
            lines.append(f"- {suite}: {s['timed']}/{s['cases']} cases timed, median ratio {med}, min ratio {mn}")
            if s.get("cpu_cases"):
                lines.append(f"  - one thread, thread CPU time ({s['cpu_cases']} cases): median ratio "
                             f"{s['cpu_median_ratio']:.3f}, min {s['cpu_min_ratio']:.3f} ({s['cpu_min_case']})")
    lines.append("")
    lines.append("## Gates")
    lines.append("")
    for g in report["gates"]:
        mark = "SKIP" if g.get("skipped") else "PASS" if g["passed"] else "FAIL"
        lines.append(f"- {mark} {g['name']}: {g['detail']}" + ("" if g["enforced"] else " (not enforced)"))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- main


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", action="append", default=None,
                   help="unary (default), overhead, or a family name providing benchmark_cases(); repeatable")
    p.add_argument("--cases", action="append", default=[], metavar="MODULE[:FUNC]",
                   help="extra cases from a function (default name benchmark_cases); repeatable")
    p.add_argument("--ops", help="only these ops (comma-separated)")
    p.add_argument("--groups", help="only the cases of these groups (comma-separated: a family's case groups, "
                                    "e.g. gemm,conv_layers; the gates of the other groups are skipped)")
    p.add_argument("--sizes", type=_int_list, help=f"element counts (default {','.join(map(str, DEFAULT_SIZES))})")
    p.add_argument("--threads", type=_int_list, help="thread counts (default 1,2)")
    p.add_argument("--min-time", type=float, help="seconds of timed runs per case (default 0.5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", dest="json_path", help="write the report (with raw samples) here")
    p.add_argument("--markdown", dest="md_path", help="write the Markdown table here (it is always printed)")
    p.add_argument("--enforce", action="store_true", help="exit 1 when a gate fails")
    p.add_argument("--quick", action="store_true",
                   help="CI smoke: sizes 4096,65536, 1 thread, 0.02 s per case, gates reported but not enforced")
    p.add_argument("--retime", type=int,
                   help="more tries for a case timed while other processes or the hypervisor took CPU "
                        "(default 1; 0 with --quick)")
    args = p.parse_args(argv)
    args.retime = max(0, args.retime if args.retime is not None else (0 if args.quick else 1))
    args.suite = args.suite or (["unary"] if not args.cases else [])
    args.sizes = args.sizes or (list(QUICK_SIZES) if args.quick else list(DEFAULT_SIZES))
    args.threads = args.threads or ([1] if args.quick else list(DEFAULT_THREADS))
    args.min_time = args.min_time if args.min_time is not None else (0.02 if args.quick else 0.5)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import onnxruntime  # noqa: F401

        import olc_core  # noqa: F401
    except ImportError as exc:
        print(f"benchmark_parity: needs olc-core and onnxruntime installed ({exc})", file=sys.stderr)
        return 2
    ops = {o.strip().lower() for o in args.ops.split(",")} if args.ops else None
    groups = {g.strip() for g in args.groups.split(",")} if args.groups else None

    cases: list[Case] = []
    sources: dict[str, str] = {}
    gate_modules: dict[str, Any] = {}  # suite -> module that may define benchmark_gates / benchmark_extras
    for suite in args.suite:
        if suite == "overhead":
            continue
        if suite in COMPOSITE_SUITES:
            found, source, gate_modules[suite] = composite_cases(suite, args.sizes)
        else:
            found, source = unary_cases(args.sizes) if suite == "unary" else family_cases(suite, args.sizes)
            if suite != "unary":
                gate_modules[suite] = family_module(suite)
        cases += found
        sources[suite] = source
    for spec in args.cases:
        module_name = spec.partition(":")[0]
        found = [case_from_family(c, module_name) for c in _call_case_function(load_case_function(spec), args.sizes)]
        cases += found
        sources[spec] = spec
        gate_modules[module_name] = importlib.import_module(module_name)
    if ops is not None:
        cases = [c for c in cases if c.op.lower() in ops]
    if groups is not None:
        cases = [c for c in cases if c.group in groups]

    # The ceilings of the efficiency figures, measured before any case (with
    # no worker of either runtime around).
    host = host_probes(args.threads, args.quick) if cases else {}
    results: list[dict[str, Any]] = []
    total = len(cases) * len(args.threads)
    n = 0
    for case in cases:
        for t in args.threads:
            n += 1
            rec = run_case_settled(case, t, args, host)
            results.append(rec)
            msg = (f"ratio {rec['ratio']:.2f} (olc {_us(rec['olc_median_ns'])} µs, ort {_us(rec['ort_median_ns'])} µs, "
                   f"{rec['samples']} pairs)" if rec["status"] == "ok" else f"{rec['status']}: {rec.get('detail', '')}")
            print(f"[{n}/{total}] {case.suite} {case.label} size {case.size} threads {t}: {msg}", file=sys.stderr, flush=True)
    if "overhead" in args.suite:
        sources["overhead"] = "built-in"
        for t in args.threads:
            for rec in run_overhead(t, args):
                results.append(rec)
                msg = (f"olc {_us(rec['olc_median_ns'])} µs, ort {_us(rec['ort_median_ns'])} µs per run"
                       if rec["status"] == "ok" else f"{rec['status']}: {rec.get('detail', '')}")
                print(f"overhead {rec['name']} threads {t}: {msg}", file=sys.stderr, flush=True)

    family_gates = {suite: list(m.benchmark_gates()) for suite, m in gate_modules.items()
                    if getattr(m, "benchmark_gates", None) is not None}
    extras: list[dict[str, Any]] = []
    for suite, m in gate_modules.items():
        fn = getattr(m, "benchmark_extras", None)
        # Extras measure for seconds: not in the smoke, nor in a run narrowed to some cases.
        if fn is None or ops is not None or groups is not None or args.quick:
            continue
        for x in fn(list(args.threads)):
            extras.append({"suite": suite, "name": x["name"], "value": x.get("value"), "unit": x.get("unit", ""),
                           "at_least": x.get("at_least"), "detail": x.get("detail", "")})
            print(f"{suite} {x['name']}: {x.get('value')} {x.get('unit', '')} {x.get('detail', '')}", file=sys.stderr, flush=True)

    enforce_suites = set() if not args.enforce else {c["suite"] for c in results} | {x["suite"] for x in extras}
    summary, gates = summarize(results, enforce_suites, family_gates, extras)
    report = {
        "environment": environment(args.threads, host),
        "config": {"suites": args.suite, "case_sources": sources, "sizes": args.sizes, "threads": args.threads,
                   "min_time_s": args.min_time, "seed": args.seed, "quick": args.quick, "enforce": args.enforce,
                   "ops": sorted(ops) if ops else None},
        "cases": results,
        "extras": extras,
        "summary": summary,
        "gates": gates,
    }
    md = markdown(report)
    print(md)
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(report, f, indent=1)
    if args.md_path:
        with open(args.md_path, "w") as f:
            f.write(md)
    failed = [g for g in gates if g["enforced"] and not g["passed"]]
    for g in failed:
        print(f"benchmark_parity: gate failed: {g['name']}: {g['detail']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
