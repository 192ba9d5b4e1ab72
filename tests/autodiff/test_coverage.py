"""The rule table: every rule is in the op registry, every op the issue names has one, and
every rule has a finite-difference check in the rule tests."""

from __future__ import annotations

import glob
import os

import byoc
from byoc.autodiff.rules import GRADIENTS
from byoc.autodiff.rules.elementwise import UNARY

REQUIRED = """Add Sub Mul Div Pow Max Min Sum Mean Where Cast MatMul Gemm Conv MaxPool AveragePool
GlobalAveragePool BatchNormalization LayerNormalization Relu LeakyRelu Sigmoid Tanh Gelu Erf
Softmax LogSoftmax SoftmaxCrossEntropyLoss Reshape Flatten Transpose Concat Split Slice Gather
ReduceMean ReduceSum Exp Log Sqrt Neg Abs Identity Expand Squeeze Unsqueeze""".split()


def test_the_registry_carries_each_rule_as_a_field():
    for name, rule in GRADIENTS.items():
        assert byoc.op.get(name).gradient is rule, name
    assert byoc.op.get("TopK").gradient is None


def test_every_op_the_issue_names_has_a_rule():
    assert [op for op in REQUIRED if op not in GRADIENTS] == []


def test_every_rule_has_a_finite_difference_check():
    here = os.path.dirname(__file__)
    sources = "".join(open(p).read() for p in glob.glob(os.path.join(here, "test_*_rules.py")))
    # test_unary runs every UNARY entry; the others are named in some check
    unchecked = [op for op in GRADIENTS if op not in UNARY and f'"{op}"' not in sources
                 and f"op.{op}(" not in sources]
    assert unchecked == []
