"""Low-priority Python kernels for a few standard ops (Add, Mul, Tanh), so
the control-flow and sequence tests build their subgraphs from ordinary ONNX
ops that onnxruntime and onnx.reference also run, with olc-core alone
installed. Where a family registers the op (olc-elementwise), its kernel
outranks these and the tests run on it instead; either way every node is an
olc kernel and the subject of the test is the runtime around them."""

from __future__ import annotations

import numpy as np

from olc_core import KernelRegistration, hookimpl

FLOATS = ("float32", "float64")
NUMBERS = FLOATS + ("int32", "int64")


def _binary(fn):
    def factory(info):
        return lambda a, b: [fn(a, b)]
    return factory


def _unary(fn):
    def factory(info):
        return lambda a: [fn(a)]
    return factory


class NumpyKernels:
    @hookimpl
    def olc_register_kernels(self):
        def reg(op, factory, types):
            return KernelRegistration("ai.onnx", op, f"olc_core_tests::{op}", {"T": types}, ("T",) * 2,
                                      factory, outputs=("T",), priority=-100, family="olc-core-tests")
        return [reg("Add", _binary(np.add), NUMBERS), reg("Mul", _binary(np.multiply), NUMBERS),
                reg("Tanh", _unary(np.tanh), FLOATS)]
