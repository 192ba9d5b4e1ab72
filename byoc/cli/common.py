"""What every command shares: loading the model, inputs, building, fallbacks, output files."""

from __future__ import annotations

import sys
from importlib import resources

DEFAULT_MODEL = "tiny_resnet.onnx"
MAX_THREADS = 1024  # beyond any machine byoc runs on; a typo must not start a million threads


def default_model_path() -> str:
    return str(resources.files("byoc") / "data" / DEFAULT_MODEL)


def whole(least: int, most: int | None = None):
    """An argparse type: a whole number in ``[least, most]``, in ASCII digits (``int`` also
    takes other scripts' digits); argparse turns the refusal into one line and exit 2."""
    import argparse
    import re

    def parse(text: str) -> int:
        value = int(text) if re.fullmatch(r"\s*-?[0-9]{1,18}\s*", text) else None
        if value is None or value < least or (most is not None and value > most):
            span = f"at least {least}" + ("" if most is None else f" and at most {most}")
            raise argparse.ArgumentTypeError(f"wants a whole number, {span}; got {text!r}")
        return value

    parse.__name__ = "whole number"
    return parse


def amount(least: float = 0.0, above: bool = False):
    """An argparse type: a finite number at least ``least`` (more than it if ``above``); ``nan``
    and ``inf``, which ``float`` takes, are refused."""
    import argparse
    import math

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < least or (above and value == least):
            raise argparse.ArgumentTypeError(
                f"wants a number {'above' if above else 'from'} {least:g}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def show(text: str) -> str:
    from ..report import show  # imported when needed: `byoc --help` stays quick

    return show(text)


def one_line(text: str) -> str:
    """The first line of a message, with anything unprintable in it escaped."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return escaped(first)


def escaped(text: str) -> str:
    """``text`` with anything unprintable (newlines too) escaped: one line, whatever it holds."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def backend_list(spec: str | None) -> list[str]:
    if spec is None:
        return []
    names = [b.strip() for b in spec.split(",") if b.strip()]
    if not names:
        from ..errors import InputError

        raise InputError(f"--backend wants NAME[,NAME], got {spec!r}")
    return names


def path_arg(text: str) -> str:
    """An argparse type for a path: not empty (``''`` would mean the current folder, or the
    default model, silently)."""
    if not text:
        import argparse

        raise argparse.ArgumentTypeError("wants a path, got ''")
    return text


def load_model(args):
    import byoc

    path = args.model or default_model_path()
    return path, byoc.load_onnx(path)


def model_inputs(args, mod):
    """The inputs of a run: ``--input`` files, the rest made up from ``--seed``, ``--dim`` and
    ``--shape``; the names of those made up are left in ``args.made_up``."""
    from ..inputs import random_inputs

    given, dims, shapes = _given(args, mod)
    inputs = random_inputs(mod.main, dims, seed=args.seed, given=given, shapes=shapes)
    args.made_up = [n for n in inputs if n not in given]  # not those the model has defaults for
    return inputs


def _given(args, mod):
    """What the command line says of the inputs: ``--input`` arrays, ``--dim`` values and
    ``--shape`` shapes, each checked against the model."""
    from ..inputs import parse_dims, parse_shapes, read_input_files

    names = [p.name for p in mod.main.params]
    given = read_input_files(args.input, names)
    dims = parse_dims(args.dim, mod.main)
    shapes = parse_shapes(getattr(args, "shape", None) or [], mod.main, dims)
    for name in shapes:
        if name in given:
            from ..errors import InputError

            raise InputError(f"input {name!r} is given with --input and --shape; which is meant?")
    return given, dims, shapes


def shaped_model(args, path: str, mod):
    """The model imported again with the input shapes ``--input``, ``--dim`` and ``--shape``
    fix (dims they leave open as the model has them), so its types have real sizes; None
    when none is given. Nothing is made up and nothing runs."""
    if not (args.input or args.dim or getattr(args, "shape", None)):
        return None
    import byoc

    from ..errors import InputError
    from ..ir import TensorType

    given, dims, shapes = _given(args, mod)
    declared = {p.name: p.type.shape for p in mod.main.params
                if isinstance(p.type, TensorType) and p.type.shape is not None}
    for name, array in given.items():  # an array fixes its shape, and the names in it
        want, got = declared.get(name), array.shape
        if want is None:
            continue
        if len(want) != len(got) or any(isinstance(w, int) and w != g for w, g in zip(want, got)):
            raise InputError(f"--input {show(name)}: the model wants shape "
                             f"({', '.join('?' if w is None else show(str(w)) for w in want)}), "
                             f"the array has {got}")
        for w, g in zip(want, got):
            if isinstance(w, str) and dims.setdefault(w, g) != g:
                raise InputError(f"--input {show(name)}: dim {show(w)!r} is {g}, but "
                                 f"elsewhere it is {dims[w]}")
    fixed = {**{n: tuple(a.shape) for n, a in given.items()}, **shapes}
    for name, want in declared.items():
        if name not in fixed:
            fixed[name] = tuple(dims.get(d, d) if isinstance(d, str) else d for d in want)
    return byoc.load_onnx(path, input_shapes=fixed)


def made_up_note(args) -> str | None:
    """One line saying which inputs were made up, and how to pass real ones."""
    made_up = getattr(args, "made_up", None)
    if not made_up:
        return None
    return (f"input{'s' if len(made_up) > 1 else ''} {', '.join(map(repr, made_up))} made up "
            f"(seed {args.seed}); pass real ones with --input NAME=FILE.npy or --input FILE.npz")


def hint_made_up(exc: Exception, args, mod) -> Exception:
    """A run that failed on made-up inputs says so: random values and dims of 1 are often not
    what a model accepts (a sample rate, a minimum length), and the fix is the real input."""
    import byoc

    if getattr(exc, "contract", False):  # a backend broke the region contract: not the inputs
        return exc
    made_up = getattr(args, "made_up", None)
    if not made_up:
        return exc
    return byoc.ByocError(f"{exc} (inputs {', '.join(map(repr, made_up))} were made up: pass "
                          f"real ones with --input NAME=FILE.npy, or sizes with --dim NAME=N)")


def prepare(mod, backends: list[str], args):
    """The module to build: partitioned for the backends, or as imported (host only)."""
    from ..errors import InputError

    if args.fallback and getattr(args, "no_fallback", False):  # only run has --no-fallback
        raise InputError("--fallback host and --no-fallback contradict each other")
    from ..partition import partition

    if getattr(args, "plan", None):
        if backends:
            raise InputError("--plan places every node: drop --backend")
        return partition(mod, plan=args.plan)
    if not backends or backends == ["host"]:
        return mod

    return partition(mod, backends=backends, no_fallback=getattr(args, "no_fallback", False))


def build_exe(prepared, args):
    """``byoc.build`` with ``--fallback``; each region sent to the host said on stderr."""
    import byoc

    exe = byoc.build(prepared, fallback=args.fallback)
    warn_fallbacks({**exe.fallbacks, **exe.moves})
    exe.warned = set(exe.moves)
    return exe


def warn_fallbacks(fallbacks: dict[str, str]) -> None:
    for why in fallbacks.values():
        print(one_line(f"byoc: warning: {why}"), file=sys.stderr)


def late_fallbacks(exe) -> dict[str, str]:
    """The fallbacks that happened at a call: their regions are still in ``exe.mod``."""
    return {name: why for name, why in exe.fallbacks.items() if name in exe.mod.functions}


def settled(exe, prepared, args):
    """After a first run: the regions whose per-shape build failed at their first call (they ran
    on the host) inlined too, so the runs that follow, the placement and the profile count them
    as host nodes. ``exe`` itself when none did. Regions that moved to another backend at their
    first run (``--fallback next``) are said once; they keep running there."""
    warned = getattr(exe, "warned", set())
    warn_fallbacks({n: why for n, why in exe.moves.items() if n not in warned})
    warned.update(exe.moves)
    late = late_fallbacks(exe)
    if not late:
        return exe
    import byoc

    from ..passes.reject import inline_regions

    warn_fallbacks(late)
    rebuilt = byoc.build(inline_regions(prepared, late), fallback=args.fallback)
    rebuilt.fallbacks.update(exe.fallbacks)  # in place: its regions record into this dict
    warn_fallbacks({n: why for n, why in rebuilt.moves.items() if n not in warned})
    rebuilt.warned = warned | set(rebuilt.moves)
    return rebuilt


def threads_of(args) -> int:
    """The thread count this command runs with (``--threads``, ``$BYOC_THREADS``, cores)."""
    from ..runtime.threads import resolve

    return resolve(getattr(args, "threads", None))


def save_model(model, path: str, force: bool = False, protect=()) -> None:
    """Write an ONNX model beside its destination, then rename it into place (byoc's output
    rules: ``byoc/files/outputs.py``)."""
    import onnx

    from ..files.outputs import output_file

    with output_file(path, force=force, protect=protect) as tmp:
        onnx.save(model, tmp)


def one_backend(args) -> str:
    from ..errors import InputError

    names = backend_list(args.backend)
    if len(names) != 1:
        raise InputError("this command takes exactly one --backend")
    return names[0]


def model_arg(p, optional: bool = False) -> None:
    if optional:
        p.add_argument("model", nargs="?", type=path_arg,
                       help="ONNX model (default: the embedded tiny ResNet)")
    else:
        p.add_argument("model", type=path_arg, help="ONNX model")


def force_arg(p) -> None:
    p.add_argument("--force", action="store_true",
                   help="write into an output folder that is not empty, or over an output file "
                        "(only the files byoc writes are replaced)")


def read_paths(args) -> list[str]:
    """The files this command reads (the model, --input files): no output may replace them."""
    paths = [args.model or default_model_path()]
    for spec in getattr(args, "input", None) or []:
        paths.append(spec.partition("=")[2] or spec)
    if getattr(args, "plan", None):
        paths.append(args.plan)
    return paths


def fallback_arg(p) -> None:
    p.add_argument("--fallback", choices=["host", "next"],
                   help="run a region its backend cannot build (compile error, no compiler, "
                        "cache not writable) on the host, with a warning line; 'next': first "
                        "on the next listed backend that takes it (also if its first run fails)")


def plan_arg(p) -> None:
    p.add_argument("--plan", metavar="PLAN.json",
                   help="place every node as this plan from `byoc tune` says (no --backend)")


def input_args(p) -> None:
    shape_args(p)
    p.add_argument("--seed", type=whole(0), default=0, help="seed of made-up inputs (default 0)")
    p.add_argument("--backend", metavar="NAME[,NAME]", help="backends in priority order")
    threads_arg(p)


def shape_args(p) -> None:
    """--input, --dim and --shape: the inputs of a run, or (partition) only their shapes."""
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy|FILE.npz",
                   help="an input from a .npy file; a .npz file holds several, by name "
                        "(NAME=FILE.npz: one); inputs not given are made up")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="value of a named dim for made-up inputs (default 1)")
    p.add_argument("--shape", action="append", default=[], metavar="INPUT=D0,D1,...",
                   help="the whole shape of a made-up input (for dims the model leaves unnamed)")


def threads_arg(p) -> None:
    p.add_argument("--threads", type=whole(1, MAX_THREADS), metavar="N",
                   help="threads for every engine: byoc's kernels, numpy's BLAS, onnxruntime "
                        "(default: $BYOC_THREADS, else the physical cores)")


def tolerance_args(p) -> None:
    """--atol and --rtol: |got - want| <= atol + rtol * |want| element-wise (byoc/compare.py)."""
    p.add_argument("--atol", type=amount(0.0), metavar="A",
                   help="absolute tolerance (default per dtype; float32 1e-5)")
    p.add_argument("--rtol", type=amount(0.0), metavar="R",
                   help="relative tolerance (default per dtype; float32 1e-4)")


def report_hint(args, profile: bool = False) -> str:
    """The ``byoc report`` command that draws what was just printed."""
    import shlex

    def line(model: str | None, plan: str | None) -> str:
        parts = ["byoc", "report"] + ([model] if model else [])
        if plan:
            parts += ["--plan", plan]
        elif args.backend:
            parts += ["--backend", args.backend]
        parts += ["--profile"] if profile else []
        return f"see it drawn, per node: {show(shlex.join(parts))} -o report.html"

    plan = getattr(args, "plan", None)
    text = line(args.model, plan)  # long paths give way to placeholders: tables fit 120 columns
    return text if len(text) <= 120 else line(args.model and "MODEL", plan and "PLAN.json")
