"""``byoc run``: run a model, compare with onnxruntime, profile."""

from __future__ import annotations

import json
import os
import statistics
import time

from .common import (
    backend_list,
    build_exe,
    fallback_arg,
    force_arg,
    hint_made_up,
    input_args,
    load_model,
    made_up_note,
    model_arg,
    model_inputs,
    one_line,
    path_arg,
    plan_arg,
    prepare,
    read_paths,
    report_hint,
    settled,
    show,
    threads_of,
    tolerance_args,
)

# ops whose results onnxruntime may compute otherwise than as written: its fused QDQ kernels
# (after a QuantizeLinear) and its u8 x s8 products, which saturate on x86 without VNNI
QUANTIZERS = {"QuantizeLinear"}
INTEGER_PRODUCTS = {"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger"}


def _holds(mod, ops: set[str]) -> bool:
    from ..ir import Call, post_order

    return any(isinstance(e, Call) and e.op in ops for e in post_order(mod.main.body))


def cmd_run(args) -> int:
    import byoc

    from ..compare import (
        compare_outputs,
        onnxruntime_u8s8_saturates,
        rounding_steps,
        run_onnxruntime,
    )

    if args.trace:
        from ..files.outputs import check_output_file

        check_output_file(args.trace, args.force, read_paths(args))  # before the work
    path, mod = load_model(args)
    inputs = model_inputs(args, mod)
    backends = backend_list(args.backend)
    from ..placement import format_placement, placement

    prepared = prepare(mod, backends, args)
    exe = build_exe(prepared, args)
    start = time.perf_counter()
    try:
        outputs = exe.run(inputs)
    except byoc.ByocError as exc:
        raise hint_made_up(exc, args, mod) from None
    elapsed = time.perf_counter() - start
    exe = settled(exe, prepared, args)
    calls, timed, times = steady_state(exe, inputs)
    wall = statistics.median(calls)
    result: dict = {"ok": True, "outputs": {}, "first_call_s": elapsed, "steady_state_s": wall,
                    "steady_state_calls": len(calls), "threads": exe.threads}
    if exe.fallbacks:
        result["fallbacks"] = exe.fallbacks
    if backends or len(exe.mod.functions) > 1:
        # The steady state split by the shares measured in the calls timed node by node (which
        # are slower): the rows add up to the steady state.
        rows = placement(exe.mod, times, total_s=statistics.median(timed))
        for row in rows.values():
            if "time_s" in row:
                row["time_s"] = row["time_share"] * wall
        result["placement"] = rows
    report = None
    if args.profile or args.trace:
        from ..profile import profile, write_chrome_trace

        report = profile(exe, inputs)
        if args.trace:
            write_chrome_trace(report, args.trace, force=args.force)
        result["profile"] = {k: v for k, v in report.items() if k != "trace"}
    comparisons = None
    if args.compare:
        if args.compare != "onnxruntime":
            raise byoc.InputError(f"--compare knows only onnxruntime, not {args.compare!r}")
        try:
            reference = run_onnxruntime(path, inputs, threads=threads_of(args))
        except Exception as exc:  # onnxruntime's refusal is not a bug in byoc
            raise byoc.ByocError(f"--compare: onnxruntime cannot run the model: "
                                 f"{one_line(str(exc))}") from None
        steps = rounding_steps(mod.main)
        comparisons = compare_outputs(outputs, reference, args.rtol, args.atol, steps)
        result["ok"] = all(c.ok for c in comparisons)
        if not result["ok"] and _holds(mod, QUANTIZERS):
            # onnxruntime's default optimizations fuse DQ -> op -> Q into integer kernels that
            # round differently (docs/decisions.md); byoc runs the graph as written.
            as_written = compare_outputs(outputs, run_onnxruntime(path, inputs, threads_of(args),
                                                                  optimize=False),
                                         args.rtol, args.atol, steps)
            if all(c.ok for c in as_written):
                worst = max(c.max_abs_err for c in comparisons)
                result["note"] = (f"matches onnxruntime run as written (no graph optimizations); "
                                  f"its default fused QDQ kernels differ by up to {worst:.3g}")
                comparisons, result["ok"] = as_written, True
        if not result["ok"] and _holds(mod, INTEGER_PRODUCTS) and onnxruntime_u8s8_saturates():
            result["note"] = ("does NOT match onnxruntime, whose u8 x s8 integer kernels "
                              "saturate on this CPU (x86 without VNNI: pairs of products added "
                              "in int16); byoc's integer sums are exact")
        for c in comparisons:
            result["outputs"][c.name] = c.as_dict()
        summaries = {c.name: c.summary() for c in comparisons}
    else:
        for name, value in outputs.items():
            arr = value if hasattr(value, "shape") else None
            result["outputs"][name] = {"shape": list(arr.shape) if arr is not None else None,
                                       "dtype": arr.dtype.name if arr is not None else type(value).__name__}
    if args.made_up:
        result["made_up_inputs"] = args.made_up
    if args.json:
        print(json.dumps(result))
    else:
        where = ", ".join(backends) if backends else (
            f"the plan {args.plan}" if args.plan else "host")
        print(f"ran {show(os.path.basename(path))} on {where} ({exe.threads} thread"
              f"{'s' if exe.threads > 1 else ''})")
        print(f"  first call    {_ms(elapsed)}  (one-time work included: builds for these "
              f"input shapes)")
        print(f"  steady state  {_ms(wall)}  (the median of {len(calls)} call"
              f"{'s' if len(calls) > 1 else ''} after it)")
        if "placement" in result:
            print("  the steady state by where it runs (shares from calls timed node by node):")
            print(format_placement(result["placement"], indent="    "))
        print("outputs")
        for name, o in result["outputs"].items():
            line = f"  {show(name)}: {tuple(o['shape']) if o['shape'] is not None else '?'} {o['dtype']}"
            if comparisons is not None:
                line += f"  {summaries[name]}"
            print(line)
        if comparisons is not None:
            print(result.get("note") or (
                "matches onnxruntime" if result["ok"] else "does NOT match onnxruntime"))
        if report is not None:
            from ..profile import format_profile

            print()
            print(format_profile(report))
            print(report_hint(args, profile=True))
        if args.made_up:
            print(made_up_note(args))
    return 0 if result["ok"] else 1


def steady_state(exe, inputs, calls: int = 10, budget_s: float = 1.0
                 ) -> tuple[list[float], list[float], dict[str, float]]:
    """The calls after the first: the seconds of each (up to ``calls`` within ``budget_s``, at
    least one); as many again timed node by node, interleaved with them (timing each node
    slows a call, so those are not the calls timed whole): their seconds, and each node's
    median. What a call takes beyond its nodes is the executor's, between them."""
    whole: list[float] = []
    timed: list[float] = []
    by_node: list[dict[str, float]] = []
    start = time.perf_counter()
    while not whole or (len(whole) < calls and time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        exe.run(inputs)
        t1 = time.perf_counter()
        by_node.append(exe.run(inputs, capture=[]).times)
        timed.append(time.perf_counter() - t1)
        whole.append(t1 - t0)
    nodes = {name: statistics.median(t.get(name, 0.0) for t in by_node) for name in by_node[0]}
    return whole, timed, nodes


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:10.2f} ms"


def register(sub) -> None:
    p = sub.add_parser("run", help="run a model (seeded random inputs unless given)")
    model_arg(p, optional=True)
    input_args(p)
    p.add_argument("--compare", metavar="onnxruntime")
    tolerance_args(p)
    p.add_argument("--no-fallback", action="store_true",
                   help="fail if any node would run on the host")
    fallback_arg(p)
    plan_arg(p)
    p.add_argument("--profile", action="store_true",
                   help="time per node and region, copies per boundary, hot spots")
    p.add_argument("--trace", metavar="FILE.json", type=path_arg, help="write a Chrome trace (chrome://tracing)")
    force_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_run)
