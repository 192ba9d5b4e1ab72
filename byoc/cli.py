"""The ``byoc`` command line: info, run, bench, partition, build, extract, repro, bisect.

Every error byoc raises on purpose becomes one line on stderr and exit code 2; a comparison
out of tolerance exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from importlib import resources

DEFAULT_MODEL = "tiny_resnet.onnx"


def default_model_path() -> str:
    return str(resources.files("byoc") / "data" / DEFAULT_MODEL)


def _parse_dims(specs: list[str]) -> dict[str, int]:
    from .errors import InputError

    dims = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not value.isdigit():
            raise InputError(f"--dim wants NAME=N, got {spec!r}")
        dims[name] = int(value)
    return dims


def _show(text: str) -> str:
    from .report import show  # imported when needed: `byoc --help` stays quick

    return show(text)


def _one_line(text: str) -> str:
    """The first line of a message, with anything unprintable in it escaped."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in first)


def _backends(spec: str | None) -> list[str]:
    return [b.strip() for b in spec.split(",") if b.strip()] if spec else []


def _load(args):
    import byoc

    path = args.model or default_model_path()
    return path, byoc.load_onnx(path)


def _inputs(args, mod):
    from .errors import InputError
    from .inputs import load_npy, random_inputs

    # Native byte order: a big-endian .npy is still "float32", and C and onnxruntime would
    # read its bytes as if they were little-endian.
    given: dict = {}
    for spec in args.input:
        name, array = load_npy(spec)
        if name in given:
            raise InputError(f"--input {name} is given twice")
        given[name] = _native(array)
    names = [p.name for p in mod.main.params]
    for name in given:  # a misspelt name must not mean a made-up input, silently
        if name not in names:
            raise InputError(f"unknown input {name!r}; the model's inputs are {names}")
    return random_inputs(mod.main, _parse_dims(args.dim), seed=args.seed, given=given)


def _quantized(mod) -> bool:
    from .ir import Call, post_order

    return any(isinstance(e, Call) and e.op == "QuantizeLinear" for e in post_order(mod.main.body))


def _hint_made_up(exc: Exception, args, mod) -> Exception:
    """A run that failed on made-up inputs says so: random values and dims of 1 are often not
    what a model accepts (a sample rate, a minimum length), and the fix is the real input."""
    import byoc

    given = {spec.partition("=")[0] for spec in args.input}
    made_up = [p.name for p in mod.main.params if p.name not in given]
    if not made_up:
        return exc
    return byoc.ByocError(f"{exc} (inputs {', '.join(map(repr, made_up))} were made up: pass "
                          f"real ones with --input NAME=FILE.npy, or sizes with --dim NAME=N)")


def _native(array):
    return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))


def _prepare(mod, backends: list[str], args):
    """The module to build: partitioned for the backends, or as imported (host only)."""
    if args.fallback and getattr(args, "no_fallback", False):  # only run has --no-fallback
        from .errors import InputError

        raise InputError("--fallback host and --no-fallback contradict each other")
    if not backends or backends == ["host"]:
        return mod
    from .partition import partition

    return partition(mod, backends=backends, no_fallback=getattr(args, "no_fallback", False))


def _build(prepared, args):
    """``byoc.build`` with ``--fallback``; each region sent to the host said on stderr."""
    import byoc

    exe = byoc.build(prepared, fallback=args.fallback)
    _warn(exe.fallbacks)
    return exe


def _warn(fallbacks: dict[str, str]) -> None:
    for why in fallbacks.values():
        print(_one_line(f"byoc: warning: {why}"), file=sys.stderr)


def _late(exe) -> dict[str, str]:
    """The fallbacks that happened at a call: their regions are still in ``exe.mod``."""
    return {name: why for name, why in exe.fallbacks.items() if name in exe.mod.functions}


def _settled(exe, prepared, args):
    """After a first run: the regions whose per-shape build failed at their first call (they ran
    on the host) inlined too, so the runs that follow, the placement and the profile count them
    as host nodes. ``exe`` itself when none did."""
    late = _late(exe)
    if not late:
        return exe
    import byoc

    from .passes.reject import inline_regions

    _warn(late)
    rebuilt = byoc.build(inline_regions(prepared, late), fallback=args.fallback)
    rebuilt.fallbacks.update(exe.fallbacks)  # in place: its regions record into this dict
    return rebuilt


def cmd_info(args) -> int:
    from .ir import Call, Function, TensorType, post_order

    path, mod = _load(args)
    ops: Counter[str] = Counter()
    stack = [mod.main]
    while stack:
        func = stack.pop()
        for e in post_order(func.body):
            if isinstance(e, Call):
                ops[e.op_name] += 1
                stack.extend(v for v in e.attrs.values() if isinstance(v, Function))
    opsets = mod.attrs.get("opset_imports", {})
    info = {
        "model": path,
        "opset": opsets.get("", None),
        "opset_imports": opsets,
        "nodes": sum(ops.values()),
        "ops": dict(ops.most_common()),
        "inputs": {p.name: str(p.type) for p in mod.main.params},
        "outputs": {},
    }
    body = mod.main.body
    outs = list(getattr(body, "fields", None) or [body]) if len(mod.main.attrs["output_names"]) > 1 else [body]
    for name, e in zip(mod.main.attrs["output_names"], outs):
        info["outputs"][name] = str(e.type)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"model   {path}")
    print(f"opset   {info['opset']}" + (f"  (also {', '.join(f'{d} {v}' for d, v in opsets.items() if d)})"
                                       if len(opsets) > 1 else ""))
    print(f"nodes   {info['nodes']}")
    print("inputs")
    for n, t in info["inputs"].items():
        print(f"  {_show(n)}: {t}")
    print("outputs")
    for n, t in info["outputs"].items():
        print(f"  {_show(n)}: {t}")
    print("ops")
    width = max((len(k) for k in ops), default=0)
    for op, n in ops.most_common():
        print(f"  {op:<{width}}  {n}")
    return 0


def cmd_run(args) -> int:
    import byoc

    from .compare import compare_outputs, run_onnxruntime

    path, mod = _load(args)
    inputs = _inputs(args, mod)
    backends = _backends(args.backend)
    from .placement import format_placement, placement

    prepared = _prepare(mod, backends, args)
    exe = _build(prepared, args)
    start = time.perf_counter()
    try:
        outputs = exe.run(inputs)
    except byoc.ByocError as exc:
        raise _hint_made_up(exc, args, mod) from None
    elapsed = time.perf_counter() - start
    exe = _settled(exe, prepared, args)
    result: dict = {"ok": True, "outputs": {}, "time_s": elapsed}
    if exe.fallbacks:
        result["fallbacks"] = exe.fallbacks
    if backends:  # where it ran, timed on a second run with per-node times
        result["placement"] = placement(exe.mod, exe.run(inputs, capture=[]).times)
    report = None
    if args.profile or args.trace:
        from .profile import profile, write_chrome_trace

        report = profile(exe, inputs)
        if args.trace:
            write_chrome_trace(report, args.trace)
        result["profile"] = {k: v for k, v in report.items() if k != "trace"}
    comparisons = None
    if args.compare:
        if args.compare != "onnxruntime":
            raise byoc.InputError(f"--compare knows only onnxruntime, not {args.compare!r}")
        try:
            reference = run_onnxruntime(path, inputs, threads=args.threads)
        except Exception as exc:  # onnxruntime's refusal is not a bug in byoc
            raise byoc.ByocError(f"--compare: onnxruntime cannot run the model: "
                                 f"{_one_line(str(exc))}") from None
        comparisons = compare_outputs(outputs, reference)
        result["ok"] = all(c.ok for c in comparisons)
        if not result["ok"] and _quantized(mod):
            # onnxruntime's default optimizations fuse DQ -> op -> Q into integer kernels that
            # round differently (docs/decisions.md); byoc runs the graph as written.
            as_written = compare_outputs(outputs, run_onnxruntime(path, inputs, args.threads,
                                                                  optimize=False))
            if all(c.ok for c in as_written):
                worst = max(c.max_abs_err for c in comparisons)
                result["note"] = (f"matches onnxruntime run as written (no graph optimizations); "
                                  f"its default fused QDQ kernels differ by up to {worst:.3g}")
                comparisons, result["ok"] = as_written, True
        for c in comparisons:
            result["outputs"][c.name] = c.as_dict()
    else:
        for name, value in outputs.items():
            arr = value if hasattr(value, "shape") else None
            result["outputs"][name] = {"shape": list(arr.shape) if arr is not None else None,
                                       "dtype": arr.dtype.name if arr is not None else type(value).__name__}
    if args.json:
        print(json.dumps(result))
    else:
        where = ", ".join(backends) if backends else "host"
        print(f"ran {os.path.basename(path)} on {where} in {elapsed * 1000:.1f} ms")
        if "placement" in result:
            print(format_placement(result["placement"]))
        for name, o in result["outputs"].items():
            line = f"  {_show(name)}: {tuple(o['shape']) if o['shape'] is not None else '?'} {o['dtype']}"
            if comparisons is not None:
                line += f"  max_abs_err={o['max_abs_err']:.3g} rel_err={o['rel_err']:.3g} " + (
                    "ok" if o["ok"] else "OUT OF TOLERANCE" + (f" ({o['note']})" if o.get("note") else ""))
            print(line)
        if comparisons is not None:
            print(result.get("note") or (
                "matches onnxruntime" if result["ok"] else "does NOT match onnxruntime"))
        if report is not None:
            from .profile import format_profile

            print()
            print(format_profile(report))
    return 0 if result["ok"] else 1


def cmd_bench(args) -> int:
    import byoc

    from .compare import onnxruntime_session

    path, mod = _load(args)
    inputs = _inputs(args, mod)
    backends = _backends(args.backend)
    with _threads(args.threads):
        prepared = _prepare(mod, backends, args)
        exe = _build(prepared, args)
        session = onnxruntime_session(path, threads=args.threads)
        for _ in range(args.warmup):
            exe.run(inputs)
            session.run(None, inputs)
        exe = _settled(exe, prepared, args)  # timed: no region that failed to build in warmup
        ours, theirs = [], []
        for _ in range(args.repeat):  # interleaved, so drift on the machine hits both alike
            t0 = time.perf_counter()
            exe.run(inputs)
            t1 = time.perf_counter()
            session.run(None, inputs)
            t2 = time.perf_counter()
            ours.append(t1 - t0)
            theirs.append(t2 - t1)
    _warn(_late(exe))  # with --warmup 0, the timed runs met them
    result = {"model": path, "backends": backends or ["host"], "threads": args.threads,
              "repeat": args.repeat, "byoc_median_s": statistics.median(ours),
              "onnxruntime_median_s": statistics.median(theirs)}
    result["ratio"] = result["byoc_median_s"] / result["onnxruntime_median_s"]
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{os.path.basename(path)}  ({', '.join(result['backends'])}, {args.threads} thread"
              f"{'s' if args.threads > 1 else ''}, median of {args.repeat})")
        print(f"  byoc         {result['byoc_median_s'] * 1000:9.2f} ms")
        print(f"  onnxruntime  {result['onnxruntime_median_s'] * 1000:9.2f} ms")
        print(f"  ratio        {result['ratio']:9.2f}x")
    return 0


class _threads:
    """Limit numpy's BLAS to ``n`` threads for the duration (threadpoolctl)."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        from threadpoolctl import threadpool_limits

        self.limit = threadpool_limits(self.n)
        return self

    def __exit__(self, *exc):
        self.limit.unregister()


def cmd_partition(args) -> int:
    from .partition import annotate_range, partition
    from .report import format_table, partition_report

    path, mod = _load(args)
    backends = _backends(args.backend)
    if not backends:
        from .errors import InputError

        raise InputError("partition needs --backend NAME[,NAME]")
    if args.range:
        start, sep, end = args.range.partition(":")
        if not sep:
            from .errors import InputError

            raise InputError(f"--range wants START:END, got {args.range!r}")
        mod = annotate_range(mod, backends[0], start, end)
        part = partition(mod, backends=backends, annotated=True)
    else:
        part = partition(mod, backends=backends)
    report = partition_report(part)
    if args.output:
        from .frontends.onnx.exporter import module_to_onnx

        save_model(module_to_onnx(part), args.output)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_table(report, explain=args.explain))
    return 0


def save_model(model, path: str) -> None:
    """Write an ONNX model beside its destination, then rename it into place."""
    import onnx

    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        onnx.save(model, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _one_backend(args) -> str:
    from .errors import InputError

    names = _backends(args.backend)
    if len(names) != 1:
        raise InputError("this command takes exactly one --backend")
    return names[0]


def cmd_build(args) -> int:
    import byoc

    from .codegen.build_cache import STATS
    from .placement import format_placement, placement

    path, mod = _load(args)
    backends = _backends(args.backend)
    part = _prepare(mod, backends, args)
    start = time.perf_counter()
    exe = _build(part, args)
    elapsed = time.perf_counter() - start
    part = exe.mod  # without the regions --fallback host sent back
    regions = [n for n in part.functions if n != "main"]
    print(f"built {os.path.basename(path)} for {', '.join(backends) or 'host'} in {elapsed:.2f} s: "
          f"{len(regions)} region(s); C modules compiled {STATS.compiled}, from cache {STATS.cached}")
    print(format_placement(placement(part)))
    if args.emit_c:
        from .backends.ccompiler import write_c_sources

        files = write_c_sources(part, args.emit_c, executable=exe)
        print(f"wrote {len(files)} C file(s) to {args.emit_c}")
    return 0


def cmd_extract(args) -> int:
    from .errors import InputError
    from .extract import extract

    path, mod = _load(args)
    nodes = None
    if args.nodes:
        first, sep, last = args.nodes.partition(":")
        if not sep:
            raise InputError(f"--nodes wants FIRST:LAST, got {args.nodes!r}")
        nodes = (first, last)
    case = extract(mod, _one_backend(args), args.output, _inputs(args, mod), region=args.region,
                   nodes=nodes, name_regex=args.name_regex, iteration=args.iteration)
    print(f"wrote {case.out_dir}: region {case.region.name} ({len(case.region.nodes)} nodes, "
          f"{len(case.region.input_names)} inputs, {len(case.region.output_names)} outputs)")
    for f in case.files:
        print(f"  {f}")
    print(f"replay: byoc repro {case.out_dir} --backend {case.backend}")
    return 0


def cmd_repro(args) -> int:
    from .extract import repro

    checks = repro(args.case, _one_backend(args))
    for c in checks:
        print(f"  {_show(c.name)}: max_abs_err={c.max_abs_err:.3g} rel_err={c.rel_err:.3g} "
              + ("ok" if c.ok else "OUT OF TOLERANCE" + (f" ({c.note})" if c.note else "")))
    ok = all(c.ok for c in checks)
    print("reproduces the recorded outputs" if ok else "does NOT match the recorded outputs")
    return 0 if ok else 1


def cmd_bisect(args) -> int:
    from .extract import bisect

    path, mod = _load(args)
    result = bisect(mod, _one_backend(args), _inputs(args, mod), out_dir=args.output,
                    progress=lambda line: print(f"  checking {line}", file=sys.stderr, flush=True))
    if result.region is None:
        print(f"all {result.checked} region(s) match the host")
        return 0
    print(f"first bad region: {result.region.name} (region {result.checked} of the run)")
    for c in result.comparisons:
        print(f"  {_show(c.name)}: rel_err={c.rel_err:.3g}")
    print(f"first bad node: {_show(result.node)} ({result.node_op})")
    if result.case is not None:
        print(f"repro: byoc repro {result.case.out_dir} --backend {result.case.backend}")
    return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="byoc", description="Bring your own codegen to ONNX models.")
    sub = parser.add_subparsers(dest="command")

    def model_arg(p, optional=False):
        if optional:
            p.add_argument("model", nargs="?", help="ONNX model (default: the embedded tiny ResNet)")
        else:
            p.add_argument("model", help="ONNX model")

    def fallback_arg(p):
        p.add_argument("--fallback", choices=["host"],
                       help="run a region its backend cannot build (compile error, no compiler, "
                            "cache not writable) on the host, with a warning line")

    def input_args(p):
        p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
        p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                       help="value of a symbolic dim for made-up inputs (default 1)")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--backend", metavar="NAME[,NAME]", help="backends in priority order")
        p.add_argument("--threads", type=int, default=1)

    p = sub.add_parser("info", help="opset, nodes, op histogram, inputs and outputs")
    model_arg(p, optional=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_info)

    p = sub.add_parser("run", help="run a model (seeded random inputs unless given)")
    model_arg(p, optional=True)
    input_args(p)
    p.add_argument("--compare", metavar="onnxruntime")
    p.add_argument("--no-fallback", action="store_true",
                   help="fail if any node would run on the host")
    fallback_arg(p)
    p.add_argument("--profile", action="store_true",
                   help="time per node and region, copies per boundary, hot spots")
    p.add_argument("--trace", metavar="FILE.json", help="write a Chrome trace (chrome://tracing)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("bench", help="median latency of byoc and onnxruntime, interleaved")
    model_arg(p, optional=True)
    input_args(p)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--warmup", type=int, default=2)
    fallback_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_bench)

    p = sub.add_parser("partition", help="what runs where: regions per backend")
    model_arg(p, optional=True)
    p.add_argument("--backend", metavar="NAME[,NAME]", required=True)
    p.add_argument("--explain", action="store_true", help="say why each host node stayed there")
    p.add_argument("--range", metavar="START:END", help="annotate a node range by hand")
    p.add_argument("--json", action="store_true")
    p.add_argument("-o", "--output", metavar="OUT.onnx",
                   help="also write the partitioned model, one local function per region")
    p.set_defaults(fn=cmd_partition)

    p = sub.add_parser("build", help="partition and compile every region (cached); --emit-c")
    model_arg(p, optional=True)
    p.add_argument("--backend", metavar="NAME[,NAME]", help="backends in priority order")
    p.add_argument("--emit-c", metavar="DIR", help="write each C region's source into DIR")
    fallback_arg(p)
    p.set_defaults(fn=cmd_build)

    p = sub.add_parser("extract", help="one region as a standalone ONNX test case")
    model_arg(p)
    input_args(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--region", type=int, metavar="K", help="the K-th region (from 0)")
    which.add_argument("--nodes", metavar="FIRST:LAST", help="a node range by ONNX node names")
    which.add_argument("--name-regex", metavar="RE", help="the nodes whose names match")
    p.add_argument("--iteration", type=int, default=0, metavar="K",
                   help="for a region in a Loop/Scan body or If branch: the tensors of the "
                        "body's K-th run (from 0; default 0)")
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.set_defaults(fn=cmd_extract)

    p = sub.add_parser("repro", help="replay an extracted case on a backend; exit 1 if it differs")
    p.add_argument("case", metavar="DIR")
    p.add_argument("--backend", required=True)
    p.set_defaults(fn=cmd_repro)

    p = sub.add_parser("bisect", help="find the first region and node a backend gets wrong")
    model_arg(p)
    input_args(p)
    p.add_argument("-o", "--output", metavar="DIR", default="byoc-bisect",
                   help="where to extract a repro of the first bad node (default byoc-bisect)")
    p.set_defaults(fn=cmd_bisect)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        argv = ["run"]
    args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        parser.print_help()
        return 2
    import warnings

    from .errors import ByocError

    warnings.simplefilter("ignore") if not os.environ.get("BYOC_WARNINGS") else None
    try:
        return args.fn(args)
    except ByocError as exc:
        print(_one_line(f"byoc: error: {exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("byoc: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug in byoc: still one line, and how to see more
        if os.environ.get("BYOC_TRACEBACK"):
            raise
        print(f"byoc: internal error: {type(exc).__name__}: {_one_line(str(exc))} (set "
              "BYOC_TRACEBACK=1 for the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
