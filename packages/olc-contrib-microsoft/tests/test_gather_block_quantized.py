"""GatherBlockQuantized: every data format (uint8 with 8, 4 and 2 bits,
uint4, int4), with and without zero points, block sizes 16..256, gather and
quantize axes in every relation, float32 / float16 / bfloat16 output, int32
and int64 indices (negative and out of range included): the optimized kernel
at every SIMD level bit for bit against the naive reference (both compute
float(q - zp) * scale in float32, then round once), the naive against numpy,
both against onnxruntime where its CPU kernel has the case; guard pages and
the errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from cm_testlib import LEVELS, NP_TYPE, make_model, ort_run, run_checked, session, to64

import olc_core
from olc_core.testing import guarded

OP = "GatherBlockQuantized"
OUT_TYPES = ("float32", "float16", "bfloat16")


def quantized(rng, fmt, shape, bits, qa, bs):
    """data, scales, zero points (logical shape `shape`) and their numpy
    dequantized table (float64 of the float32 products)."""
    r = len(shape)
    qa %= r
    comp = 8 // bits if fmt == "uint8" else 1
    nb = -(-shape[qa] // bs)
    sshape = list(shape)
    sshape[qa] = nb
    lo, hi = {"uint8": (0, 1 << bits), "uint4": (0, 16), "int4": (-8, 8)}[fmt]
    q = rng.integers(lo, hi, shape)
    zq = rng.integers(lo, hi, sshape)
    if comp > 1:  # pack along the last axis, low bits first
        data = np.zeros(shape[:-1] + (shape[-1] // comp,), np.uint8)
        for c in range(comp):
            data |= (q[..., c::comp] << (bits * c)).astype(np.uint8)
        zshape = list(sshape)
        zshape[-1] = -(-nb // comp)
        zpad = np.zeros(sshape[:-1] + [zshape[-1] * comp], np.int64)
        zpad[..., :nb] = zq
        zp = np.zeros(zshape, np.uint8)
        for c in range(comp):
            zp |= (zpad[..., c::comp] << (bits * c)).astype(np.uint8)
    else:
        data = q.astype(NP_TYPE[fmt])
        zp = zq.astype(NP_TYPE[fmt])
    return q, data, sshape, zq, zp


def expected(q, scales, zq, qa, bs, with_zp, default_zp, idx, ga, out_t):
    rep = np.repeat(np.arange(scales.shape[qa]), bs)[: q.shape[qa]]
    s = np.take(scales.astype(np.float32), rep, axis=qa)
    z = np.take(zq, rep, axis=qa) if with_zp else default_zp
    table = (q - z).astype(np.float32) * s  # float32 products, as the kernels
    G = q.shape[ga]
    ok = (idx >= -G) & (idx < G)
    out = np.take(table, np.where(ok, idx, 0), axis=ga)
    mask = np.expand_dims(ok, tuple(range(ga)) + tuple(range(ga + idx.ndim, ga + idx.ndim + q.ndim - ga - 1)))
    return np.where(mask, out, 0).astype(NP_TYPE[out_t])


def run_case(fmt, bits, shape, ga, qa, bs, with_zp, out_t, idx_t="int64", level=None, idx=None, rng_seed=0,
             compare_ort=False):
    rng = np.random.default_rng(rng_seed)
    q, data, sshape, zq, zp = quantized(rng, fmt, shape, bits, qa, bs)
    scales = rng.uniform(-2, 2, sshape).astype(NP_TYPE[out_t])
    G = shape[ga % len(shape)]
    if idx is None:
        idx = np.array([[0, G - 1, G // 2], [-1, -G, G], [G + 5, -G - 1, 1]], NP_TYPE[idx_t])  # incl. out of range
    inits = {"data": data, "scales": scales}
    ins = [("data", fmt), ("idx", idx_t), ("scales", out_t)]
    if with_zp:
        inits["zp"] = zp
        ins.append(("zp", fmt))
    attrs = {"gather_axis": ga, "quantize_axis": qa, "block_size": bs}
    if fmt == "uint8":
        attrs["bits"] = bits
    m = make_model(OP, ins, ["y"], attrs, initializers=inits)
    default = (1 << (bits - 1)) if fmt == "uint8" else 0
    want = expected(q, scales, zq, qa % len(shape), bs, with_zp, default, idx.astype(np.int64), ga % len(shape), out_t)
    (nai,) = run_checked(m, OP, {"idx": idx}, level or LEVELS[-1], naive=True)
    np.testing.assert_array_equal(to64(nai), to64(want))
    levels = [level] if level else LEVELS
    for lv in levels:
        (opt,) = run_checked(m, OP, {"idx": idx}, lv)
        assert opt.dtype == NP_TYPE[out_t] and opt.shape == want.shape
        np.testing.assert_array_equal(to64(opt), to64(nai))
    if compare_ort:
        (ref,) = ort_run(m, {"idx": idx})
        np.testing.assert_array_equal(to64(nai), to64(ref))
    return m, idx


# (shape, gather_axis, quantize_axis): quantize after, at and before the gather axis
AXES = [((12, 64), 0, 1), ((12, 100), 0, -1), ((3, 10, 48), 1, 2), ((40, 6), 0, 0), ((40, 6), 1, 0),
        ((4, 40, 6), 2, 1), ((5, 4, 40, 6), 1, 2), ((2, 3, 33, 5), 0, 2), ((5, 7, 40), -1, 0)]
FORMATS = [("uint4", 4), ("int4", 4), ("uint8", 8)]


@pytest.mark.parametrize("with_zp", [False, True])
@pytest.mark.parametrize("fmt,bits", FORMATS)
@pytest.mark.parametrize("shape,ga,qa", AXES)
def test_unpacked_formats_every_axis(shape, ga, qa, fmt, bits, with_zp):
    bs = 16 if shape[qa] <= 48 else 32
    run_case(fmt, bits, shape, ga, qa, bs, with_zp, "float32", rng_seed=len(shape) + ga)


PACKED = [((10, 64), 0), ((10, 200), 0), ((3, 10, 96), 1), ((3, 10, 96), 0), ((6, 5, 256), 1)]


@pytest.mark.parametrize("with_zp", [False, True])
@pytest.mark.parametrize("bits", [4, 2])
@pytest.mark.parametrize("shape,ga", PACKED)
def test_packed_uint8(shape, ga, bits, with_zp):
    # packed along the last axis, which is the quantize axis
    run_case("uint8", bits, shape, ga, -1, 16 if shape[-1] < 100 else 64, with_zp, "float32", rng_seed=bits)


@pytest.mark.parametrize("bs", [16, 32, 64, 128, 256])
@pytest.mark.parametrize("fmt,bits", FORMATS + [("uint8", 4), ("uint8", 2)])
def test_block_sizes(fmt, bits, bs):
    # a row ending in a partial block (4095 elements, or the nearest whole
    # number of packed bytes below it), and one of two whole blocks
    per_byte = 8 // bits if fmt == "uint8" else 1
    for width in (4095 - 4095 % per_byte, 2 * bs):
        run_case(fmt, bits, (9, width), 0, 1, bs, True, "float32", rng_seed=bs)


@pytest.mark.parametrize("out_t", OUT_TYPES)
@pytest.mark.parametrize("idx_t", ["int32", "int64"])
@pytest.mark.parametrize("fmt,bits", FORMATS + [("uint8", 4)])
def test_output_and_index_types(fmt, bits, idx_t, out_t):
    run_case(fmt, bits, (20, 768), 0, 1, 32, True, out_t, idx_t=idx_t, rng_seed=3)
    # packed data quantizes its last axis; the others also one before the gather axis
    run_case(fmt, bits, (20, 7, 48), 1, 2 if fmt == "uint8" and bits < 8 else 0, 16, False, out_t, idx_t=idx_t,
             rng_seed=4)


# Cases onnxruntime's CPU kernel has: float32 / float16 output; uint8 only
# with gather_axis 0 and the last quantize axis.
ORT_CASES = [("uint4", 4, (12, 64), 0, 1, 16), ("int4", 4, (12, 100), 0, 1, 32), ("uint4", 4, (40, 6), 1, 0, 16),
             ("int4", 4, (3, 10, 48), 1, 2, 16), ("uint8", 8, (10, 96), 0, 1, 32), ("uint8", 4, (10, 200), 0, 1, 64),
             ("uint8", 2, (3, 10, 96), 0, 2, 16), ("int4", 4, (5, 4, 40, 6), 1, 2, 32)]


@pytest.mark.parametrize("out_t", ["float32", "float16"])
@pytest.mark.parametrize("with_zp", [False, True])
@pytest.mark.parametrize("fmt,bits,shape,ga,qa,bs", ORT_CASES)
def test_against_onnxruntime(fmt, bits, shape, ga, qa, bs, with_zp, out_t):
    # bit for bit, the implicit zero points (0 for int4 / uint4, 2^(bits-1)
    # for uint8) and the zeros of out-of-range indices included
    run_case(fmt, bits, shape, ga, qa, bs, with_zp, out_t, level=LEVELS[-1], compare_ort=True, rng_seed=9)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("at", ["end", "start"])
@pytest.mark.parametrize("fmt,bits,shape,ga,qa", [("uint4", 4, (7, 53), 0, 1), ("uint8", 4, (7, 50), 0, 1),
                                                  ("uint8", 2, (5, 36), 0, 1), ("int4", 4, (9, 3, 5), 2, 0)])
def test_guard_pages(fmt, bits, shape, ga, qa, at, level):
    # Everything fed, against an inaccessible page; the last row gathered.
    rng = np.random.default_rng(5)
    _q, data, sshape, _zq, zp = quantized(rng, fmt, shape, bits, qa, 16)
    scales = rng.uniform(-2, 2, sshape).astype(np.float16)
    idx = np.array([shape[ga] - 1, 0, -1], np.int64)
    ins = [("data", fmt), ("idx", "int64"), ("scales", "float16"), ("zp", fmt)]
    attrs = {"gather_axis": ga, "quantize_axis": qa, "block_size": 16}
    if fmt == "uint8":
        attrs["bits"] = bits
    m = make_model(OP, ins, ["y"], attrs)
    f = {"data": data, "idx": idx, "scales": scales, "zp": zp}
    (want,) = run_checked(m, OP, f, level, naive=True)
    (got,) = run_checked(m, OP, {k: guarded(v, at=at) for k, v in f.items()}, level)
    np.testing.assert_array_equal(to64(got), to64(want))


@pytest.mark.parametrize("threads", [2, 3])
def test_threads(threads):
    m, idx = run_case("uint8", 4, (300, 1024), 0, 1, 32, True, "float32", level=LEVELS[-1])
    idx = np.arange(-300, 310, dtype=np.int64).reshape(61, 10)
    (one,) = run_checked(m, OP, {"idx": idx}, LEVELS[-1])
    (many,) = run_checked(m, OP, {"idx": idx}, LEVELS[-1], threads=threads)
    np.testing.assert_array_equal(one, many)


def _model(attrs, data_t="uint4", data_shape=(8, 32), scale_shape=(8, 2), zp_shape=None):
    inits = {"data": np.zeros(data_shape, NP_TYPE[data_t]), "scales": np.ones(scale_shape, np.float32)}
    ins = [("data", data_t), ("idx", "int64"), ("scales", "float32")]
    if zp_shape:
        inits["zp"] = np.zeros(zp_shape, NP_TYPE[data_t])
        ins.append(("zp", data_t))
    return make_model(OP, ins, ["y"], attrs, initializers=inits)


@pytest.mark.parametrize("bs", [0, 8, 48, 100, -16])
def test_block_size_not_a_power_of_two(bs):
    with pytest.raises(olc_core.OlcError, match=rf"node 'n0' \(GatherBlockQuantized\): attribute 'block_size' must "
                                               rf"be a power of 2 and at least 16, got {bs}"):
        olc_core.Session(_model({"block_size": bs}), strict=True)


CREATE_ERRORS = [
    ({"bits": 8}, "uint4", r"attribute 'bits' must be 4 for uint4 data, got 8"),
    ({"bits": 3}, "uint8", r"attribute 'bits' must be 2, 4 or 8 for uint8 data, got 3"),
    ({"gather_axis": 2}, "uint4", r"attribute 'gather_axis' 2 is out of range for data of rank 2"),
    ({"quantize_axis": -3}, "uint4", r"attribute 'quantize_axis' -3 is out of range"),
]


@pytest.mark.parametrize("attrs,data_t,pattern", CREATE_ERRORS)
def test_attribute_errors(attrs, data_t, pattern):
    with pytest.raises(olc_core.OlcError, match=r"node 'n0' \(GatherBlockQuantized\): " + pattern):
        olc_core.Session(_model(dict(attrs, block_size=16), data_t, (8, 16), (8, 1)), strict=True)


RUN_ERRORS = [
    ({"block_size": 16}, "uint4", (8, 32), (8, 3), None,
     r"scales has shape \[8, 3\], expected \[8, 2\] \(data \[8, 32\], 16-element blocks along axis 1\)"),
    ({"block_size": 16}, "int4", (8, 32), (8, 2), (8, 1), r"zero_points has shape \[8, 1\], expected \[8, 2\]"),
    ({"block_size": 16, "bits": 4}, "uint8", (8, 16), (8, 2), (8, 2),
     r"zero_points has shape \[8, 2\], expected \[8, 1\] \(the scales' shape, packed along the last axis\)"),
    ({"block_size": 16, "bits": 4, "quantize_axis": 0}, "uint8", (32, 16), (2, 32), None,
     r"uint8 data with bits=4 packs along the last axis: quantize_axis must be the last axis"),
]


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("attrs,data_t,dshape,sshape,zshape,pattern", RUN_ERRORS)
def test_shape_errors_name_the_node(attrs, data_t, dshape, sshape, zshape, pattern, naive):
    s = session(_model(attrs, data_t, dshape, sshape, zshape), LEVELS[-1], naive)
    with pytest.raises(olc_core.OlcError, match=r"node 'n0' \(GatherBlockQuantized\): " + pattern):
        s.run(None, {"idx": np.array([0, 1], np.int64)})


def test_int4_values_are_read_from_the_low_nibble():
    # ml_dtypes keeps int4 sign-extended in its byte; the kernels read the
    # low four bits either way
    data = np.array([[-8, -1, 0, 7] * 4], ml_dtypes.int4)
    m = make_model(OP, [("data", "int4"), ("idx", "int64"), ("scales", "float32")], ["y"], {"block_size": 16},
                   initializers={"data": data, "scales": np.ones((1, 1), np.float32)})
    for naive in (False, True):
        (y,) = run_checked(m, OP, {"idx": np.array([0], np.int64)}, LEVELS[-1], naive=naive)
        np.testing.assert_array_equal(y[0], np.array([-8, -1, 0, 7] * 4, np.float32))
