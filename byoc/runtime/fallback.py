"""``byoc.build(mod, fallback="host")``: a region its backend cannot build runs on the host.

    exe = byoc.build(part, fallback="host")
    exe.fallbacks        # {region name: why it runs on the host}

    exe = byoc.build(part, fallback="next")
    exe.moves            # {region name: why it runs on another backend}

A backend that cannot build a region when ``build`` compiles it (any exception its ``compile``
raises: a C compile error, no compiler, a cache that cannot be written, a Python backend's own
ValueError) gets the region inlined back into
its caller, as if its ``reject_region`` hook had sent it back: its nodes are host nodes for the
placement, the profile and ``byoc.explain``. A region built lazily per shape (ccompiler with
symbolic dims) can fail at its first call instead; it then runs with the reference compile (the
host kernels) from that call on. Either way a RuntimeWarning names the region and the reason.

``fallback="next"`` tries the other backends the module was partitioned for first
(``mod.attrs["partition_backends"]``, written by ``partition`` and by a plan): a region whose
backend cannot build it, or whose first run fails, goes to the next of them (those after its
own in the list, then those before) that takes every node of it and builds it, else to the
host. A region moved at build time is retargeted in the module (its device planned anew); one
moved at its first run is called through copies to and from the new backend's device.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from ..errors import ByocError
from ..ir import Function

FALLBACKS = (None, "host", "next")


def check_fallback(fallback: str | None) -> None:
    if fallback not in FALLBACKS:
        raise ByocError(f"fallback must be 'host', 'next' or None, not {fallback!r}")


def cannot_build(name: str, backend: str, exc: BaseException | str) -> str:
    """The reason recorded (and warned) for a region that runs on the host."""
    lines = str(exc).strip().splitlines()
    why = f"region {name} runs on the host: {backend} cannot build it: "
    why += lines[0] if lines else type(exc).__name__
    warnings.warn(why, RuntimeWarning, stacklevel=3)  # build()'s caller
    return why


class HostOnFailure:
    """A built region that, if its backend cannot build it for new shapes at a call (a
    ``BuildError``), runs on the host with the reference compile from then on, at the build's
    thread count."""

    def __init__(self, name: str, backend: str, func: Function, run: Callable,
                 fallbacks: dict[str, str], threads: int | None = None):
        self.name, self.backend, self.func, self.run = name, backend, func, run
        self.fallbacks = fallbacks  # the Executable's, so it shows what happened at run time
        self.threads = threads  # the build's: the host kernels run with it
        self.host: Callable | None = None

    def __call__(self, *arrays):
        from ..codegen.build_cache import BuildError

        if self.host is None:
            try:
                return self.run(*arrays)
            except BuildError as exc:  # raised before the region ran: nothing half-done
                self.fallbacks[self.name] = cannot_build(self.name, self.backend, exc)
                self.host = _on_host(self.func, self.threads)
        return self.host(*arrays)

    def __getattr__(self, attr: str):  # what tools read of the built region (its C sources)
        if attr == "run":  # not set yet (a copy being made): no recursion
            raise AttributeError(attr)
        return getattr(self.run, attr)


def _on_host(func: Function, threads: int | None) -> Callable:
    """``func`` compiled for the host (the reference compile) at the build's thread count:
    compiled at a call, outside ``build``, it would otherwise take the default count."""
    from ..backends.reference import compile_region
    from .threads import building, resolve

    with building(resolve(threads)):
        return compile_region(func)


# -- fallback="next": another listed backend before the host --------------------------------------


def next_backends(listed: list[str], current: str) -> list[str]:
    """The backends to try after ``current``: those after it in ``listed``, then those before."""
    if current not in listed:
        return [b for b in listed if b != current]
    k = listed.index(current)
    return listed[k + 1:] + listed[:k]


def takes_all(backend, func: Function) -> bool:
    """True if ``backend`` takes every node of a region (none of another's composites) and
    does not reject the region as a whole."""
    from ..ir import Call, GlobalVar, post_order

    for e in post_order(func.body):
        if isinstance(e, Call):
            if isinstance(e.op, (Function, GlobalVar)) or backend.check(e) is not True:
                return False
    hook = backend.reject_region
    return not (hook is not None and hook(func))


def moved(name: str, old: str, new: str, exc: BaseException, when: str = "build") -> str:
    """The reason recorded (and warned) for a region that moved to another backend."""
    lines = str(exc).strip().splitlines()
    why = (f"region {name} moved from {old} to {new}: {old} cannot {when} it: "
           + (lines[0] if lines else type(exc).__name__))
    warnings.warn(why, RuntimeWarning, stacklevel=3)
    return why


def build_elsewhere(name: str, func: Function, old: str, listed: list[str],
                    exc: BaseException):
    """The first of the next listed backends that takes the region and builds it:
    ``(backend, retargeted function, built callable, why)``, or None (the host, then)."""
    from ..backend import get_backend

    for other in next_backends(listed, old):
        backend = get_backend(other)
        if not takes_all(backend, func):
            continue
        retargeted = func.with_attrs(Compiler=other)
        try:
            built = backend.compile(retargeted)
        except Exception:  # that one cannot either: the next
            continue
        return backend, retargeted, built, moved(name, old, other, exc)
    return None


def _on_device(fn: Callable, outer: str, inner: str) -> Callable:
    """``fn`` (taking and giving values on device ``inner``) called with and giving values on
    device ``outer``: the device plan was made for the backend the region had first."""
    if outer == inner:
        return fn
    from .devices import HOST, get_device

    src, dst = get_device(outer), get_device(inner)

    def there(v):
        host = v if outer == HOST else src.to_host(v)
        return host if inner == HOST else dst.to_device(host)

    def back(v):
        host = v if inner == HOST else dst.to_host(v)
        return host if outer == HOST else src.to_device(host)

    def call(*values):
        out = fn(*[there(v) for v in values])
        return tuple(back(v) for v in (out if isinstance(out, (tuple, list)) else (out,)))

    return call


class NextOnFailure:
    """A built region that, if its first run fails, runs on the next listed backend that takes
    it (else on the host) from then on; ``moves`` (the Executable's) records it."""

    def __init__(self, name: str, backend: str, func: Function, run: Callable, listed: list[str],
                 moves: dict[str, str], fallbacks: dict[str, str], threads: int | None = None):
        self.name, self.backend, self.func, self.run = name, backend, func, run
        self.listed, self.moves, self.fallbacks = listed, moves, fallbacks
        self.threads = threads  # the build's: the backend it moves to compiles with it
        self.settled = False
        self.now = backend  # where it runs: the backend it moved to, or "host"

    def __call__(self, *values):
        if self.settled:
            return self.run(*values)
        try:
            out = self.run(*values)
        except Exception as exc:  # its first run: try the others, then the host
            out = self._elsewhere(exc, values)
        self.settled = True
        return out

    def _elsewhere(self, exc: Exception, values: tuple):
        from ..backend import get_backend
        from .threads import building, resolve

        device = get_backend(self.backend).device
        for other in next_backends(self.listed, self.backend):
            backend = get_backend(other)
            if not takes_all(backend, self.func):
                continue
            try:
                with building(resolve(self.threads)):
                    built = backend.compile(self.func.with_attrs(Compiler=other))
                run = _on_device(built, device, backend.device)
                out = run(*values)
            except Exception:
                continue
            self.run, self.now = run, other
            self.moves[self.name] = moved(self.name, self.backend, other, exc, "run")
            return out
        run = _on_device(_on_host(self.func, self.threads), device, "cpu")
        out = run(*values)  # the host failing too: that error is the one to see
        self.run, self.now = run, "host"
        self.fallbacks[self.name] = cannot_build(self.name, self.backend, exc)
        return out

    def __getattr__(self, attr: str):
        if attr == "run":
            raise AttributeError(attr)
        return getattr(self.run, attr)
