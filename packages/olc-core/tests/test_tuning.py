"""The tuning registry: declare, override, pending overrides, profiles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid

import pytest

from olc_core import _native, tuning

LIB = "olc_test"


def declare(kernel, name, default, implementation="default", dtype=0):
    """Declares like a kernel would; returns what C++ reads through the handle."""
    return _native._tuning_declare_for_tests(LIB, kernel, implementation, dtype, name, default)


def fresh(prefix="k"):
    # Declarations live for the whole process: give every test its own keys.
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(autouse=True)
def _clean_registry():
    tuning.reset()
    yield
    tuning.reset()


def find(kernel, name):
    matches = [p for p in tuning.list_params() if p.key.kernel == kernel and p.name == name]
    assert len(matches) == 1
    return matches[0]


def test_declare_lists_default():
    k = fresh()
    assert declare(k, "block", 64, implementation="avx512", dtype=1) == 64
    p = find(k, "block")
    assert p.key == tuning.TuningKey(LIB, k, "avx512", "float32")
    assert (p.kind, p.default, p.value, p.overridden) == ("int", 64, 64, False)
    assert tuning.get(LIB, k, "block", implementation="avx512", dtype="float32") == 64
    assert tuning.get(LIB, k, "block", implementation="avx512", dtype=1) == 64


def test_override_reaches_cpp_read_path_and_reset_restores():
    k = fresh()
    declare(k, "threshold", 0.25)
    tuning.set(LIB, k, "threshold", 0.75)
    assert declare(k, "threshold", 0.25) == 0.75
    p = find(k, "threshold")
    assert (p.kind, p.default, p.value, p.overridden) == ("float", 0.25, 0.75, True)
    tuning.reset()
    assert declare(k, "threshold", 0.25) == 0.25
    assert not find(k, "threshold").overridden


def test_reset_one_parameter():
    k = fresh()
    declare(k, "a", 1)
    declare(k, "b", 2)
    tuning.set(LIB, k, "a", 10)
    tuning.set(LIB, k, "b", 20)
    tuning.reset(LIB, k, "a")
    assert tuning.get(LIB, k, "a") == 1
    assert tuning.get(LIB, k, "b") == 20
    with pytest.raises(TypeError):
        tuning.reset(LIB, k)


def test_first_declaration_wins():
    k = fresh()
    assert declare(k, "n", 8) == 8
    assert declare(k, "n", 99) == 8  # same handle, first default kept
    # Another kind: still the same record, read through the other accessor.
    assert declare(k, "n", 3.5) == 8.0
    p = find(k, "n")
    assert (p.kind, p.default) == ("int", 8)


def test_keys_are_distinct_per_implementation_and_dtype():
    k = fresh()
    declare(k, "tile", 16, implementation="avx2", dtype=1)
    declare(k, "tile", 32, implementation="avx512", dtype=1)
    declare(k, "tile", 48, implementation="avx512", dtype=16)
    tuning.set(LIB, k, "tile", 64, implementation="avx512", dtype="bfloat16")
    assert declare(k, "tile", 0, implementation="avx2", dtype=1) == 16
    assert declare(k, "tile", 0, implementation="avx512", dtype=1) == 32
    assert declare(k, "tile", 0, implementation="avx512", dtype=16) == 64


def test_kind_validation_when_declared():
    k = fresh()
    declare(k, "block", 64)
    declare(k, "ratio", 0.5)
    tuning.set(LIB, k, "block", 128.0)  # integral float fits an int param
    assert tuning.get(LIB, k, "block") == 128
    assert isinstance(tuning.get(LIB, k, "block"), int)
    with pytest.raises(TypeError, match="int parameter"):
        tuning.set(LIB, k, "block", 1.5)
    assert tuning.get(LIB, k, "block") == 128
    tuning.set(LIB, k, "ratio", 2)  # int fits a float param
    assert tuning.get(LIB, k, "ratio") == 2.0
    assert isinstance(tuning.get(LIB, k, "ratio"), float)


@pytest.mark.parametrize("bad", [True, "8", None, [1]])
def test_set_rejects_non_numbers(bad):
    with pytest.raises(TypeError):
        tuning.set(LIB, fresh(), "x", bad)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_set_rejects_non_finite(bad):
    with pytest.raises(ValueError):
        tuning.set(LIB, fresh(), "x", bad)


def test_set_rejects_int64_overflow():
    with pytest.raises(ValueError):
        _native.tuning_set(LIB, fresh(), "default", 0, "x", 2**63)


def test_bad_dtype_and_key():
    with pytest.raises(ValueError, match="unknown dtype"):
        tuning.set(LIB, fresh(), "x", 1, dtype="float33")
    with pytest.raises(TypeError):
        tuning.set("", fresh(), "x", 1)


def test_get_unknown_is_key_error():
    with pytest.raises(KeyError):
        tuning.get(LIB, fresh(), "nothing")


def test_pending_override_applied_at_declaration():
    k = fresh()
    tuning.set(LIB, k, "block", 256, dtype="float32")
    assert tuning.get(LIB, k, "block", dtype="float32") == 256
    assert (tuning.TuningKey(LIB, k, "default", "float32"), "block", 256) in tuning.pending()
    assert all(p.key.kernel != k for p in tuning.list_params())
    assert declare(k, "block", 64, dtype=1) == 256
    p = find(k, "block")
    assert (p.default, p.value, p.overridden) == (64, 256, True)
    assert all(key.kernel != k for key, _, _ in tuning.pending())


def test_pending_int_to_float_param():
    k = fresh()
    tuning.set(LIB, k, "ratio", 3)
    assert declare(k, "ratio", 0.5) == 3.0


def test_pending_non_integral_float_for_int_param_is_reported():
    k = fresh()
    tuning.set(LIB, k, "block", 2.5)
    assert declare(k, "block", 64) == 64  # dropped, default kept
    assert not find(k, "block").overridden
    assert any(k in e and "block" in e for e in tuning.errors())


def test_reset_clears_pending():
    k = fresh()
    tuning.set(LIB, k, "block", 256)
    tuning.reset()
    assert declare(k, "block", 64) == 64


def test_concurrent_declare_returns_one_record():
    k = fresh()
    results = []

    def worker(i):
        results.append(declare(k, "n", i))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = find(k, "n").default
    assert results == [first] * 8


def test_profile_round_trip(tmp_path):
    k = fresh()
    declare(k, "block", 64, implementation="avx2", dtype=1)
    declare(k, "ratio", 0.5)
    declare(k, "untouched", 7)
    tuning.set(LIB, k, "block", 128, implementation="avx2", dtype="float32")
    tuning.set(LIB, k, "ratio", 0.125)
    tuning.set(LIB, k, "later", 9, dtype="bfloat16")  # pending
    path = tmp_path / "profile.json"
    tuning.save_profile(path)

    data = json.loads(path.read_text())
    assert data["version"] == 1
    mine = {(e["name"], e["implementation"], e["dtype"]): e["value"] for e in data["params"] if e["kernel"] == k}
    assert mine == {("block", "avx2", "float32"): 128, ("ratio", "default", "any"): 0.125,
                    ("later", "default", "bfloat16"): 9}  # fmt: skip

    tuning.reset()
    assert tuning.get(LIB, k, "block", implementation="avx2", dtype="float32") == 64
    assert tuning.load_profile(path) == len(data["params"])
    assert declare(k, "block", 0, implementation="avx2", dtype=1) == 128
    assert declare(k, "ratio", 0.0) == 0.125
    assert declare(k, "later", 1, dtype=16) == 9
    assert not find(k, "untouched").overridden


def test_save_with_defaults(tmp_path):
    k = fresh()
    declare(k, "block", 64)
    path = tmp_path / "all.json"
    tuning.save_profile(path, include_defaults=True)
    entries = [e for e in json.loads(path.read_text())["params"] if e["kernel"] == k]
    assert entries == [{"library": LIB, "kernel": k, "implementation": "default",
                        "dtype": "any", "name": "block", "value": 64}]  # fmt: skip


def test_profile_optional_fields_default(tmp_path):
    k = fresh()
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"version": 1, "params": [{"library": LIB, "kernel": k, "name": "n", "value": 5}]}))
    tuning.load_profile(path)
    assert declare(k, "n", 1) == 5


BAD_PROFILES = {
    "not json": ("{", "not valid JSON"),
    "list": ("[]", "JSON object"),
    "version": ({"version": 2, "params": []}, "version"),
    "no version": ({"params": []}, "version"),
    "params type": ({"version": 1, "params": {}}, "'params' must be a list"),
    "extra top": ({"version": 1, "params": [], "extra": 1}, "unknown top-level"),
    "entry type": ({"version": 1, "params": [3]}, r"params\[0\]"),
    "missing": ({"version": 1, "params": [{"library": "a", "kernel": "b", "name": "c"}]}, "missing value"),
    "typo": ({"version": 1, "params": [{"library": "a", "kernel": "b", "name": "c", "value": 1, "dtpye": "x"}]},
             "unknown keys"),
    "value": ({"version": 1, "params": [{"library": "a", "kernel": "b", "name": "c", "value": "1"}]},
              "int or a float"),
    "dtype": ({"version": 1, "params": [{"library": "a", "kernel": "b", "name": "c", "value": 1, "dtype": "f"}]},
              "unknown dtype"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_PROFILES))
def test_bad_profile_is_value_error(tmp_path, case):
    content, message = BAD_PROFILES[case]
    path = tmp_path / "bad.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ValueError, match=message):
        tuning.load_profile(path)
    assert tuning.pending() == []


def test_bad_profile_applies_nothing(tmp_path):
    k = fresh()
    declare(k, "block", 64)
    path = tmp_path / "bad.json"
    entries = [
        {"library": LIB, "kernel": k, "name": "block", "value": 128},
        {"library": LIB, "kernel": k, "name": "block", "value": 1.5},
    ]
    path.write_text(json.dumps({"version": 1, "params": entries}))
    with pytest.raises(ValueError, match=r"params\[1\].*int parameter"):
        tuning.load_profile(path)
    assert tuning.get(LIB, k, "block") == 64


def test_missing_profile_file(tmp_path):
    with pytest.raises(ValueError, match="cannot read"):
        tuning.load_profile(tmp_path / "absent.json")


def _run(code, **env):
    full_env = dict(os.environ)
    full_env.pop("OLC_SIMD", None)
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=120)


def test_env_profile_loaded_at_import(tmp_path):
    path = tmp_path / "env.json"
    entry = {"library": LIB, "kernel": "EnvKernel", "name": "block", "value": 512, "dtype": "float32"}
    path.write_text(json.dumps({"version": 1, "params": [entry]}))
    code = (
        "from olc_core import _native, tuning; "
        "print(_native._tuning_declare_for_tests('olc_test', 'EnvKernel', 'default', 1, 'block', 64))"
    )
    proc = _run(code, OLC_TUNING_PROFILE=str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "512"


def test_env_profile_bad_content_is_clear(tmp_path):
    path = tmp_path / "env_bad.json"
    path.write_text('{"version": 1, "params": [{"library": "a"}]}')
    proc = _run("import olc_core.tuning", OLC_TUNING_PROFILE=str(path))
    assert proc.returncode != 0
    assert "ValueError" in proc.stderr
    assert "OLC_TUNING_PROFILE" in proc.stderr
    assert "missing" in proc.stderr


def test_param_exposes_key_fields():
    k = fresh()
    declare(k, "block", 64, implementation="avx2", dtype=11)
    p = find(k, "block")
    assert (p.library, p.kernel, p.implementation, p.dtype) == (LIB, k, "avx2", "float64")
