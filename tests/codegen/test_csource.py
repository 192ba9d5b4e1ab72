"""The C source builder: identifiers and comments made from any string are safe C."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from byoc.codegen import CSource, Names, comment, float_literal, int_literal, literal
from byoc.codegen.csource import NAME_LIMIT, escape_comment_text, shorten

IDENT = re.compile(r"[a-z][a-z0-9]*_[A-Za-z0-9_]*\Z")
NASTY = ["", "*/", "/*", "a\nb", "x\\", "#include <stdio.h>", '"; system("rm"); "', "??/",
         "\x00\x01", "\ud7ff\U0010ffff", "_", "__init", "int", "x" * 10_000]


@given(st.text())
def test_ident_is_a_c_identifier(name):
    ident = Names("v_").ident(name)
    assert IDENT.match(ident) and len(ident) <= 2 + 40 and "__" not in ident


@given(st.lists(st.text(), max_size=20))
def test_distinct_names_get_distinct_identifiers(names):
    n = Names("t_")
    idents = {name: n.ident(name) for name in names}
    assert len(set(idents.values())) == len(idents)
    assert all(n.ident(name) == ident for name, ident in idents.items())  # stable


def test_unique_never_repeats_and_prefixes_are_checked():
    n = Names("k_")
    assert [n.unique("w"), n.unique("w"), n.unique("w!")] == ["k_w", "k_w_2", "k_w_3"]
    assert n.ident("gpu_0/conv1") == "k_gpu_0_conv1"
    with pytest.raises(ValueError):
        Names("Bad")


@given(st.text())
def test_comment_text_is_inert(text):
    c = comment(text)
    inner = c[3:-3]
    assert c.startswith("/* ") and c.endswith(" */")
    assert "*/" not in inner and "/*" not in inner and inner.isascii() and inner.isprintable()
    assert "\\" not in inner.replace("\\x", "").replace("\\u", "").replace("\\U", "")
    assert "?" not in inner


def test_long_names_are_cut_with_a_hash():
    long = "a" * 10_000
    short = shorten(long)
    assert len(short) < NAME_LIMIT + 20 and short != shorten(long + "b")
    assert shorten("plain") == "plain"
    assert escape_comment_text("x*/y") == "x*\\x2fy"


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_the_compiler_sees_nasty_comments_and_identifiers_as_such(tmp_path):
    src = CSource()
    names = Names("v_")
    for k, text in enumerate(NASTY):
        src.comment(text)
        src.line(f"static const int {names.ident(text)} = {k};")
    with src.block("int count(void)"):
        src.line(f"return {' + '.join(names.ident(t) for t in NASTY)};")
    path = tmp_path / "nasty.c"
    path.write_text(src.text())
    done = subprocess.run(["cc", "-fsyntax-only", "-Wall", "-Werror", "-Wno-unused-const-variable",
                           str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_csource_blocks_indent_and_refuse_newlines():
    src = CSource()
    with src.block("void f(void)"):
        with src.block():
            src.line("return;")
    assert src.text() == "void f(void) {\n    {\n        return;\n    }\n}\n"
    with pytest.raises(ValueError):
        src.line("a;\n#include <x>")


@settings(max_examples=300)
@given(st.floats(width=32, allow_nan=True, allow_infinity=True))
def test_float_literals_read_back_exactly(value):
    text = float_literal(value)
    if np.isnan(value):
        assert text == "NAN"
    elif np.isinf(value):
        assert text == ("INFINITY" if value > 0 else "(-INFINITY)")
    else:
        assert text.endswith("f") and re.fullmatch(r"-?[0-9.e+-]+f", text)
        assert np.float32(float(text[:-1])) == np.float32(value)


def test_integer_and_bool_literals():
    assert int_literal(-(2**63)) == "INT64_MIN"
    assert int_literal(5) == "INT64_C(5)" and int_literal(5, "int32") == "5"
    assert literal(True, "bool") == "1" and literal(2.0, "float32") == "2.0f"
    assert literal(0.1, "float64") == "0.1"
