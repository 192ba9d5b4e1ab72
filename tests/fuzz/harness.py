"""The fuzzing harness: the backends to partition for, the partial test backends, known bugs,
and the check that a graph computes what onnxruntime does every way it can be partitioned.

Shared by ``test_fuzz_graphs.py`` (random graphs) and ``test_fuzz_regressions.py`` (the shrunk
failures, as explicit models).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import onnx
import onnxruntime
from hypothesis import HealthCheck
from hypothesis import strategies as st

import byoc
from byoc.backend import Backend, find_backend, get_backend, register_backend, unregister_backend
from byoc.compare import compare_outputs, run_onnxruntime
from byoc.errors import ByocError
from tests.fuzz.strategies import FuzzGraph

onnxruntime.set_default_logger_severity(3)  # unused initializers and the like are expected


def _ccompiler() -> Backend | None:
    """The ccompiler backend, if it is there and a C compiler answers."""
    try:
        backend = find_backend("ccompiler")
        from byoc.codegen import build_cache

        build_cache.toolchain()
        return backend
    except ByocError:  # no C compiler on this machine: the fuzzing goes on without it
        return None


CCOMPILER = _ccompiler()
ENGINES = ["reference", "onnxruntime"] + (["ccompiler"] if CCOMPILER else [])
PARTIAL = ["fuzz_ref", "fuzz_ort"] + (["fuzz_c"] if CCOMPILER else [])
COMMON = dict(deadline=None, database=None, derandomize=True, print_blob=False,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])


# Bugs the fuzzing found that are not fixed yet: the backend, a test of the model, the
# regression test that shows it. A graph that hits one does not run on that backend (alone, in
# mixes, or borrowed by a partial backend), so the fuzzing goes on finding new ones.
KNOWN_BUGS: list[tuple[str, Callable[[onnx.ModelProto], bool], str]] = [
    # none open: the last one (ccompiler Slice backwards from before the start) is fixed
]
BORROWS = {"fuzz_ref": "reference", "fuzz_ort": "onnxruntime", "fuzz_c": "ccompiler"}


def avoided(case: FuzzGraph) -> set[str]:
    """The backends (and partial backends) this case must not run on, for known bugs."""
    engines = {engine for engine, hits, _ in KNOWN_BUGS if hits(case.model)}
    return engines | {p for p, engine in BORROWS.items() if engine in engines}


@contextmanager
def partial_backends(subsets: dict[str, frozenset[str]]) -> Iterator[None]:
    """Register the partial test backends, each taking only its subset of ops, for one example.

    Each also asks the backend whose compile it borrows, so it never takes what that one
    cannot run.
    """
    made = []
    try:
        for name, ops in subsets.items():
            engine = get_backend(BORROWS[name])
            drawn = lambda call, ops=ops: call.op in ops or "not drawn"  # noqa: E731
            register_backend(name, supports=[drawn, engine.support], compile=engine.compile,
                             device=engine.device, reject_region=engine.reject_region)
            made.append(name)
        yield
    finally:
        for name in made:
            unregister_backend(name)


@st.composite
def plans(draw, case: FuzzGraph, with_ccompiler: bool) -> tuple[dict, list[list[str]]]:
    """The op subsets of the partial backends, and the backend lists to partition for."""
    ops = sorted(case.ops)
    subsets = {name: frozenset(draw(st.lists(st.sampled_from(ops), unique=True)))
               for name in PARTIAL if with_ccompiler or name != "fuzz_c"}
    engines = [e for e in ENGINES if with_ccompiler or e != "ccompiler"]
    pool = [*subsets, *engines]
    mixes = draw(st.lists(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True),
                          min_size=2, max_size=2))
    return subsets, [[], *([e] for e in engines), *mixes]


def check_case(case: FuzzGraph, subsets: dict[str, frozenset[str]],
               backend_lists: list[list[str]], avoid_known: bool = True) -> None:
    """Run the case every way; fail with every mismatch or crash, and the model.

    ``avoid_known`` leaves out the backends a known bug would fail (the regression tests
    turn it off: they are the bugs)."""
    try:
        want = run_onnxruntime(case.model, case.inputs)
    except Exception as exc:  # noqa: BLE001 - the strategy must only draw what ORT runs
        raise AssertionError(f"onnxruntime refused a drawn model: {exc}\n{case!r}") from None
    if avoid_known:
        skip = avoided(case)
        backend_lists = [b for b in backend_lists if not skip.intersection(b)]
    failures = []
    with partial_backends(subsets):
        for backends in backend_lists:
            try:
                mod = byoc.load_onnx(case.model)
                part = byoc.partition(mod, backends=backends) if backends else mod
                got = byoc.build(part).run(case.inputs)
            except Exception:  # noqa: BLE001 - a crash is what the fuzzing looks for
                failures.append(f"{backends or 'host'}: {traceback.format_exc(limit=-3)}")
                continue
            if list(got) != list(want):
                failures.append(f"{backends or 'host'}: outputs {list(got)}, want {list(want)}")
            failures += [f"{backends or 'host'}: {c}" for c in compare_outputs(got, want)
                         if not c.ok]
    assert not failures, "\n".join([*failures, f"subsets: {subsets}", repr(case)])
