"""byoc's own thread pool against OpenMP (GCC's libgomp) under the same kernels.

    python benchmarks/bench_pool.py [--threads N] [--repeat 15] [--models light_squeezenet,...]

The pool's source (backends/ccompiler/pool.py) also builds over libgomp (-fopenmp
-DBYOC_POOL_OPENMP: ``#pragma omp parallel for`` over the same ranges), so the two differ only
in how threads are woken, wait and join. Printed:

1. dispatch: microseconds per parallel call over 2 x N ranges of a given work each (0, ~1 us,
   ~10 us), and serial, each implementation alternating with the other;
2. models: native regions of real models at N threads, the same build attached to one pool
   then the other, interleaved, each timed run after the other pool's threads went quiet and
   an untimed run (a pool spinning on after its run had slowed the other's): median ms and
   the ratio gomp / byoc;
3. the same models at N threads with onnxruntime busy on its own threads in between (what
   a mixed partition does): how each pool's waiting threads get in the way.

Run it on a quiet machine: on a loaded one a woken thread may wait for a core, whatever pool.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import cffi  # noqa: E402
import numpy as np  # noqa: E402

import byoc  # noqa: E402
from byoc.backends.ccompiler import pool  # noqa: E402
from byoc.backends.ccompiler.runtime import CompiledRegion, Specialization  # noqa: E402
from byoc.compare import onnxruntime_session  # noqa: E402
from byoc.runtime.threads import physical_cores, settle  # noqa: E402
from tests.models.zoo import MODELS, light_models  # noqa: E402


def gomp_pool():
    """The pool's API built over libgomp, loaded."""
    ffi = cffi.FFI()
    ffi.cdef(pool.CDEF)
    ffi.set_source("_byoc_pool_gomp", pool.SOURCE, extra_compile_args=[
        "-O2", "-fopenmp", "-DBYOC_POOL_OPENMP", "-march=native"], extra_link_args=["-fopenmp"])
    folder = tempfile.mkdtemp(prefix="byoc-gomp-")
    path = ffi.compile(tmpdir=folder)
    spec = importlib.util.spec_from_file_location("_byoc_pool_gomp", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dispatch(own, gomp, threads: int, reps: int) -> None:
    print(f"dispatch, {threads} threads, {2 * threads} ranges: us per call (median of 9 "
          f"alternating batches of {reps})")
    print(f"{'work per range':<18}{'serial':>10}{'byoc':>10}{'gomp':>10}")
    for work in (0, 250, 2500):  # ~0, ~1, ~10 us of dependent multiply-adds per range
        rows = {"serial": [], "byoc": [], "gomp": []}
        for _ in range(9):
            for name, mod, t in (("serial", own, 1), ("byoc", own, threads),
                                 ("gomp", gomp, threads)):
                mod.lib.byoc_pool_set_threads(t)
                rows[name].append(mod.lib.byoc_pool_overhead(reps, 2 * threads, work) * 1e6)
        med = {k: statistics.median(v) for k, v in rows.items()}
        print(f"{f'{work} madds':<18}{med['serial']:>10.2f}{med['byoc']:>10.2f}{med['gomp']:>10.2f}")
    own.lib.byoc_pool_set_threads(1)


def _specializations(exe) -> list[Specialization]:
    out = []
    for fn in exe.external.values():
        region = getattr(fn, "run", fn)
        if isinstance(region, CompiledRegion):
            out += [v for v in region._variants.values() if isinstance(v, Specialization)]
    return out


def models(own, gomp, names: list[str], threads: int, repeat: int, with_ort: bool) -> None:
    zoo = {m.name: m for m in (*MODELS, *light_models())}
    title = " with onnxruntime running between calls" if with_ort else ""
    print(f"\nnative at {threads} threads, byoc's pool vs libgomp{title}: median ms")
    print(f"{'model':<22}{'byoc':>10}{'gomp':>10}{'gomp/byoc':>11}")
    for name in names:
        entry = zoo[name]
        proto = entry.load()
        feeds = entry.make_inputs(np.random.default_rng(0))
        exe = byoc.build(byoc.partition(byoc.load_onnx(proto), backends=["native"]),
                         threads=threads)
        exe.run(feeds)
        specs = _specializations(exe)
        session = onnxruntime_session(proto, threads=threads) if with_ort else None
        gomp.lib.byoc_pool_set_threads(threads)  # the main thread's count in the gomp build

        def use(which):
            for s in specs:
                pool.attach(s.module, which)

        times: dict[str, list[float]] = {"byoc": [], "gomp": []}
        for _ in range(repeat):
            for label, which in (("byoc", own), ("gomp", gomp)):
                use(which)
                if session is not None:
                    session.run(None, feeds)
                else:  # the other pool's threads quiet, then this one's awake, as in a run
                    settle()  # of one model after another
                    exe.run(feeds)
                t0 = time.perf_counter()
                exe.run(feeds)
                times[label].append(time.perf_counter() - t0)
        use(own)
        b, g = (statistics.median(times[k]) * 1e3 for k in ("byoc", "gomp"))
        print(f"{name:<22}{b:>10.2f}{g:>10.2f}{g / b:>10.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=max(2, physical_cores()))
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--reps", type=int, default=2000, help="calls per dispatch batch")
    parser.add_argument("--models", default="light_squeezenet,light_resnet50,ppocr_v4_det,"
                                            "bert_tiny")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    own, gomp = pool.module(), gomp_pool()
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs\n")
    dispatch(own, gomp, args.threads, args.reps)
    names = [n for n in args.models.split(",") if n]
    models(own, gomp, names, args.threads, args.repeat, with_ort=False)
    models(own, gomp, names, args.threads, args.repeat, with_ort=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
