"""Generating native code: a C source builder and the cffi build cache.

``csource`` writes C text and is the only way model strings reach it (sanitized identifiers,
escaped comments); ``build_cache`` compiles C into a cffi extension module, cached by content.
"""

from .build_cache import STATS, BuildStats, CacheError, CompileError, build, cache_root
from .csource import (CSource, Names, c_type, comment, float_literal, int_literal, literal,
                      shorten)

__all__ = ["STATS", "BuildStats", "CSource", "CacheError", "CompileError", "Names", "build",
           "c_type", "cache_root", "comment", "float_literal", "int_literal", "literal",
           "shorten"]
