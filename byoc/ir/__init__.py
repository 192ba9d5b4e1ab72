"""byoc's IR: immutable expressions, types, spans, modules, walks, text and equality."""

from .equality import assert_structural_equal, structural_diff, structural_equal
from .expr import (DEFAULTS, NO_ATTRS, Call, Constant, Expr, Function, GlobalVar, Tuple, TupleGetItem, Var,
                   children, with_children)
from .module import IRModule
from .printer import astext
from .span import Span
from .traversal import post_order, rewrite, users
from .types import UNKNOWN, Dim, OpaqueType, TensorType, TupleType, Type, incomplete

__all__ = [
    "Call", "Constant", "DEFAULTS", "Dim", "Expr", "Function", "GlobalVar", "IRModule", "NO_ATTRS", "OpaqueType", "Span",
    "TensorType", "Tuple", "TupleGetItem", "TupleType", "Type", "UNKNOWN", "Var", "astext",
    "assert_structural_equal", "children", "incomplete", "post_order", "rewrite", "structural_diff",
    "structural_equal", "users", "with_children",
]
