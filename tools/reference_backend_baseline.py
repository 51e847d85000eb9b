#!/usr/bin/env python3
"""Runs the ONNX backend node suite through ``onnx.reference.ReferenceEvaluator``.

The olc conformance test falls back to ``onnx.reference`` for every node no
kernel covers, so the reference evaluator's own failures on this machine are
the floor of what olc can pass. This script measures that floor and prints
the failing case names, which the conformance test lists as expected
failures (tests/conformance/test_onnx_backend.py, REFERENCE_FAILURES).

    python tools/reference_backend_baseline.py            # summary + failures
    python tools/reference_backend_baseline.py --json out.json
    python tools/reference_backend_baseline.py -k "^test_cast"
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import traceback
import warnings
from typing import Any

import numpy as np
import onnx
from onnx.backend.test.loader import load_model_tests
from onnx.backend.test.runner import Runner
from onnx.reference import ReferenceEvaluator


def _normalize(value: Any) -> Any:
    # The node cases store some inputs/outputs as protos (sequences, optionals).
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, onnx.SequenceProto):
        return onnx.numpy_helper.to_list(value)
    if isinstance(value, onnx.OptionalProto):
        return onnx.numpy_helper.to_optional(value)
    if isinstance(value, onnx.MapProto):
        return onnx.numpy_helper.to_dict(value)
    return value


def run_case(case: Any) -> None:
    """Raises on failure, with the same comparison the backend runner uses."""
    model = case.model
    sess = ReferenceEvaluator(model)
    init_names = {i.name for i in model.graph.initializer}
    input_names = [i.name for i in model.graph.input if i.name not in init_names]
    for inputs, ref_outputs in case.data_sets:
        feeds = {name: _normalize(v) for name, v in zip(input_names, inputs)}
        outputs = list(sess.run(None, feeds))
        Runner.assert_similar_outputs(
            ref_outputs=[_normalize(o) for o in ref_outputs],
            outputs=outputs,
            rtol=case.rtol,
            atol=case.atol,
            model_dir=case.name,
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", "--pattern", default=None, help="regex on case names")
    ap.add_argument("--json", default=None, help="write results to this file")
    ap.add_argument("-v", "--verbose", action="store_true", help="print tracebacks")
    args = ap.parse_args(argv)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    if args.pattern:
        rx = re.compile(args.pattern)
        cases = [c for c in cases if rx.search(c.name)]

    failures: dict[str, str] = {}
    t0 = time.perf_counter()
    slow: list[tuple[float, str]] = []
    for case in sorted(cases, key=lambda c: c.name):
        t = time.perf_counter()
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                run_case(case)
        except Exception as e:  # noqa: BLE001 - any failure is a result here
            msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            failures[case.name] = msg[:200]
            if args.verbose:
                traceback.print_exc()
        slow.append((time.perf_counter() - t, case.name))
    elapsed = time.perf_counter() - t0

    for name, msg in failures.items():
        print(f"FAIL {name}: {msg}")
    slow.sort(reverse=True)
    print("slowest:", ", ".join(f"{n} {s:.2f}s" for s, n in slow[:5]))
    passed = len(cases) - len(failures)
    print(
        f"onnx {onnx.__version__} reference evaluator: {passed} passed, "
        f"{len(failures)} failed of {len(cases)} node cases in {elapsed:.1f}s"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"onnx": onnx.__version__, "total": len(cases), "passed": passed, "failures": failures},
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
