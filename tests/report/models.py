"""Models for the report's tests: real ones from the zoo, hostile names, a 1,000-node graph."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.models.zoo import FILES
from tests.security.models import HOSTILE, named_model

BERT = FILES / "bert_tiny.onnx"
LOOP = FILES / "loop_running_sum.onnx"

# Strings that would be markup or script if a page let them through, then every string that has
# broken a printer before.
HTML_HOSTILE = [
    "</script><script>window.__pwned = 1</script>", '<img src=x onerror="window.__pwned=1">',
    "<!--", "]]>", "&lt;&amp;", "\u2028</SCRIPT >", "javascript:window.__pwned=1",
    '"><svg onload=window.__pwned=1>', "{{APP}}", "@@APP@@", *HOSTILE,
]


def hostile_model() -> onnx.ModelProto:
    """The security tests' fixed graph named with HTML_HOSTILE, plus a string attribute."""
    model = named_model(HTML_HOSTILE)
    return model


def hostile_attribute_model() -> onnx.ModelProto:
    """One StringNormalizer whose name and attribute values would be markup."""
    node = helper.make_node("StringNormalizer", ["s"], ["</script>t"], name=HTML_HOSTILE[1],
                            stopwords=[HTML_HOSTILE[0], "<b>"], case_change_action="LOWER")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("</script>t", TensorProto.STRING, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def wide_model(n_nodes: int = 1000, width: int = 8, seed: int = 0) -> onnx.ModelProto:
    """About ``n_nodes`` nodes in blocks of MatMul, Add, Relu, Mul, with a Mod every block (no
    C backend takes it) so regions and host nodes alternate, and skip connections (Add) across
    blocks: a graph shaped like a real network's, for the layout's size."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x = "x"
    k = 0

    def name(op: str) -> str:
        nonlocal k
        k += 1
        return f"block{k // 6}/{op}_{k}"

    skip = x
    while len(nodes) < n_nodes:
        b = len(nodes)
        w, c = f"w{b}", f"c{b}"
        inits += [numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32)
                                          / width, w),
                  numpy_helper.from_array(rng.standard_normal(width).astype(np.float32), c)]
        outs = [f"v{b}_{j}" for j in range(6)]
        nodes += [
            helper.make_node("MatMul", [x, w], [outs[0]], name=name("MatMul")),
            helper.make_node("Add", [outs[0], c], [outs[1]], name=name("Add")),
            helper.make_node("Relu", [outs[1]], [outs[2]], name=name("Relu")),
            helper.make_node("Mod", [outs[2], c], [outs[3]], name=name("Mod"), fmod=1),
            helper.make_node("Mul", [outs[3], outs[1]], [outs[4]], name=name("Mul")),
            helper.make_node("Add", [outs[4], skip], [outs[5]], name=name("Skip")),
        ]
        skip, x = x, outs[5]
    graph = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             ["batch", width])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT,
                                                             ["batch", width])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
