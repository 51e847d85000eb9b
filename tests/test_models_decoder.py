"""A decoder LLM in the form onnxruntime-genai's model builder emits for
Llama / Qwen on CPU (tools/model_builders.py: genai_decoder), through
olc_core.Session with every family installed, against onnxruntime: every
node native (strict mode), logits and present caches for a prompt and the
decode steps after it, and the same tokens from a greedy decode loop.

Two variants of Qwen2.5-0.5B's shapes (hidden 896, 14 query and 2 kv heads
of 64, 4 layers, a 512-token vocabulary): 4-bit MatMulNBits with
accuracy_level 4 (SwiGLU 4864) and float32 MatMul (SwiGLU 1024, to keep the
float weights small).

accuracy_level 4 quantizes each projection's input to int8 per block, in
both runtimes: a difference of one ulp in an input can move one of its int8
values by a step, so the two runtimes' logits differ by about as much as
each differs from the float computation (a few hundredths of their scale).
The int4 outputs are therefore held to that scale, and olc's distance from
the float computation (onnxruntime at accuracy_level 0, the same weights)
to onnxruntime's own; the float32 variant to float32 rounding. For the same
reason two free-running int4 greedy loops part at the first step where the
random model's best two logits are closer than that (step 6 of 32 here):
the float32 variant's two loops must give the same 32 tokens, the int4
loops run in lockstep (see the test)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

import olc_core
from olc_core.testing import simd_levels

ort = pytest.importorskip("onnxruntime")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from model_builders import DecoderConfig, decoder_feeds, genai_decoder  # noqa: E402

CONFIGS = {
    "int4": DecoderConfig(),
    "fp32": DecoderConfig(int4=False, intermediate=1024),
}
PROMPT = 16
GREEDY_TOKENS = 32
NATIVE_OPS = {"GroupQueryAttention": "olc_attention::GroupQueryAttention",
              "SkipSimplifiedLayerNormalization": "olc_contrib_microsoft::SkipSimplifiedLayerNormalization",
              "SimplifiedLayerNormalization": "olc_normalization::SimplifiedLayerNormalization"}


def _ort(data: bytes, threads: int):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def decoder(request):
    config = CONFIGS[request.param]
    model = genai_decoder(config)
    return request.param, config, model.SerializeToString(), [o.name for o in model.graph.output]


def _close(kind: str, name: str, got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, want.shape)
    scale = float(np.abs(want).max())
    if kind == "fp32":
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * max(scale, 1.0), err_msg=name)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=0.03 * scale, err_msg=name)


def test_decoder_graph_is_the_builder_form(decoder):
    _, config, data, _ = decoder
    import onnx

    model = onnx.load_from_string(data)
    ops = [n.op_type for n in model.graph.node]
    projection = "MatMulNBits" if config.int4 else "MatMul"
    assert ops.count("GroupQueryAttention") == config.layers
    assert ops.count("SkipSimplifiedLayerNormalization") == 2 * config.layers
    assert ops.count("SimplifiedLayerNormalization") == 1
    assert ops.count(projection) == 5 * config.layers + 1  # qkv, o, gate, up, down; lm_head
    gqa = next(n for n in model.graph.node if n.op_type == "GroupQueryAttention")
    assert list(gqa.input[1:3]) == ["", ""]  # QKV packed in query
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in gqa.attribute}
    assert (attrs["num_heads"], attrs["kv_num_heads"], attrs["do_rotary"]) == (14, 2, 1)
    if config.int4:
        nbits = next(n for n in model.graph.node if n.op_type == "MatMulNBits")
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in nbits.attribute}
        assert (attrs["bits"], attrs["block_size"], attrs["accuracy_level"]) == (4, 32, 4)
        assert len(nbits.input) == 3  # symmetric: no zero points


@pytest.mark.parametrize("threads", [1, 2])
def test_decoder_prompt_and_decode_steps_match_onnxruntime(decoder, threads):
    kind, config, data, names = decoder
    s = olc_core.Session(data, threads=threads, strict=True, record_usage=True)
    plan = s.kernel_plan()
    for op, kernel in NATIVE_OPS.items():
        assert {e.kernel for e in plan if e.op_type == op} == {kernel}, op
    assert not [e for e in plan if e.kernel.startswith("onnx.reference") and e.op_type != "Constant"]
    o = _ort(data, threads)
    rng = np.random.default_rng(threads)
    # A prompt with an empty past, then three one-token steps, each runtime on
    # the caches it returned; the inputs of every step are the same.
    feeds = decoder_feeds(config, rng.integers(0, config.vocab, (1, PROMPT)))
    ours_past = theirs_past = None
    for step in range(4):
        if step:
            token = rng.integers(0, config.vocab, (1, 1))
            feeds = decoder_feeds(config, token, past=ours_past)
        ours = s.run(None, feeds)
        theirs = o.run(None, feeds if ours_past is None else decoder_feeds(config, feeds["input_ids"],
                                                                          past=theirs_past))
        total = PROMPT + step
        assert ours[0].shape == (1, PROMPT if step == 0 else 1, config.vocab)
        assert ours[1].shape == (1, config.kv_heads, total, config.head_size)
        for name, a, b in zip(names, ours, theirs):
            _close(kind, f"step {step}: {name}", a, b)
        ours_past, theirs_past = ours[1:], theirs[1:]
    usage = s.kernel_usage()
    assert not any(k.startswith("onnx.reference") for k in usage)
    assert set(NATIVE_OPS.values()) <= set(usage)


def test_decoder_decode_after_a_long_past_matches_onnxruntime(decoder):
    # One token after 300 cached positions (random caches), batch 2.
    kind, config, data, names = decoder
    s = olc_core.Session(data, threads=2, strict=True)
    feeds = decoder_feeds(config, np.array([[3], [7]]), past_length=300, seed=5)
    for name, a, b in zip(names, s.run(None, feeds), _ort(data, 2).run(None, feeds)):
        _close(kind, name, a, b)


def test_int4_decoder_is_as_close_to_float_as_onnxruntime():
    # olc's accuracy_level-4 logits are no further from the float computation
    # of the same 4-bit weights (onnxruntime, accuracy_level 0) than
    # onnxruntime's own accuracy_level-4 logits are.
    config = CONFIGS["int4"]
    data = genai_decoder(config).SerializeToString()
    exact = _ort(genai_decoder(dataclasses.replace(config, accuracy_level=0)).SerializeToString(), 2)
    feeds = decoder_feeds(config, np.random.default_rng(11).integers(0, config.vocab, (1, PROMPT)))
    want = exact.run(["logits"], feeds)[0]
    ours = olc_core.Session(data, threads=2, strict=True).run(["logits"], feeds)[0]
    theirs = _ort(data, 2).run(["logits"], feeds)[0]
    ours_err = float(np.abs(ours - want).max())
    theirs_err = float(np.abs(theirs - want).max())
    assert ours_err <= 1.5 * theirs_err + 1e-4 * float(np.abs(want).max()), (ours_err, theirs_err)


def _greedy(run, config: DecoderConfig, prompt: np.ndarray, steps: int) -> list[int]:
    """The tokens of a greedy decode loop: the prompt, then one token a step,
    the presents fed back as the next step's past, the mask grown by one."""
    feeds = decoder_feeds(config, prompt)
    tokens: list[int] = []
    for step in range(steps):
        assert feeds["attention_mask"].shape == (1, prompt.shape[1] + step)
        outs = run(feeds)
        tokens.append(int(outs[0][0, -1].argmax()))
        feeds = decoder_feeds(config, np.array([[tokens[-1]]]), past=outs[1:])
    return tokens


@pytest.mark.parametrize("threads", [1, 2])
def test_decoder_greedy_decode_gives_onnxruntimes_tokens(decoder, threads):
    kind, config, data, _ = decoder
    s = olc_core.Session(data, threads=threads, strict=True)
    o = _ort(data, threads)
    prompt = np.random.default_rng(21).integers(0, config.vocab, (1, PROMPT))
    if kind == "fp32":
        # Two independent loops of 32 tokens give the same tokens.
        ours = _greedy(lambda f: s.run(None, f), config, prompt, GREEDY_TOKENS)
        theirs = _greedy(lambda f: o.run(None, f), config, prompt, GREEDY_TOKENS)
        assert ours == theirs
        assert len(set(theirs)) > 3  # the loop is not stuck on one token
        return
    # accuracy_level 4: the random model's best two logits are often closer
    # than the runtimes' int8 differences (two loops run apart part at the
    # first such step), so the loops run in lockstep, each on its own caches,
    # and olc's choice must be onnxruntime's wherever onnxruntime's margin
    # exceeds twice the largest difference of the two runtimes' logits at that
    # step; on such a tie, both go on with onnxruntime's token.
    ours_feeds = theirs_feeds = decoder_feeds(config, prompt)
    tokens, ties = [], []
    for step in range(GREEDY_TOKENS):
        ours, theirs = s.run(None, ours_feeds), o.run(None, theirs_feeds)
        _close(kind, f"step {step}: logits", ours[0], theirs[0])
        mine, last = ours[0][0, -1], theirs[0][0, -1]
        second, best = np.argsort(last)[-2:]
        if last[best] - last[second] <= 2 * float(np.abs(mine - last).max()):
            ties.append(step)
        else:
            assert int(mine.argmax()) == best, (f"step {step} (tokens so far {tokens}): olc chose "
                                               f"{int(mine.argmax())}, onnxruntime {int(best)}")
        tokens.append(int(best))
        ours_feeds = decoder_feeds(config, np.array([[best]]), past=ours[1:])
        theirs_feeds = decoder_feeds(config, np.array([[best]]), past=theirs[1:])
    assert len(ties) <= GREEDY_TOKENS // 3, f"ties at steps {ties}"
    assert len(set(tokens)) > 3


@pytest.mark.parametrize("level", simd_levels())
def test_decoder_prompt_on_every_simd_level(decoder, level):
    kind, config, data, names = decoder
    feeds = decoder_feeds(config, np.random.default_rng(31).integers(0, config.vocab, (1, 5)), past_length=7)
    with olc_core.simd_cap(level):
        ours = olc_core.Session(data, threads=1, strict=True).run(None, feeds)
    for name, a, b in zip(names, ours, _ort(data, 1).run(None, feeds)):
        _close(kind, f"{level}: {name}", a, b)
