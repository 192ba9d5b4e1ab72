"""Models whose every string is hostile, and their twins with plain names, for the tests here.

``named_model(names)`` is one fixed graph (every backend takes all of it) whose node names,
tensor names, initializer names, graph name, doc strings and producer come from ``names``;
``plain_model()`` is the same graph named ``n0``, ``n1``... A test compares what byoc writes
for the two: hostile strings may change the text inside quotes and comments, never its shape.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Each is a way a string has broken a printer, a parser, a shell, a path or a terminal.
HOSTILE = [
    'quo"te', "it's", "*/ int main(void) { return 1; } /*", "line\nbreak", "cr\r\nlf",
    "back\\slash\\", "#include <stdio.h>", "#define x y", "../../etc/passwd", "/abs/path",
    "C:\\Windows\\win.ini", "..", ".", "x" * 10_000, "\x1b[2J\x1b]0;title\x07", "\u2028\u0085",
    "tab\there", "??=trigraph??/", "\x01\x02\x7f\x1f", "é漢字🙂\u202e", "$(rm -rf /)", "`id`",
    "%s%n%x", "{0}{}", "' OR 1=1 --", "<script>", "a/b\\c", "//comment", "\\\n", "",
]
FRAGMENTS = ["int main", "passwd", "rm -rf", "#include <stdio", "#define x", "$(", "`id`",
             "win.ini", "<script>", "title"]  # what must never reach C code or a command line
WIDTH = 4


def named_model(names: list[str]) -> onnx.ModelProto:
    """The fixed graph, named from ``names`` (recycled; tensor names made unique)."""
    pick = itertools.cycle(names)
    tensors: set[str] = set()

    def tensor() -> str:
        base = next(pick)
        name, k = base or "empty", 0
        while name in tensors:
            k += 1
            name = f"{base}#{k}"
        tensors.add(name)
        return name

    x, c, w = tensor(), tensor(), tensor()
    values = [tensor() for _ in range(9)]
    n = itertools.islice(itertools.cycle(names), len(tensors), None)  # the others first
    nodes = [
        helper.make_node("Neg", [x], [values[0]], name=next(n)),
        helper.make_node("Add", [values[0], c], [values[1]], name=next(n)),
        helper.make_node("MatMul", [values[1], w], [values[2]], name=next(n)),
        helper.make_node("Split", [values[2]], [values[3], values[4]], name=next(n), axis=1,
                         num_outputs=2),
        helper.make_node("Relu", [values[3]], [values[5]], name=next(n)),
        helper.make_node("Abs", [values[4]], [values[6]], name=next(n)),
        helper.make_node("Tanh", [values[5]], [values[7]], name=next(n)),
        helper.make_node("Sigmoid", [values[6]], [values[8]], name=next(n)),
    ]
    for node in nodes:
        node.doc_string = next(n)
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        nodes, next(n), [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, WIDTH])],
        [helper.make_tensor_value_info(v, TensorProto.FLOAT, [2, 2])
         for v in (values[7], values[8])],
        [numpy_helper.from_array(rng.standard_normal(WIDTH).astype(np.float32), c),
         numpy_helper.from_array(rng.standard_normal((WIDTH, 4)).astype(np.float32), w)])
    graph.doc_string = next(n)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10,
                             producer_name=next(n), doc_string=next(n))


def plain_model() -> onnx.ModelProto:
    return named_model([f"n{k}" for k in range(len(HOSTILE))])


def hostile_model() -> onnx.ModelProto:
    return named_model(HOSTILE)


def input_of(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    x = model.graph.input[0].name
    return {x: np.linspace(-2, 2, 2 * WIDTH, dtype=np.float32).reshape(2, WIDTH)}
