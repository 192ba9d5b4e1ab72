"""``byoc.build(mod, fallback="host")``: a region its backend cannot build runs on the host.

    exe = byoc.build(part, fallback="host")
    exe.fallbacks        # {region name: why it runs on the host}

A backend that refuses to build a region when ``build`` compiles it (a ``ByocError``: a C
compile error, no compiler, a cache that cannot be written) gets the region inlined back into
its caller, as if its ``reject_region`` hook had sent it back: its nodes are host nodes for the
placement, the profile and ``byoc.explain``. A region built lazily per shape (ccompiler with
symbolic dims) can fail at its first call instead; it then runs with the reference compile (the
host kernels) from that call on. Either way a RuntimeWarning names the region and the reason.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from ..errors import ByocError
from ..ir import Function

FALLBACKS = (None, "host")


def check_fallback(fallback: str | None) -> None:
    if fallback not in FALLBACKS:
        raise ByocError(f"fallback must be 'host' or None, not {fallback!r}")


def cannot_build(name: str, backend: str, exc: BaseException) -> str:
    """The reason recorded (and warned) for a region that runs on the host."""
    lines = str(exc).strip().splitlines()
    why = f"region {name} runs on the host: {backend} cannot build it: "
    why += lines[0] if lines else type(exc).__name__
    warnings.warn(why, RuntimeWarning, stacklevel=3)  # build()'s caller
    return why


class HostOnFailure:
    """A built region that, if its backend cannot build it for new shapes at a call (a
    ``BuildError``), runs on the host with the reference compile from then on."""

    def __init__(self, name: str, backend: str, func: Function, run: Callable,
                 fallbacks: dict[str, str]):
        self.name, self.backend, self.func, self.run = name, backend, func, run
        self.fallbacks = fallbacks  # the Executable's, so it shows what happened at run time
        self.host: Callable | None = None

    def __call__(self, *arrays):
        from ..codegen.build_cache import BuildError

        if self.host is None:
            try:
                return self.run(*arrays)
            except BuildError as exc:  # raised before the region ran: nothing half-done
                from ..backends.reference import compile_region

                self.fallbacks[self.name] = cannot_build(self.name, self.backend, exc)
                self.host = compile_region(self.func)
        return self.host(*arrays)

    def __getattr__(self, attr: str):  # what tools read of the built region (its C sources)
        if attr == "run":  # not set yet (a copy being made): no recursion
            raise AttributeError(attr)
        return getattr(self.run, attr)
