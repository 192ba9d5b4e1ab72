"""Export byoc functions and modules back to ONNX.

Value names are the ONNX names the importer kept (span outputs, Var and Constant names), so an
exported graph reads like the original; generated names fill the gaps and clashes. Bodies of
If/Loop/Scan refer to their captured outer values by the outer names, as ONNX subgraphs do.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from byoc.ir import (DEFAULTS, Call, Constant, Expr, Function, GlobalVar, IRModule, TensorType, Tuple,
                     TupleGetItem, Var, post_order)
from byoc.analysis.names import unique
from byoc.op import CANONICAL_OPSET, onnx_bridge


class _Names:
    """Unique ONNX value names, shared by a graph and the subgraphs nested in it."""

    def __init__(self, parent: _Names | None = None):
        self.used: set[str] = parent.used if parent else set()
        self.counter = parent.counter if parent else [0]

    def take(self, want: str | None) -> str:
        if want and want not in self.used:
            self.used.add(want)
            return want
        while True:
            self.counter[0] += 1
            name = f"{want or 'v'}__{self.counter[0]}"
            if name not in self.used:
                self.used.add(name)
                return name


def function_to_graph(func: Function, name: str = "main", *, names: _Names | None = None,
                      output_names: list[str | None] | None = None,
                      captured: dict[Var, str] | None = None,
                      input_names: list[str] | None = None,
                      functions: dict[str, tuple[str, int]] | None = None) -> onnx.GraphProto:
    """A GraphProto computing ``func``.

    ``captured`` maps the parameters that are captures to the outer names they stand for:
    those become references to the enclosing graph's values instead of graph inputs.
    ``input_names`` renames the parameters; ``functions`` maps the module's external
    functions to (ONNX domain, number of outputs), making calls of them function nodes.
    """
    names = names or _Names()
    captured = captured or {}
    value_name: dict[Expr, str] = {}
    call_outs: dict[Expr, list[str]] = {}
    inputs, nodes, inits = [], [], []
    defaults = func.attrs.get(DEFAULTS) or {}
    for k, p in enumerate(func.params):
        if p in captured:
            value_name[p] = captured[p]
            continue
        value_name[p] = names.take(input_names[k] if input_names else p.name)
        inputs.append(helper.make_value_info(value_name[p], onnx_bridge.type_to_proto(p.type)))
        if p.name in defaults:  # an input with an initializer: ONNX's overridable default
            inits.append(numpy_helper.from_array(np.asarray(defaults[p.name]), value_name[p]))

    body = func.body
    outs = list(body.fields) if isinstance(body, Tuple) else [body]
    for e in post_order(outs):
        if e in value_name:
            continue
        if isinstance(e, Constant):
            value_name[e] = names.take(e.name or "const")
            inits.append(numpy_helper.from_array(e.value, value_name[e]))
        elif isinstance(e, Var):
            value_name[e] = e.name  # a free variable: a value of an enclosing graph
        elif isinstance(e, Call):
            node, node_outs = _node(e, value_name, names, functions or {})
            nodes.append(node)
            call_outs[e] = node_outs
            value_name[e] = node_outs[0]
        elif isinstance(e, TupleGetItem):
            value_name[e] = call_outs[e.tuple_value][e.index]
        elif isinstance(e, Tuple):
            raise ValueError("nested tuples cannot be exported to ONNX")
    wanted = output_names or func.attrs.get("output_names") or [None] * len(outs)
    outputs = []
    for e, want in zip(outs, wanted):
        have = value_name[e]
        if want and have != want:  # an output that is an input, a constant, or a repeat
            final = names.take(want)
            nodes.append(helper.make_node("Identity", [have], [final]))
            have = final
        tp = onnx_bridge.type_to_proto(e.type) if isinstance(e.type, TensorType) else onnx.TypeProto()
        outputs.append(helper.make_value_info(have, tp))
    # Node names unique in the graph, as onnxruntime insists: the nodes byoc.gradient adds
    # share the span of the forward node they belong to ("fc/grad").
    taken: set[str] = set()
    for node in nodes:
        if node.name:
            node.name = unique(node.name, taken)
    return helper.make_graph(nodes, name, inputs, outputs, initializer=inits)


def _node(call: Call, value_name: dict[Expr, str], names: _Names,
          functions: dict[str, tuple[str, int]]) -> tuple[onnx.NodeProto, list[str]]:
    ins = ["" if a is None else value_name[a] for a in call.args]
    if isinstance(call.op, GlobalVar) and call.op.name in functions:
        domain, n_out = functions[call.op.name]
        base = call.span.outputs if call.span else ()
        outs = [names.take((base[i] if i < len(base) else "") or f"{call.op.name}_out{i}")
                for i in range(n_out)]
        return helper.make_node(call.op.name, ins, outs, name=call.op.name, domain=domain), outs
    if not isinstance(call.op, str):
        raise ValueError(f"call of {call.op_name}: only ONNX ops and module functions export")
    span_outs = call.span.outputs if call.span else ()
    default = call.span.name if call.span else call.op_name
    outs = [names.take((span_outs[i] if i < len(span_outs) else "") or default)
            for i in range(onnx_bridge.num_outputs(call))]
    bodies = [v for v in call.attrs.values() if isinstance(v, Function)]
    n_caps = max((int(f.attrs.get("captures", 0)) for f in bodies), default=0)
    sub_names = _Names(names)

    def graph(f: Function) -> onnx.GraphProto:
        c = int(f.attrs.get("captures", 0))
        cap = {p: n for p, n in zip(f.params[len(f.params) - c:], ins[len(ins) - c:])}
        n_out = len(f.body.fields) if isinstance(f.body, Tuple) else 1
        # Regions inside bodies (issue 8) are module functions too: their calls export alike.
        return function_to_graph(f, "body", names=sub_names, captured=cap,
                                 output_names=[None] * n_out, functions=functions)

    node = onnx_bridge.node_proto(call, ins[:len(ins) - n_caps], outs,
                                  name=call.span.name if call.span else "", graph=graph)
    return node, outs


def module_to_onnx(mod: IRModule) -> onnx.ModelProto:
    """The module as ONNX: main as the graph, each external function a local function.

    A region compiled by backend B becomes a FunctionProto in domain ``byoc.B`` named after the
    region, and main calls it as a node: Netron shows it as one node you can open, and
    onnxruntime runs it (inlining the function).
    """
    opsets = dict(mod.attrs.get("opset_imports") or {"": CANONICAL_OPSET})
    functions: dict[str, tuple[str, int]] = {}
    protos = []
    for fname, func in mod.functions.items():
        if fname == "main":
            continue
        domain = f"byoc.{func.attrs.get('Compiler') or 'host'}"
        n_out = len(func.body.fields) if isinstance(func.body, Tuple) else 1
        functions[fname] = (domain, n_out)
        protos.append(_function_proto(func, fname, domain, opsets))
        opsets.setdefault(domain, 1)
    graph = function_to_graph(mod.main, mod.attrs.get("graph_name") or "main", functions=functions)
    model = _model(graph, opsets)
    model.functions.extend(protos)
    return model


def _function_proto(func: Function, name: str, domain: str, opsets: dict[str, int]) -> onnx.FunctionProto:
    """A FunctionProto for an external function (initializers become Constant nodes)."""
    n_out = len(func.body.fields) if isinstance(func.body, Tuple) else 1
    graph = function_to_graph(func, name, output_names=[None] * n_out)
    nodes = [helper.make_node("Constant", [], [t.name], value=t) for t in graph.initializer]
    nodes += list(graph.node)
    # Function inputs and outputs are plain names; a value that is both needs an Identity.
    imports = [helper.make_opsetid(d, v) for d, v in opsets.items() if not d.startswith("byoc.")]
    return helper.make_function(domain, name, [i.name for i in graph.input],
                                [o.name for o in graph.output], nodes, imports)


def export_function(func: Function, opsets: dict[str, int] | None = None, *,
                    input_names: list[str] | None = None,
                    output_names: list[str | None] | None = None) -> onnx.ModelProto:
    """One function as a standalone ONNX model (its params as graph inputs). Without
    ``opsets``: the canonical opset, and version 1 of every other domain its ops are in."""
    graph = function_to_graph(func, "function", input_names=input_names, output_names=output_names)
    return _model(graph, opsets or _opsets_of(graph))


def _opsets_of(graph: onnx.GraphProto) -> dict[str, int]:
    opsets = {"": CANONICAL_OPSET}
    for node in graph.node:
        opsets.setdefault(node.domain, 1)
    return opsets


def _model(graph: onnx.GraphProto, opsets: dict[str, int]) -> onnx.ModelProto:
    # ir_version 10 is what onnxruntime 1.20+ and onnx.reference both accept.
    return helper.make_model(graph, ir_version=10,
                             opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])

