"""The backend registry: what each backend runs, how it compiles a region, where it comes from.

    ref = byoc.register_backend(
        "mine", supports={"Conv", "Relu", dtypes("float32")}, compile=my_compile,
        patterns=[("mine.conv_relu", is_op("Relu")(is_op("Conv")(wildcard(), is_const())))])

``supports`` is a set of op names and predicates ``call -> True | reason``: a call is taken when
its op is one of the names (if any are given) and every predicate says True. ``all_of``,
``any_of`` and ``dtypes`` combine predicates. ``compile(function)`` returns a callable from
arrays to a tuple of arrays. ``prefetch(calls)``, if given, is shown every call of a graph before
they are checked one by one, so a backend whose answer is costly can ask its engine in a batch.

A backend is found by name, the first time it is asked for: registered already; else a built-in
one (a package ``byoc.backends.<name>`` whose ``register()`` registers it); else the entry point
of that name in the group ``byoc.backends``, which is loaded and called.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import pkgutil
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from .errors import ByocError, where
from .ir import Call, Function, TensorType, TupleType, post_order
from .pattern import Pattern

Check = Callable[[Call], Union[bool, str]]
Supports = Union[str, Check, Iterable[Union[str, Check]]]
ENTRY_POINT_GROUP = "byoc.backends"


class BackendError(ByocError):
    """A backend is unknown, badly registered, or failed a check."""

    def __init__(self, message: str, node: str | None = None, op: str | None = None):
        super().__init__(where(node, op) + message)


@dataclass(frozen=True)
class PatternEntry:
    """A composite a backend fuses: its name (the ``Composite`` attr), pattern and check."""

    name: str
    pattern: Pattern
    check: Check | None = None


@dataclass(frozen=True)
class Backend:
    """A registered backend. ``check(call)`` says True or why not."""

    name: str
    support: Check
    compile: Callable[[Function], Callable[..., tuple]]
    patterns: tuple[PatternEntry, ...] = ()
    device: str = "cpu"
    bind_constants: bool = True
    reject_region: Callable[[Function], bool | str | None] | None = None
    prefetch: Callable[[Sequence[Call]], None] | None = None
    control_flow: bool = False  # runs an If, Loop or Scan whole when it takes all its bodies

    def check(self, call: Call) -> bool | str:
        """True if this backend takes ``call``, else the reason it does not."""
        try:
            verdict = self.support(call)
        except Exception as exc:
            raise BackendError(f"backend {self.name!r}: support check raised "
                               f"{type(exc).__name__}: {exc}", _span(call), call.op_name) from exc
        if verdict is True:
            return True
        return verdict if isinstance(verdict, str) and verdict else "not supported"

    def prepare(self, calls: Sequence[Call]) -> None:
        """Show the backend every call it may be asked about (its ``prefetch`` hook)."""
        if self.prefetch is None:
            return
        try:
            self.prefetch(calls)
        except Exception as exc:
            raise BackendError(f"backend {self.name!r}: prefetch raised {type(exc).__name__}: "
                               f"{exc}") from exc


# -- predicates ---------------------------------------------------------------------------------


def _as_check(spec: Supports) -> Check:
    """One predicate from op names and predicates: the op is among the names, and all agree."""
    if isinstance(spec, str) or callable(spec):
        spec = [spec]
    names: set[str] = set()
    checks: list[Check] = []
    for item in spec:
        if isinstance(item, str):
            names.add(item)
        elif callable(item):
            checks.append(item)
        else:
            raise BackendError(f"supports takes op names and predicates, not {item!r}")
    if names or not checks:  # an empty set takes no op by name (only the backend's composites)
        checks.insert(0, _ops(frozenset(names)))
    return checks[0] if len(checks) == 1 else all_of(*checks)


def _ops(names: frozenset[str]) -> Check:
    def op_is_supported(call: Call) -> bool | str:
        return call.op in names or f"op {call.op_name} is not supported"

    return op_is_supported


def all_of(*specs: Supports) -> Check:
    """Every predicate must say True; the answer is the first refusal."""
    checks = [_as_check(s) for s in specs]

    def all_agree(call: Call) -> bool | str:
        for check in checks:
            verdict = check(call)
            if verdict is not True:
                return verdict or f"refused by {getattr(check, '__name__', 'a predicate')}"
        return True

    return all_agree


def any_of(*specs: Supports) -> Check:
    """Some predicate must say True; otherwise every refusal, joined."""
    checks = [_as_check(s) for s in specs]

    def one_agrees(call: Call) -> bool | str:
        reasons = []
        for check in checks:
            verdict = check(call)
            if verdict is True:
                return True
            reasons.append(verdict or f"refused by {getattr(check, '__name__', 'a predicate')}")
        return " and ".join(reasons)

    return one_agrees


def dtypes(*allowed: str) -> Check:
    """Every tensor the call reads and writes has one of the ``allowed`` dtypes."""
    allowed_set = frozenset(allowed)
    shown = "/".join(allowed)

    def dtypes_are_allowed(call: Call) -> bool | str:
        for k, a in enumerate(call.args):
            t = getattr(a, "type", None)
            if isinstance(t, TensorType) and t.dtype not in allowed_set:
                return f"input {k} is {t.dtype}, not {shown}"
        outs = call.type.fields if isinstance(call.type, TupleType) else (call.type,)
        for k, t in enumerate(outs):
            if isinstance(t, TensorType) and t.dtype not in allowed_set:
                return f"output {k} is {t.dtype}, not {shown}"
        return True

    return dtypes_are_allowed


def fewer_than(n: int, ignore: Iterable[str] = ("Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                                "Transpose", "Identity", "Cast")):
    """A ``reject_region`` hook: send back regions with fewer than ``n`` compute ops."""
    ignored = frozenset(ignore)

    def reject(func: Function) -> str | None:
        count = 0
        for e in post_order(func.body):
            if isinstance(e, Call):
                body = e.op.body if isinstance(e.op, Function) else None
                count += (sum(1 for b in post_order(body) if isinstance(b, Call)) if body
                          else e.op not in ignored)
        return f"only {count} compute op(s), fewer than {n}" if count < n else None

    return reject


# -- the registry -------------------------------------------------------------------------------

_REGISTRY: dict[str, Backend] = {}
_LOCK = threading.RLock()


def register_backend(name: str, *, supports: Supports, compile: Callable[[Function], Callable],
                     patterns: Iterable[tuple] = (), device: str = "cpu",
                     bind_constants: bool = True,
                     reject_region: Callable[[Function], bool | str | None] | None = None,
                     prefetch: Callable[[Sequence[Call]], None] | None = None,
                     control_flow: bool = False) -> Backend:
    """Register a backend under ``name`` and return it.

    ``patterns`` are ``(name, pattern)`` or ``(name, pattern, check)``: composites this backend
    fuses, tried in order. ``reject_region(function)`` may send a lifted region back to the
    host by returning True or a reason. ``bind_constants=False`` passes constants as arguments
    instead of embedding them in the function (for C source, say). ``prefetch(calls)`` is
    shown a graph's calls before they are checked one by one (to answer them in a batch).
    ``control_flow=True``: the backend's compile takes regions holding If, Loop and Scan calls
    with their bodies (an engine that runs ONNX graphs); it is given such a call whole when it
    takes every call of its bodies, at any depth, instead of the host running the call and the
    bodies being partitioned on their own.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise BackendError(f"a backend name must be an identifier, not {name!r}")
    if name == "default":  # TVM's name for the host: regions annotated for it are not lifted
        raise BackendError("a backend cannot be called 'default': annotations for 'default' "
                           "mean the host")
    if not callable(compile):
        raise BackendError(f"backend {name!r}: compile must be callable")
    for hook, value in (("reject_region", reject_region), ("prefetch", prefetch)):
        if value is not None and not callable(value):
            raise BackendError(f"backend {name!r}: {hook} must be callable")
    backend = Backend(name, _as_check(supports), compile, tuple(_entry(name, p) for p in patterns),
                      device, bool(bind_constants), reject_region, prefetch, bool(control_flow))
    with _LOCK:
        if name in _REGISTRY:
            raise BackendError(f"backend {name!r} is already registered")
        _REGISTRY[name] = backend
    return backend


def _entry(backend: str, spec: Any) -> PatternEntry:
    if isinstance(spec, PatternEntry):
        return spec
    if (isinstance(spec, tuple) and len(spec) in (2, 3) and isinstance(spec[0], str)
            and isinstance(spec[1], Pattern) and (len(spec) == 2 or callable(spec[2]))):
        return PatternEntry(*spec)
    raise BackendError(f"backend {backend!r}: a pattern is (name, pattern) or (name, pattern, "
                       f"check), not {spec!r}")


def unregister_backend(name: str) -> None:
    """Forget a backend (tests, notebooks); the next get_backend finds it again."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def get_backend(name: str) -> Backend:
    """The backend called ``name``, loading a built-in or an entry point on first use."""
    backend = find_backend(name)
    if backend is None:
        known = sorted(set(_REGISTRY) | set(_builtin_names()) | set(_entry_point_names()))
        raise BackendError(f"unknown backend {name!r}; known backends: {', '.join(known)} "
                           f"(packages add more through the {ENTRY_POINT_GROUP!r} entry points)")
    return backend


def find_backend(name: str) -> Backend | None:
    """Like get_backend, but None for a name nothing provides."""
    with _LOCK:
        if name in _REGISTRY:
            return _REGISTRY[name]
        loader = _builtin(name) or _entry_point(name)
        if loader is None:
            return None
        what, register = loader
        try:
            register()
        except ByocError:
            raise
        except Exception as exc:
            raise BackendError(f"backend {name!r}: {what} failed: {type(exc).__name__}: "
                               f"{exc}") from exc
        if name not in _REGISTRY:
            raise BackendError(f"backend {name!r}: {what} did not register a backend of that name")
        return _REGISTRY[name]


def _builtin(name: str) -> tuple[str, Callable[[], Any]] | None:
    module = f"byoc.backends.{name}"
    if not name.isidentifier() or importlib.util.find_spec(module) is None:
        return None
    return f"{module}.register()", lambda: importlib.import_module(module).register()


def _builtin_names() -> list[str]:
    import byoc.backends

    return [m.name for m in pkgutil.iter_modules(byoc.backends.__path__)]


def _entry_point(name: str) -> tuple[str, Callable[[], Any]] | None:
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return f"entry point {ep.value!r}", lambda ep=ep: ep.load()()
    return None


def _entry_point_names() -> list[str]:
    return [ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]


def _span(call: Call) -> str | None:
    return call.span.name if call.span is not None else None


def resolve(backends: str | Backend | Iterable[str | Backend]) -> list[Backend]:
    """Backends from names or Backend objects, in priority order, each once."""
    if isinstance(backends, (str, Backend)):
        backends = [backends]
    out: list[Backend] = []
    for b in backends:
        backend = b if isinstance(b, Backend) else get_backend(b)
        if any(o.name == backend.name for o in out):
            raise BackendError(f"backend {backend.name!r} is listed twice")
        out.append(backend)
    return out
