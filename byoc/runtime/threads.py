"""One thread setting for every engine byoc drives.

    exe = byoc.build(mod, threads=4)      # or BYOC_THREADS=4, or byoc.set_threads(4)
    exe.threads                           # 4

The count a build uses is, first found: ``build(threads=N)``; ``set_threads(N)`` (the CLI's
``--threads``); ``$BYOC_THREADS``; the machine's physical cores (onnxruntime's default too).
It is the intra-op thread count of native and ccompiler kernels (byoc's own pool, see
``backends/ccompiler/pool.py``), of onnxruntime regions and one-node kernels, and the ceiling of
numpy's BLAS in host kernels (``blas_threads``), which runs small products on one thread. The
executor runs one node at a time, so at most that many threads compute at once.

A backend reads the count of the build that compiles it with ``build_threads()``, in its
``compile(function)``: that is how every built-in backend honours the setting.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Iterator

from ..errors import InputError

ENV = "BYOC_THREADS"
# A matrix product below this many multiply-adds runs on one BLAS thread: waking threads costs
# more than they save (a 64 x 64 x 64 product takes ~5 us on one core).
SMALL_PRODUCT = 1 << 18

_default: int | None = None
_building: contextvars.ContextVar[int | None] = contextvars.ContextVar("byoc_build_threads",
                                                                        default=None)


def physical_cores() -> int:
    """Physical cores this process may run on (hyper-threads counted once), as onnxruntime
    counts them; the logical CPU count where the topology cannot be read."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
    cores = set()
    for cpu in cpus:
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            with open(base + "physical_package_id") as f:
                package = f.read().strip()
            with open(base + "core_id") as f:
                cores.add((package, f.read().strip()))
        except OSError:
            return max(1, len(cpus))
    return max(1, len(cores))


def check(threads: object, what: str = "threads") -> int:
    """``threads`` as a positive int, or an InputError saying what is wrong."""
    if isinstance(threads, bool) or not isinstance(threads, int):
        try:
            value = int(str(threads).strip())
        except ValueError:
            raise InputError(f"{what} must be a positive whole number, not {threads!r}") from None
    else:
        value = threads
    if value < 1:
        raise InputError(f"{what} must be at least 1, not {value}")
    return value


def default_threads() -> int:
    """``set_threads``'s count, else ``$BYOC_THREADS``, else the physical cores."""
    if _default is not None:
        return _default
    env = os.environ.get(ENV, "").strip()
    if env:
        return check(env, f"${ENV}")
    return physical_cores()


def set_threads(threads: int | None) -> None:
    """The count builds use when not given one (None: back to ``$BYOC_THREADS`` / cores)."""
    global _default
    _default = None if threads is None else check(threads)


def configured() -> int | None:
    """What ``set_threads`` set (None if nothing)."""
    return _default


def resolve(threads: int | None) -> int:
    """The count a build uses: ``threads`` if given, else ``default_threads()``."""
    return default_threads() if threads is None else check(threads)


@contextlib.contextmanager
def building(threads: int) -> Iterator[int]:
    """While a build compiles its regions: what ``build_threads()`` answers."""
    token = _building.set(threads)
    try:
        yield threads
    finally:
        _building.reset(token)


def build_threads() -> int:
    """The thread count of the build in progress (for a backend's ``compile``), else the
    default."""
    threads = _building.get()
    return default_threads() if threads is None else threads


class _Blas:
    """numpy's BLAS thread count, set through threadpoolctl, changed only when it differs.

    The count the process had is put back after each run that changed it (``restore``), so a
    program that runs byoc and then numpy keeps its own BLAS setting."""

    def __init__(self) -> None:
        self._libs: list | None = None
        self._original: list[int] = []
        self._current: int | None = None

    def _controllers(self) -> list:
        if self._libs is None:
            try:
                from threadpoolctl import ThreadpoolController

                self._libs = ThreadpoolController().select(user_api="blas").lib_controllers
            except Exception:  # no BLAS threadpoolctl knows: nothing to hold
                self._libs = []
            self._original = [lib.num_threads for lib in self._libs]
        return self._libs

    def use(self, threads: int) -> None:
        if threads != self._current:
            for lib in self._controllers():
                lib.set_num_threads(threads)
            self._current = threads

    @property
    def changed(self) -> bool:
        return self._current is not None

    def restore(self) -> None:
        if self._current is not None:
            for lib, n in zip(self._controllers(), self._original):
                lib.set_num_threads(n)
            self._current = None


BLAS = _Blas()


def blas_threads(threads: int, multiply_adds: int) -> None:
    """Hold numpy's BLAS to ``threads`` for a product of ``multiply_adds``, one if it is small."""
    BLAS.use(1 if multiply_adds < SMALL_PRODUCT else threads)


# How long an onnxruntime intra-op thread spins after its work before it sleeps, when byoc
# creates the session (``ort_sessions``). onnxruntime's own default spins on for ~40 ms after a
# run: beside byoc's pool or numpy's BLAS that steals a core from the next region (native
# squeezenet at 2 threads: 2.3-2.8 ms alone, 4.4-7.4 ms right after an onnxruntime run). 200 us
# bridges the gaps between one run's kernels; back-to-back runs of onnxruntime alone measured
# the same as with its default (squeezenet, resnet50, bert_tiny, ppocr_v4_rec; within 2%).
ORT_SPIN_US = 200


def _other_threads() -> tuple[int, bool] | None:
    """The CPU time the process's threads other than this one have used so far, and whether
    any of them is running or waiting for a core (Linux); None where /proc is not there."""
    me = str(threading.get_native_id())
    total, runnable = 0, False
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tids:
        if tid == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
            with open(f"/proc/self/task/{tid}/stat") as f:
                runnable |= f.read().rpartition(")")[2].split()[0] == "R"
        except (OSError, ValueError, IndexError):
            continue  # the thread ended
    return total, runnable


def settle(quiet_s: float = 0.01, max_s: float = 0.5) -> None:
    """Busy-wait until the process's other threads have used no CPU for ``quiet_s`` and none
    is running or waiting for a core (or ``max_s`` passed): before timing something, so that
    an engine whose threads spin on after its run (onnxruntime with its default settings, ~45
    ms) does not hold a core the timed one needs. The kernel adds a spinning thread's time at
    each scheduler tick (4 ms at 250 Hz), so a shorter window can look quiet while a thread
    spins; on a loaded machine a spinning thread can wait that long for a core, using none, so
    its state counts too. Busy, not asleep: a sleeping core comes back slower. A no-op where
    /proc is not there."""
    seen = _other_threads()
    if seen is None:
        return
    start = mark = time.perf_counter()
    while mark - start < max_s:
        while time.perf_counter() - mark < quiet_s:
            pass
        mark = time.perf_counter()
        now = _other_threads()
        if now is None or (now[0] == seen[0] and not now[1]):
            return
        seen = now


# How long warm_up runs: settle() can leave a core idle for as long as onnxruntime's threads
# spin on (60-70 ms), and on this VM a core idle that long ran native's next 2-thread calls
# slower for a few runs (a 256 -> 256 stride-2 conv: 0.83 ms, then 0.52, against 0.38-0.50
# after a short idle). One untimed run had left the rest of that to the timed ones.
WARM_S = 0.005


def warm_up(run, at_least_s: float = WARM_S) -> None:
    """``run()`` untimed, once and then until ``at_least_s`` has passed: after settle(), before
    timing it."""
    start = time.perf_counter()
    run()
    while time.perf_counter() - start < at_least_s:
        run()
