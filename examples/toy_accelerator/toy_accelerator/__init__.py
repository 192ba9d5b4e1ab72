"""A toy accelerator for byoc: it takes a few float32 ops and "compiles" each region it is given
into a straight-line program (a list of kernel calls over numbered slots), run by ``run``.

    pip install examples/toy_accelerator
    byoc.build(byoc.partition(byoc.load_onnx("model.onnx"), backends=["toy"])).run(inputs)
"""

import numpy as np

from byoc import register_backend
from byoc.backend import dtypes
from byoc.ir import Call, Constant, Tuple, post_order

KERNELS = {  # what the device can run, by ONNX op
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
    "Relu": lambda x: np.maximum(x, 0), "Tanh": np.tanh, "MatMul": np.matmul,
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)), "Sqrt": np.sqrt,
}


def compile_region(func):
    """Lower a region to steps (kernel, argument slots); slots 0..n-1 hold its inputs, then
    each step's result in order (a constant is a step that returns it)."""
    slot = {id(p): k for k, p in enumerate(func.params)}
    steps = []
    for e in post_order(func.body):
        if isinstance(e, (Constant, Call)):
            slot[id(e)] = len(func.params) + len(steps)
            if isinstance(e, Constant):
                steps.append((lambda value=e.value: value, []))
            else:
                steps.append((KERNELS[e.op], [slot[id(a)] for a in e.args]))
    results = func.body.fields if isinstance(func.body, Tuple) else (func.body,)
    outputs = [slot[id(r)] for r in results]

    def run(*arrays):
        values = list(arrays)
        for kernel, args in steps:
            values.append(np.asarray(kernel(*(values[a] for a in args)), dtype=np.float32))
        return tuple(values[k] for k in outputs)

    return run


def register():
    return register_backend("toy", supports=[*KERNELS, dtypes("float32")], compile=compile_region)
