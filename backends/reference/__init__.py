"""The ``reference`` backend: takes every op and runs its regions with the host kernels.

It is the executable spec of a backend: partitioning for it must never change a number, so
tests compare a model partitioned for it with the same model run whole on the host. Other
backends may reuse its compile, e.g. ``compile=get_backend("reference").compile``.
"""

from __future__ import annotations

from collections.abc import Callable

from byoc.analysis import value_name
from byoc.backend import Backend, register_backend
from byoc.ir import Call, Function, IRModule, Tuple
from byoc.runtime import Executable
from byoc.runtime.threads import build_threads


def takes_every_op(call: Call) -> bool:
    return True


def compile_region(func: Function) -> Callable[..., tuple]:
    """A callable running ``func`` on the host: arrays in, a tuple of arrays out."""
    if isinstance(func.body, Tuple) and "output_names" not in func.attrs:
        # The executor unpacks a Tuple body into several results only for named outputs.
        func = func.with_attrs(output_names=[value_name(f) for f in func.body.fields])
    exe = Executable(IRModule({"main": func}), threads=build_threads())

    def run(*arrays):
        return tuple(exe.run_function(func, list(arrays)))

    return run


def register() -> Backend:
    return register_backend("reference", supports=takes_every_op, compile=compile_region)
