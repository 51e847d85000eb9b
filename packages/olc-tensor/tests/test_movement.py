"""Differential tests of the data movers against onnx.reference: every
element type (the kernels dispatch on element size 1/2/4/8, BOOL included),
ranks 0 to 6, negative axes and indices, empty tensors, rows of length 1,
7, 8, 9, 4095, 4096 and 4097, one and two threads, legacy and current
opset forms. Outputs are compared byte for byte."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import ALL_TYPES, LEVELS, assert_same, make_model, olc_run, random_array, ref_run  # noqa: E402

ROW_LENGTHS = (1, 7, 8, 9, 4095, 4096, 4097)
THREADS = (1, 2)


LEVEL = "avx512"  # changed by test_random_rank's level parameter


def check(model, feeds, kernel, threads=1):
    got = olc_run(model, feeds, level=LEVEL, threads=threads, expect_kernel=kernel)
    want = ref_run(model, feeds)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(g, w, f"output {i}")
    return got


# ------------------------------------------------------------------ Transpose

TRANSPOSE_SHAPES = [
    ((), None), ((5,), None), ((3, 4), [1, 0]), ((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [0, 2, 1]),
    ((1, 128, 12, 64), [0, 2, 1, 3]), ((32, 2048), [1, 0]), ((2, 3, 1, 5, 4), [4, 2, 0, 3, 1]),
    ((2, 1, 3, 2, 2, 3), [5, 4, 3, 2, 1, 0]), ((2, 0, 3), [2, 1, 0]), ((17, 33), [1, 0]),
    ((9, 4097), [1, 0]), ((3, 7, 9), None), ((4, 8, 16, 2), [0, 3, 1, 2]),
]


@pytest.mark.parametrize("shape,perm", TRANSPOSE_SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("threads", THREADS)
def test_transpose_shapes(shape, perm, threads):
    rng = np.random.default_rng(1)
    x = random_array(rng, shape, "float32")
    attrs = {} if perm is None else {"perm": perm}
    check(make_model("Transpose", [("x", "float32")], ["y"], 18, attrs), {"x": x}, "olc_tensor::Transpose", threads)


@pytest.mark.parametrize("t", ALL_TYPES)
def test_transpose_types(t):
    rng = np.random.default_rng(2)
    for shape, perm in [((5, 19), [1, 0]), ((3, 4, 5), [1, 2, 0]), ((2, 3, 4, 5), [3, 1, 0, 2])]:
        x = random_array(rng, shape, t)
        opset = 13 if t == "bfloat16" else 1
        check(make_model("Transpose", [("x", t)], ["y"], opset, {"perm": perm}), {"x": x}, "olc_tensor::Transpose")


@pytest.mark.parametrize("t", ["float32", "int64", "uint16"])
@pytest.mark.parametrize("level", LEVELS)
def test_transpose_levels(t, level):
    """4- and 8-byte 2-D tiles have AVX2 register transposes: every edge length."""
    rng = np.random.default_rng(3)
    for rows, cols in [(8, 8), (7, 9), (9, 7), (16, 33), (33, 16), (4, 4), (3, 5), (64, 4097), (1, 9), (31, 31)]:
        x = random_array(rng, (2, rows, cols), t)
        model = make_model("Transpose", [("x", t)], ["y"], 13, {"perm": [0, 2, 1]})
        got = olc_run(model, {"x": x}, level=level, expect_kernel="olc_tensor::Transpose")
        assert_same(got[0], np.ascontiguousarray(np.transpose(x, (0, 2, 1))), f"{rows}x{cols}")


# --------------------------------------------------------------------- Gather

@pytest.mark.parametrize("t", ALL_TYPES)
@pytest.mark.parametrize("itype", ["int32", "int64"])
def test_gather_types(t, itype):
    rng = np.random.default_rng(3)
    x = random_array(rng, (6, 5, 4), t)
    for axis in (0, 1, 2, -1, -3):
        n = x.shape[axis]
        idx = rng.integers(-n, n, size=(2, 3)).astype(itype)
        model = make_model("Gather", [("x", t), ("i", itype)], ["y"], 13, {"axis": axis})
        check(model, {"x": x, "i": idx}, "olc_tensor::Gather")


@pytest.mark.parametrize("row", ROW_LENGTHS)
@pytest.mark.parametrize("threads", THREADS)
def test_gather_rows(row, threads):
    rng = np.random.default_rng(4)
    x = random_array(rng, (50, row), "float32")
    idx = rng.integers(-50, 50, size=(300,)).astype(np.int64)
    check(make_model("Gather", [("x", "float32"), ("i", "int64")], ["y"], 13, {"axis": 0}),
          {"x": x, "i": idx}, "olc_tensor::Gather", threads)


def test_gather_scalar_and_empty_indices():
    rng = np.random.default_rng(5)
    x = random_array(rng, (4, 3), "int16")
    for idx in (np.array(2, np.int64), np.array(-1, np.int32), np.zeros((0,), np.int64), np.zeros((2, 0), np.int64)):
        check(make_model("Gather", [("x", "int16"), ("i", type_of(idx))], ["y"], 13, {"axis": 1}),
              {"x": x, "i": idx}, "olc_tensor::Gather")
    # Empty data with empty indices.
    x0 = np.zeros((0, 3), np.float32)
    check(make_model("Gather", [("x", "float32"), ("i", "int64")], ["y"], 13, {"axis": 1}),
          {"x": x0, "i": np.array([0, 2], np.int64)}, "olc_tensor::Gather")


def test_gather_constant_table():
    rng = np.random.default_rng(6)
    table = rng.standard_normal((1000, 64)).astype(np.float32)
    idx = rng.integers(0, 1000, (2, 17)).astype(np.int64)
    model = make_model("Gather", [("t", "float32"), ("i", "int64")], ["y"], 13, {"axis": 0}, initializers={"t": table})
    check(model, {"i": idx}, "olc_tensor::Gather", threads=2)


def type_of(a):
    return str(a.dtype)


# -------------------------------------------------------------- GatherElements

def gather_elements_oracle(x, idx, axis):
    """numpy oracle (onnx.reference mishandles negative axes here)."""
    axis %= x.ndim
    n = x.shape[axis]
    assert ((idx >= -n) & (idx < n)).all()
    pos = list(np.indices(idx.shape))
    pos[axis] = np.where(idx < 0, idx + n, idx)
    return x[tuple(pos)]


@pytest.mark.parametrize("t", ALL_TYPES)
def test_gather_elements_types(t):
    rng = np.random.default_rng(7)
    x = random_array(rng, (4, 5, 3), t)
    for axis in (0, 1, 2, -1, -3):
        n = x.shape[axis]
        for itype in ("int32", "int64"):
            for shrink in (False, True):  # indices may be smaller than data off the axis
                ishape = list(x.shape)
                ishape[axis] = 6
                if shrink:
                    ishape[(axis + 1) % 3] -= 1
                idx = rng.integers(-n, n, size=ishape).astype(itype)
                model = make_model("GatherElements", [("x", t), ("i", itype)], ["y"], 13, {"axis": axis})
                (got,) = olc_run(model, {"x": x, "i": idx}, expect_kernel="olc_tensor::GatherElements")
                assert_same(got, gather_elements_oracle(x, idx, axis))
    if t == "float32":  # and the reference itself, where it is right (non-negative axis, same shape)
        idx = rng.integers(-4, 4, size=(7, 5, 3)).astype(np.int64)
        check(make_model("GatherElements", [("x", t), ("i", "int64")], ["y"], 13, {"axis": 0}), {"x": x, "i": idx},
              "olc_tensor::GatherElements")


@pytest.mark.parametrize("threads", THREADS)
def test_gather_elements_large(threads):
    rng = np.random.default_rng(8)
    x = random_array(rng, (64, 4097), "float32")
    idx = rng.integers(-64, 64, size=(80, 4097)).astype(np.int64)
    model = make_model("GatherElements", [("x", "float32"), ("i", "int64")], ["y"], 13, {"axis": 0})
    (got,) = olc_run(model, {"x": x, "i": idx}, threads=threads, expect_kernel="olc_tensor::GatherElements")
    assert_same(got, gather_elements_oracle(x, idx, 0))


# --------------------------------------------------------------------- Concat

@pytest.mark.parametrize("t", ALL_TYPES)
def test_concat_types(t):
    rng = np.random.default_rng(9)
    for axis in (0, 1, 2, -1, -2):
        shapes = []
        for k in range(3):
            s = [2, 3, 4]
            s[axis] = k + 1 if k != 1 else 0  # an empty input in the middle
            shapes.append(s)
        xs = {f"x{k}": random_array(rng, s, t) for k, s in enumerate(shapes)}
        model = make_model("Concat", [(n, t) for n in xs], ["y"], 13 if t == "bfloat16" else 4, {"axis": axis})
        check(model, xs, "olc_tensor::Concat")


@pytest.mark.parametrize("row", ROW_LENGTHS)
@pytest.mark.parametrize("threads", THREADS)
def test_concat_rows(row, threads):
    rng = np.random.default_rng(10)
    xs = {f"x{k}": random_array(rng, (1, 40, row + k), "float32") for k in range(3)}
    check(make_model("Concat", [(n, "float32") for n in xs], ["y"], 13, {"axis": -1}), xs, "olc_tensor::Concat", threads)
    xs = {f"x{k}": random_array(rng, (row + k, 3), "uint8") for k in range(2)}
    check(make_model("Concat", [(n, "uint8") for n in xs], ["y"], 13, {"axis": 0}), xs, "olc_tensor::Concat", threads)


def test_concat_large_single_block():
    rng = np.random.default_rng(11)
    xs = {"a": random_array(rng, (300000,), "float32"), "b": random_array(rng, (70001,), "float32")}
    check(make_model("Concat", [(n, "float32") for n in xs], ["y"], 13, {"axis": 0}), xs, "olc_tensor::Concat", 2)


# ---------------------------------------------------------------------- Split

@pytest.mark.parametrize("t", ALL_TYPES)
def test_split_forms(t):
    rng = np.random.default_rng(12)
    x = random_array(rng, (6, 4, 5), t)
    # opset 2 and 11: attribute split or equal parts; 13: split input; 18: num_outputs.
    low = 13 if t == "bfloat16" else 11
    check(make_model("Split", [("x", t)], ["a", "b", "c"], low, {"axis": 0}), {"x": x}, "olc_tensor::Split")
    if t != "bfloat16":
        check(make_model("Split", [("x", t)], ["a", "b"], 2, {"axis": 2, "split": [2, 3]}), {"x": x},
              "olc_tensor::Split")
    check(make_model("Split", [("x", t), ("s", "int64")], ["a", "b", "c"], 13, {"axis": -1}),
          {"x": x, "s": np.array([1, 0, 4], np.int64)}, "olc_tensor::Split")
    check(make_model("Split", [("x", t)], ["a", "b", "c"], 18, {"axis": 2, "num_outputs": 3}), {"x": x},
          "olc_tensor::Split")  # 5 into 3: chunks of 2, 2, 1
    check(make_model("Split", [("x", t)], ["a", "b"], 18, {"axis": 1, "num_outputs": 2}), {"x": x},
          "olc_tensor::Split")


@pytest.mark.parametrize("row", ROW_LENGTHS)
@pytest.mark.parametrize("threads", THREADS)
def test_split_rows(row, threads):
    rng = np.random.default_rng(13)
    x = random_array(rng, (1, 30, 3 * row), "float32")
    check(make_model("Split", [("x", "float32")], ["a", "b", "c"], 18, {"axis": -1, "num_outputs": 3}), {"x": x},
          "olc_tensor::Split", threads)
    x = random_array(rng, (row * 2,), "int64")
    s = np.array([row - 1, row + 1], np.int64)
    check(make_model("Split", [("x", "int64"), ("s", "int64")], ["a", "b"], 13, {"axis": 0}), {"x": x, "s": s},
          "olc_tensor::Split", threads)


# ---------------------------------------------------------------------- Slice

def slice_oracle(x, starts, ends, axes=None, steps=None):
    """The ONNX specification, written out: negative starts/ends count from
    the back, then clamp to [0, d] (step > 0) or [0, d-1] / [-1, d-1]
    (step < 0). onnx.reference clamps like numpy instead, which differs when
    a negative step meets a start below -d (onnxruntime follows the spec)."""
    axes = list(range(len(starts))) if axes is None else [int(a) % x.ndim for a in axes]
    steps = [1] * len(starts) if steps is None else list(steps)
    index = [np.arange(d) for d in x.shape]
    for a, s, e, st in zip(axes, starts, ends, steps):
        d = x.shape[a]
        s, e, st = int(s), int(e), int(st)
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
        index[a] = np.arange(s, e, st, dtype=np.int64)
    return x[np.ix_(*index)] if x.ndim else x


def check_slice(model, feeds, want, threads=1):
    (got,) = olc_run(model, feeds, level=LEVEL, threads=threads, expect_kernel="olc_tensor::Slice")
    assert_same(got, want)

I64_MAX = np.iinfo(np.int64).max
I64_MIN = np.iinfo(np.int64).min

SLICE_CASES = [
    # (shape, starts, ends, axes, steps)
    ((10,), [2], [8], None, None),
    ((10,), [-3], [I64_MAX], [0], [1]),
    ((10,), [I64_MAX], [I64_MIN], [0], [-1]),
    ((10,), [-1], [I64_MIN], [0], [-3]),
    ((10,), [20], [-20], [0], [-2]),
    ((10,), [5], [5], [0], [1]),
    ((10,), [8], [2], [0], [1]),
    ((4, 5, 6), [1, -4], [3, 100], [0, -1], [1, 2]),
    ((4, 5, 6), [0, 4, 5], [4, -100, -8], [0, 1, 2], [2, -2, -1]),
    ((4, 5, 6), [1], [3], [1], None),
    ((2, 3, 4, 5, 6, 7), [1, 1, 1], [-1, -1, -1], [-1, 2, 4], [2, 1, -1]),
    ((3, 4097), [0, 1], [3, 4097], [0, 1], [1, 1]),
    ((3, 4097), [0, 4096], [3, 0], [0, 1], [1, -1]),
    ((0, 5), [0], [3], [1], [1]),
]


@pytest.mark.parametrize("case", SLICE_CASES, ids=lambda c: str(c[0]) + str(c[1]))
@pytest.mark.parametrize("itype", ["int32", "int64"])
@pytest.mark.parametrize("threads", THREADS)
def test_slice(case, itype, threads):
    shape, starts, ends, axes, steps = case
    if itype == "int32":
        clip = lambda v: [int(np.clip(a, -2**31, 2**31 - 1)) for a in v]  # noqa: E731
        starts, ends = clip(starts), clip(ends)
    rng = np.random.default_rng(14)
    x = random_array(rng, shape, "float32")
    feeds = {"x": x, "s": np.array(starts, itype), "e": np.array(ends, itype)}
    names = [("x", "float32"), ("s", itype), ("e", itype)]
    if axes is not None:
        feeds["a"] = np.array(axes, itype)
        names.append(("a", itype))
    if steps is not None:
        if axes is None:
            names.append(("", None))
        feeds["st"] = np.array(steps, itype)
        names.append(("st", itype))
    check_slice(make_model("Slice", names, ["y"], 13, {}), feeds, slice_oracle(x, starts, ends, axes, steps), threads)


# Every other element of the last axis, from column 0 or 1 (YOLOv5's
# space-to-depth Slices): rows long enough for the strided copy's vector
# loop and a tail, for each element size it copies.
@pytest.mark.parametrize("dtype", ["bool", "float16", "float32", "int64"])
@pytest.mark.parametrize("width", [37, 64])
@pytest.mark.parametrize("start", [0, 1])
def test_slice_every_other_column(dtype, width, start):
    x = random_array(np.random.default_rng(15), (2, 3, 5, width), dtype)
    feeds = {"x": x, "s": np.array([start], np.int64), "e": np.array([I64_MAX], np.int64),
             "a": np.array([-1], np.int64), "st": np.array([2], np.int64)}
    names = [("x", dtype), ("s", "int64"), ("e", "int64"), ("a", "int64"), ("st", "int64")]
    check_slice(make_model("Slice", names, ["y"], 13, {}), feeds, x[..., start::2])


@pytest.mark.parametrize("t", ALL_TYPES)
def test_slice_types_and_legacy(t):
    rng = np.random.default_rng(15)
    x = random_array(rng, (5, 6, 7), t)
    feeds = {"x": x, "s": np.array([1, -1], np.int64), "e": np.array([4, 0], np.int64),
             "a": np.array([0, 2], np.int64), "st": np.array([2, -2], np.int64)}
    model = make_model("Slice", [("x", t), ("s", "int64"), ("e", "int64"), ("a", "int64"), ("st", "int64")], ["y"], 13)
    check(model, feeds, "olc_tensor::Slice")  # here the reference agrees with the spec
    check_slice(model, feeds, slice_oracle(x, [1, -1], [4, 0], [0, 2], [2, -2]))
    if t != "bfloat16":
        for attrs in ({"starts": [1, 0], "ends": [4, 100], "axes": [0, -1]}, {"starts": [-2], "ends": [I64_MAX]},
                      {"starts": [0, 2, 1], "ends": [3, 3, -1]}):
            check(make_model("Slice", [("x", t)], ["y"], 1, attrs), {"x": x}, "olc_tensor::Slice")


# --------------------------------------------------------------------- Expand

@pytest.mark.parametrize("t", ALL_TYPES)
def test_expand_types(t):
    rng = np.random.default_rng(16)
    for xshape, shape in [((3, 1), (2, 1, 6)), ((1,), (7,)), ((), (2, 3)), ((4, 1, 5), (4, 3, 1)), ((2, 3), (3,)),
                          ((1, 3), (0, 1)), ((1, 9), (4097, 1))]:
        x = random_array(rng, xshape, t)
        model = make_model("Expand", [("x", t), ("s", "int64")], ["y"], 13 if t == "bfloat16" else 8)
        check(model, {"x": x, "s": np.array(shape, np.int64)}, "olc_tensor::Expand", threads=2)


# ----------------------------------------------------------------------- Tile

@pytest.mark.parametrize("t", ALL_TYPES)
def test_tile_types(t):
    rng = np.random.default_rng(17)
    for xshape, reps in [((3,), (4,)), ((2, 3), (2, 1)), ((2, 1, 3), (1, 5, 2)), ((), ()), ((2, 3), (0, 2)),
                         ((1, 4097), (3, 1))]:
        x = random_array(rng, xshape, t)
        model = make_model("Tile", [("x", t), ("r", "int64")], ["y"], 13 if t == "bfloat16" else 6)
        check(model, {"x": x, "r": np.array(reps, np.int64)}, "olc_tensor::Tile", threads=2)


# --------------------------------------------------------------- random ranks

@pytest.mark.parametrize("rank", range(0, 7))
@pytest.mark.parametrize("level", LEVELS)
def test_random_rank(rank, level, monkeypatch):
    """Random shapes, types, axes and indices at every SIMD level (the data
    movers have one path except the 2-D transpose tile; this shows no level
    changes a result)."""
    monkeypatch.setattr(sys.modules[__name__], "LEVEL", level)
    rng = np.random.default_rng(100 + rank)
    for _ in range(4):
        shape = tuple(int(v) for v in rng.integers(0 if rng.random() < 0.2 else 1, 5, rank))
        t = ALL_TYPES[rng.integers(len(ALL_TYPES))]
        x = random_array(rng, shape, t)
        perm = [int(v) for v in rng.permutation(rank)]
        check(make_model("Transpose", [("x", t)], ["y"], 13, {"perm": perm} if perm else {}), {"x": x},
              "olc_tensor::Transpose")
        if rank == 0:
            continue
        axis = int(rng.integers(-rank, rank))
        check(make_model("Concat", [("a", t), ("b", t)], ["y"], 13, {"axis": axis}), {"a": x, "b": x},
              "olc_tensor::Concat")
        if shape[axis] > 0:
            idx = rng.integers(-shape[axis], shape[axis], 3).astype(np.int64)
            check(make_model("Gather", [("x", t), ("i", "int64")], ["y"], 13, {"axis": axis}), {"x": x, "i": idx},
                  "olc_tensor::Gather")
        starts = rng.integers(-6, 6, rank)
        ends = rng.integers(-6, 6, rank)
        steps = rng.choice([-2, -1, 1, 3], rank)
        axes = rng.permutation(rank) - rank * (rng.random(rank) < 0.5)
        feeds = {"x": x, "s": starts.astype(np.int64), "e": ends.astype(np.int64), "a": axes.astype(np.int64),
                 "st": steps.astype(np.int64)}
        check_slice(make_model("Slice", [("x", t), ("s", "int64"), ("e", "int64"), ("a", "int64"), ("st", "int64")],
                               ["y"], 13), feeds, slice_oracle(x, starts, ends, axes, steps))
        reps = rng.integers(0, 3, rank)
        check(make_model("Tile", [("x", t), ("r", "int64")], ["y"], 13), {"x": x, "r": reps.astype(np.int64)},
              "olc_tensor::Tile")


def test_outputs_do_not_alias_inputs():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for model, feeds in [
        (make_model("Slice", [("x", "float32"), ("s", "int64"), ("e", "int64")], ["y"], 13),
         {"x": x, "s": np.array([0], np.int64), "e": np.array([3], np.int64)}),
        (make_model("Transpose", [("x", "float32")], ["y"], 13, {"perm": [0, 1]}), {"x": x}),
        (make_model("Concat", [("x", "float32")], ["y"], 13, {"axis": 0}), {"x": x}),
    ]:
        (y,) = olc_run(model, feeds)
        assert not np.shares_memory(y, x)
        y[...] = -1
        assert x[0, 0] == 0


