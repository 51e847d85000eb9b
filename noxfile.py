"""Build, test and lint sessions for the olc monorepo.

    nox -s tests          everything CI runs, in one venv (each wheel built once)
    nox -s demo           olc run on the built-in demo model, compared with onnxruntime
    nox -s core | elementwise | matmul | normalization | tensor | contrib_microsoft | ml | attention | example_plugin
    nox -s conformance
    nox -s bench -- --enforce
    nox -s lint
    nox -s sanitize       core, the families the newest commits changed and one more in turn, built
                          with ASan/UBSan, their tests under it (-- all: every family;
                          -- olc-matmul ...: the families named)
    nox -s tsan           core + elementwise built with ThreadSanitizer, the concurrency tests under it
    nox -s fuzz           a seeded run of tools/fuzz_models.py on every family (-- --long: a long run)

Wheels are built into ``wheelhouse/``: olc-core first (``pip wheel --no-deps``),
then every family and the example plugin, which build-require olc-core and
find it there (``--find-links wheelhouse``). A wheel is built at most once
per nox invocation; ``OLC_REUSE_WHEELS=1`` also reuses wheels a previous
invocation left in ``wheelhouse/`` (fast local iteration; stale if the C++
changed since).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import nox

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: nox itself depends on tomli there
    import tomli as tomllib

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests"]
nox.options.error_on_external_run = True

ROOT = Path(__file__).resolve().parent
WHEELHOUSE = ROOT / "wheelhouse"

# The instrumented builds: OLC_SANITIZE's value for CMake, the runtimes to
# preload (CPython itself is not instrumented), the symbol prefix an
# instrumented module holds, and the wheelhouse subfolder (pip's
# --find-links wheelhouse never looks into subfolders, so a plain build
# cannot pick one up).
SANITIZERS: dict[str, dict[str, object]] = {
    "address": {"cmake": "address", "runtimes": ("libasan.so", "libubsan.so"), "marker": b"__asan_",
                "folder": "sanitize", "label": "ASan + UBSan"},
    "thread": {"cmake": "thread", "runtimes": ("libtsan.so",), "marker": b"__tsan_",
               "folder": "tsan", "label": "TSan"},
}

CORE = "olc-core"
# The conformance suite's expected failures were measured with this onnx.
ONNX_PIN = "onnx>=1.23,<1.24"
# sympy: onnxruntime.transformers' optimizer (the optimized-BERT model test) needs it.
TEST_DEPS = ["pytest>=7", "onnxruntime>=1.17", "psutil", "sympy", ONNX_PIN]

# pytest exit code 5: no tests collected (a package whose tests are not written yet).
PYTEST_OK = [0, 5]

# The families the built-in demo model (olc_core.demo) runs on: its
# elementwise chains and its MatMul. `nox -s demo` builds only these and runs
# the demo with --strict, so a node this list no longer covers fails loudly.
DEMO_FAMILIES = ["olc-elementwise", "olc-matmul"]

_built: dict[tuple[str, str | None], Path] = {}


def _project_dir(dist: str) -> Path:
    for base in (ROOT / "packages", ROOT / "examples"):
        if (base / dist / "pyproject.toml").is_file():
            return base / dist
    raise FileNotFoundError(f"no project {dist!r} under packages/ or examples/")


def _families() -> list[str]:
    """Kernel-family distributions present in the tree (olc-core excluded)."""
    return sorted(
        p.parent.name
        for p in (ROOT / "packages").glob("*/pyproject.toml")
        if p.parent.name != CORE
    )


def _examples() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "examples").glob("*/pyproject.toml"))


def _wheel_glob(dist: str) -> str:
    return dist.replace("-", "_") + "-*.whl"


def _build_env(session: nox.Session) -> dict[str, str]:
    env = {"CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2)}
    # A developer's CMake or prefix settings must not leak into these builds.
    for var in ("CMAKE_ARGS", "CMAKE_PREFIX_PATH", "SKBUILD_CMAKE_DEFINE"):
        env[var] = ""
    return env


def _build_wheel(session: nox.Session, dist: str, *, sanitizer: str | None = None) -> Path:
    """Builds ``dist`` (instrumented with ``sanitizer``, a key of SANITIZERS)
    into the wheelhouse once per nox invocation; returns the wheel."""
    key = (dist, sanitizer)
    if key in _built:
        return _built[key]
    outdir = WHEELHOUSE / str(SANITIZERS[sanitizer]["folder"]) if sanitizer else WHEELHOUSE
    outdir.mkdir(parents=True, exist_ok=True)
    existing = sorted(outdir.glob(_wheel_glob(dist)))
    if existing and os.environ.get("OLC_REUSE_WHEELS") == "1":
        session.log(f"reusing {existing[-1].name} (OLC_REUSE_WHEELS=1)")
        _built[key] = existing[-1]
        return existing[-1]
    if dist != CORE:
        # The family build-requires olc-core for its headers, and imports it to
        # find them: always the plain wheel (an instrumented olc-core cannot
        # be imported by the build without LD_PRELOAD).
        _build_wheel(session, CORE)
    for old in existing:
        old.unlink()

    env = _build_env(session)
    # -q: pip's own output is a silent "Preparing metadata ... still running"
    # for the whole compile; the lines logged here say what is being built
    # and how long it took instead. A failing build still prints its log.
    args = ["python", "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(outdir)]
    if sanitizer:
        # scikit-build-core's hatchling hook does not see PEP 517 config
        # settings (--config-settings=cmake.define...); it does read SKBUILD_*
        # from the environment, which pip passes into the isolated build.
        # Unstripped, so that a sanitizer's report names our functions.
        env["SKBUILD_CMAKE_DEFINE"] = f"OLC_SANITIZE={SANITIZERS[sanitizer]['cmake']}"
        env["SKBUILD_INSTALL_STRIP"] = "false"
    if dist != CORE:
        args += ["--find-links", str(WHEELHOUSE)]
    what = f"{dist}{' (' + str(SANITIZERS[sanitizer]['label']) + ')' if sanitizer else ''}"
    session.log(f"building {what}: compiling its C++ extension ...")
    start = time.monotonic()
    session.run(*args, str(_project_dir(dist)), env=env)
    session.log(f"built {what} in {time.monotonic() - start:.0f} s")

    wheels = sorted(outdir.glob(_wheel_glob(dist)))
    if not wheels:
        session.error(f"building {dist} produced no wheel in {outdir}")
    _built[key] = wheels[-1]
    return wheels[-1]


def _pyproject(dist: str) -> dict:
    with open(_project_dir(dist) / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def _has_test_extra(dist: str) -> bool:
    return "test" in _pyproject(dist).get("project", {}).get("optional-dependencies", {})


def _install(session: nox.Session, dists: list[str], *extra: str, sanitizer: str | None = None,
             test_extras: bool = True) -> None:
    """Builds (once) and installs the given olc wheels, with their ``test``
    extras unless ``test_extras`` is false, plus ``extra`` requirements, in
    one resolve."""
    session.install("--upgrade", "pip")
    wheels = []
    for dist in dists:
        wheel = str(_build_wheel(session, dist, sanitizer=sanitizer))
        wheels.append(f"{wheel}[test]" if test_extras and _has_test_extra(dist) else wheel)
    # The wheels are named by path, so pip cannot take olc-* from anywhere else.
    start = time.monotonic()
    session.install(*wheels, *extra)
    session.log(f"installed {', '.join(dists)} and their dependencies in {time.monotonic() - start:.0f} s")


def _pytest(session: nox.Session, path: str, *args: str, env: dict[str, str] | None = None,
            forward_posargs: bool = True) -> None:
    """Runs one test folder (folders of different packages may hold test
    modules of the same name, which one pytest run cannot import side by side);
    the session's arguments go to pytest unless they meant something else
    to the session (``forward_posargs=False``)."""
    if not (ROOT / path).exists():
        session.log(f"no tests at {path}: skipped")
        return
    # Run from the repository root with no source folder on sys.path (plain
    # `pytest`, not `python -m pytest`): `import olc_*` finds the installed
    # wheels, never a source tree.
    session.run(
        "pytest", "-ra", "-p", "no:cacheprovider", *args, path, *(session.posargs if forward_posargs else ()),
        success_codes=PYTEST_OK, env=env or {},
    )


def _tests_of(dist: str) -> str:
    return str(_project_dir(dist).relative_to(ROOT) / "tests")


@nox.session
def wheels(session: nox.Session) -> None:
    """Build every wheel (olc-core, the families, the examples) into wheelhouse/."""
    session.install("--upgrade", "pip")
    for dist in [CORE, *_families(), *_examples()]:
        session.log(f"built {_build_wheel(session, dist).name}")


@nox.session
def core(session: nox.Session) -> None:
    """olc-core and its tests."""
    _install(session, [CORE], *TEST_DEPS)
    _pytest(session, _tests_of(CORE))


@nox.session
def elementwise(session: nox.Session) -> None:
    """olc-core + olc-elementwise and the elementwise tests (they cover every SIMD level themselves)."""
    _install(session, [CORE, "olc-elementwise"], *TEST_DEPS)
    _pytest(session, _tests_of("olc-elementwise"))


def _family_session(session: nox.Session, dist: str) -> None:
    if not (ROOT / "packages" / dist / "pyproject.toml").is_file():
        session.skip(f"{dist} is not in this tree")
    _install(session, [CORE, dist], *TEST_DEPS)
    _pytest(session, _tests_of(dist))


@nox.session
def matmul(session: nox.Session) -> None:
    """olc-core + olc-matmul and the matmul tests."""
    _family_session(session, "olc-matmul")


@nox.session
def normalization(session: nox.Session) -> None:
    """olc-core + olc-normalization and the normalization tests."""
    _family_session(session, "olc-normalization")


@nox.session
def tensor(session: nox.Session) -> None:
    """olc-core + olc-tensor and the tensor tests."""
    _family_session(session, "olc-tensor")


@nox.session
def contrib_microsoft(session: nox.Session) -> None:
    """olc-core + olc-contrib-microsoft and its tests."""
    _family_session(session, "olc-contrib-microsoft")


@nox.session
def ml(session: nox.Session) -> None:
    """olc-core + olc-ml and its tests."""
    _family_session(session, "olc-ml")


@nox.session
def attention(session: nox.Session) -> None:
    """olc-core + olc-attention and its tests."""
    _family_session(session, "olc-attention")


@nox.session
def example_plugin(session: nox.Session) -> None:
    """The third-party plugin example, built against the olc-core wheel."""
    _install(session, [CORE, "olc-example-plugin"], *TEST_DEPS)
    _pytest(session, _tests_of("olc-example-plugin"))


@nox.session
def conformance(session: nox.Session) -> None:
    """The ONNX backend node suite on olc (core + every family)."""
    _install(session, [CORE, *_families()], *TEST_DEPS)
    _pytest(session, "tests/conformance")


@nox.session
def demo(session: nox.Session) -> None:
    """Run the built-in demo model through olc and compare with onnxruntime
    (builds olc-core and only the families the demo model needs)."""
    _install(session, [CORE, *DEMO_FAMILIES], "onnxruntime>=1.17", test_extras=False)
    session.run("olc", "info")
    session.run("olc", "run", "--compare", "onnxruntime", "--strict", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """tools/benchmark_parity.py against onnxruntime; arguments pass through (e.g. -- --enforce)."""
    _install(session, [CORE, *_families()], "onnxruntime>=1.17", "psutil")
    session.run("python", str(ROOT / "tools" / "benchmark_parity.py"), *(session.posargs or ["--quick"]))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the repository, mypy over packages/*/src and tools/."""
    # mypy needs the packages' dependencies, not the packages (it reads their sources).
    deps = {
        req
        for dist in [CORE, *_families(), *_examples()]
        for req in _pyproject(dist).get("project", {}).get("dependencies", [])
        if not req.startswith("olc-")
    }
    session.install("ruff", "mypy", "pytest", "nox", "onnxruntime", ONNX_PIN, *sorted(deps))
    sources = [str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("packages/*/src"))]
    sources += [str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("examples/*/src"))]
    failed = []
    # Both always run, so one report shows every problem.
    for cmd in (["ruff", "check", "."], ["mypy", "--config-file", "mypy.ini", *sources, "tools"]):
        try:
            session.run(*cmd)
        except nox.command.CommandFailed:
            failed.append(cmd[0])
    if failed:
        session.error(f"lint failed: {', '.join(failed)}")


def _sanitizer_runtime(session: nox.Session, sanitizer: str) -> str:
    libs = []
    for name in SANITIZERS[sanitizer]["runtimes"]:  # type: ignore[attr-defined]
        path = subprocess.run(
            ["g++", f"-print-file-name={name}"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if not os.path.isabs(path):
            session.error(f"g++ does not know {name}: install the sanitizer runtimes")
        libs.append(path)
    return " ".join(libs)


def _extension_module(dist: str) -> str:
    """The compiled module of a distribution: olc_core._native, olc_<family>._ext."""
    package = dist.replace("-", "_")
    return f"{package}._native" if dist == CORE else f"{package}._ext"


def _check_instrumented(session: nox.Session, module: str, sanitizer: str, env: dict[str, str]) -> None:
    """Fails when the sanitize option did not reach CMake (an uninstrumented build proves nothing)."""
    code = (
        "import importlib, pathlib, sys\n"
        f"m = importlib.import_module({module!r})\n"
        "data = pathlib.Path(m.__file__).read_bytes()\n"
        f"sys.exit(0 if {SANITIZERS[sanitizer]['marker']!r} in data else 1)\n"
    )
    session.run("python", "-c", code, env=env)


# What `nox -s sanitize` covers: by default (and in CI) olc-core plus a few
# families (see _default_sanitize_targets); `nox -s sanitize -- all` every family,
# `-- olc-matmul olc-tensor` the families named.


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


# Commits whose changed families the default sanitize run covers: more than
# one, so that a code change followed by a note in a README is still checked.
SANITIZE_COMMITS = 3


def _default_sanitize_targets() -> list[str]:
    """What CI sanitizes: olc-core, the families whose code the newest
    SANITIZE_COMMITS commits changed and one more family in turn (by commit
    count), so that every family is built with the sanitizers every few
    commits while a run stays short."""
    families = _families()
    changed = (_git("diff", "--name-only", f"HEAD~{SANITIZE_COMMITS}", "HEAD")
               or _git("diff", "--name-only", "HEAD~1", "HEAD") or "").splitlines()
    # A change to a family's prose (*.md, docs/) builds and tests nothing
    # new, nor does one to its benchmark cases (benchmarks.py: inputs for
    # tools/benchmark_parity.py; the kernels' code is unchanged, and the
    # tests that read the cases run in the tests session).
    touched = {parts[1] for parts in (p.split("/") for p in changed)
               if len(parts) > 2 and parts[0] == "packages" and parts[1] in families
               and parts[2] != "docs" and not parts[-1].endswith(".md") and parts[-1] != "benchmarks.py"}
    count = _git("rev-list", "--count", "HEAD")
    turn = int(count) if count and count.strip().isdigit() else time.gmtime().tm_yday
    return [CORE, *sorted(touched | {families[turn % len(families)]})]


def _sanitize_targets(session: nox.Session) -> list[str]:
    if not session.posargs:
        return _default_sanitize_targets()
    if session.posargs == ["all"]:
        return [CORE, *_families()]
    unknown = [d for d in session.posargs if d not in _families()]
    if unknown:
        session.error(f"not a family of this tree: {', '.join(unknown)} (families: {', '.join(_families())})")
    return [CORE, *[d for d in session.posargs if d != CORE]]


SANITIZE_FUZZ_COUNT = 3000


@nox.session
def sanitize(session: nox.Session) -> None:
    """olc-core, the families the newest commits changed and one more in turn (or the families
    named after --, or -- all) built with -DOLC_SANITIZE=ON (ASan + UBSan), their tests and a
    short seeded fuzz run under it."""
    targets = _sanitize_targets(session)
    _install(session, targets, *TEST_DEPS, sanitizer="address")
    env = {
        "LD_PRELOAD": _sanitizer_runtime(session, "address"),
        # detect_leaks=0: Python's own allocations are never freed at exit.
        # No detect_stack_use_after_return: its fake stack frames break the
        # 64-byte alignment of AVX-512 locals (aligned moves then fault).
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:strict_init_order=1",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
        "PYTHONMALLOC": "malloc",
        # Tests read this to skip what a sanitizer distorts (resident-memory
        # growth: ASan's quarantine keeps freed blocks), and nothing else.
        "OLC_SANITIZER": "address,undefined",
    }
    for dist in targets:
        _check_instrumented(session, _extension_module(dist), "address", env)
    failed = []
    for path in map(_tests_of, targets):
        try:
            # Without faulthandler, a crash is reported by ASan, with its stack;
            # --capture=sys leaves file descriptor 2 alone, so the report of a
            # sanitizer that ends the process is printed, not swallowed.
            _pytest(session, path, "-p", "no:faulthandler", "--capture=sys", env=env, forward_posargs=False)
        except nox.command.CommandFailed:
            failed.append(path)
    # A short seeded fuzz run on the instrumented build: mutated models reach
    # kernels with shapes no test has, and ASan turns an over-read (which a
    # plain build survives) into a crash the fuzzer keeps. ASan reserves
    # terabytes of shadow, so the worker's address-space limit gives way to
    # ASan's own cap on one allocation (a huge one then fails as MemoryError).
    fuzz_env = {**env, "ASAN_OPTIONS": env["ASAN_OPTIONS"] + ":allocator_may_return_null=1:max_allocation_size_mb=2048"}
    try:
        session.run("python", str(ROOT / "tools" / "fuzz_models.py"), "--seed", "1", "--count", str(SANITIZE_FUZZ_COUNT),
                    "--memory-limit-mb", "0", "--out", str(ROOT / "build" / "fuzz-out-sanitize"), env=fuzz_env)
    except nox.command.CommandFailed:
        failed.append("tools/fuzz_models.py (see build/fuzz-out-sanitize/)")
    if failed:
        session.error(f"failed under the sanitizers: {', '.join(failed)}")


# What `nox -s tsan` runs: the tests that drive the executor from several
# threads (one session from several Python threads, sessions at once, nested
# regions, subgraphs sharing a pool, the shape cache) and the threaded
# kernel tests of the family built with it.
TSAN_TESTS = [
    "packages/olc-core/tests/test_concurrency.py",
    "packages/olc-core/tests/test_session.py",
    "packages/olc-core/tests/test_control_flow.py",
    "packages/olc-core/tests/test_shape_plan.py",
    "packages/olc-elementwise/tests/test_binary.py::test_plan_cache_concurrent_runs",
    "packages/olc-elementwise/tests/test_unary.py::test_threads_identical",
]


@nox.session
def tsan(session: nox.Session) -> None:
    """olc-core and olc-elementwise built with -DOLC_SANITIZE=thread (ThreadSanitizer); the
    concurrency and executor tests under it (a data race halts the run with its report)."""
    targets = [CORE, "olc-elementwise"]
    _install(session, targets, *TEST_DEPS, sanitizer="thread")
    env = {
        "LD_PRELOAD": _sanitizer_runtime(session, "thread"),
        # halt_on_error: the first race fails the run (exit code 66) with its report;
        # tools/tsan.supp: the dynamic-TLS false positive, explained there.
        "TSAN_OPTIONS": f"halt_on_error=1:second_deadlock_stack=1:suppressions={ROOT / 'tools' / 'tsan.supp'}",
        "OLC_SANITIZER": "thread",
        # numpy's OpenBLAS (the reference evaluator's matrix products) is not
        # instrumented: TSan cannot see its pool's synchronization and reports
        # its worker threads' writes as races (seen on a Zen 2 host, where
        # its Haswell kernels run threaded). One BLAS thread keeps the run
        # about olc's own threads.
        "OPENBLAS_NUM_THREADS": "1",
    }
    for dist in targets:
        _check_instrumented(session, _extension_module(dist), "thread", env)
    session.run("pytest", "-ra", "-p", "no:cacheprovider", "-p", "no:faulthandler", "--capture=sys",
                *TSAN_TESTS, *session.posargs, env=env)


@nox.session
def fuzz(session: nox.Session) -> None:
    """tools/fuzz_models.py over every family: mutated models in a worker process, crashes and hangs
    saved under build/fuzz-out/. Arguments pass through (-- --long; -- --seed 7 --count 20000)."""
    _install(session, [CORE, *_families()], test_extras=False)
    args = session.posargs or ["--seed", "1", "--count", "3000"]
    session.run("python", str(ROOT / "tools" / "fuzz_models.py"), "--out", str(ROOT / "build" / "fuzz-out"), *args)


@nox.session
def tests(session: nox.Session) -> None:
    """Everything CI runs, in one venv: every package's tests, the example plugin,
    the conformance suite, the end-to-end tests, the demo and a benchmark smoke.
    Every step runs even when an earlier one fails; the failures are listed at the end."""
    dists = [CORE, *_families(), *_examples()]
    _install(session, dists, *TEST_DEPS)
    steps: list[tuple[str, list[str]]] = [
        (f"{dist} tests", ["pytest", _tests_of(dist)]) for dist in dists
    ]
    steps.append(("conformance and end-to-end tests", ["pytest", "tests"]))
    steps.append(("the demo", ["olc", "run", "--compare", "onnxruntime", "--repeat", "3", "--strict"]))
    bench_tool = ROOT / "tools" / "benchmark_parity.py"
    if bench_tool.is_file():
        steps.append(("the benchmark smoke", ["python", str(bench_tool), "--quick"]))

    failed, timings = [], []
    for label, cmd in steps:
        start = time.monotonic()
        try:
            if cmd[0] == "pytest":
                _pytest(session, cmd[1])
            else:
                session.run(*cmd)
        except nox.command.CommandFailed:
            failed.append(label)
        timings.append(f"{label}: {'FAILED' if label in failed else 'ok'} in {time.monotonic() - start:.0f} s")
    for line in timings:
        session.log(line)
    if failed:
        session.error(f"{len(failed)} of {len(steps)} steps failed: {', '.join(failed)}")
