"""A channel copied into a padded plane in scratch, so that window loops need no bounds checks.

Depthwise convs pad with zeros, max pools with -infinity. The plane reaches as far as the last
output's window does, so every tap of every output lands inside it.
"""

from __future__ import annotations

from ..emitter import Emit

MAX_TAPS = 64  # windows larger than this are left to loops that check bounds


def plane_size(dims: list[int]) -> tuple[int, int]:
    """(height, width) of the plane for H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW."""
    h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw = dims
    return (max(h + ph, (oh - 1) * sh + (kh - 1) * dh + 1),
            max(w + pw, (ow - 1) * sw + (kw - 1) * dw + 1))


def emit_plane(ctx: Emit, channel: str, dims: list[int], fill: str) -> str:
    """Copy the channel at C pointer ``channel`` into a plane filled with ``fill``; returns the
    plane's pointer (``p``, declared in the current block)."""
    h, w, _, _, _, _, _, _, ph, pw, _, _ = dims
    hp, wp = plane_size(dims)
    src = ctx.src
    src.line(f"float *restrict p = {ctx.scratch(4 * hp * wp)};")
    # the border filled, the channel copied in: each element of the plane written once
    if ph:
        src.line(f"for (long i = 0; i < {ph * wp}; i++) p[i] = {fill};")
    if hp > ph + h:
        src.line(f"for (long i = {(ph + h) * wp}; i < {hp * wp}; i++) p[i] = {fill};")
    with src.block(f"for (long ih = 0; ih < {h}; ih++)"):
        src.line(f"float *restrict row = p + (ih + {ph}) * {wp};")
        if pw:
            src.line(f"for (long j = 0; j < {pw}; j++) row[j] = {fill};")
        src.line(f"memcpy(row + {pw}, {channel} + ih * {w}, {4 * w});")
        if wp > pw + w:
            src.line(f"for (long j = {pw + w}; j < {wp}; j++) row[j] = {fill};")
    return "p"


def emit_window_rows(ctx: Emit, dims: list[int], out_row: str, combine) -> None:
    """For each output row: pointers to the plane rows its windows read, and one loop over the
    row assigning ``combine(terms)``, where terms are the C reads of the taps in order."""
    _, _, oh, ow, kh, kw, sh, sw, _, _, dh, dw = dims
    _, wp = plane_size(dims)
    src = ctx.src
    with src.block(f"for (long oh = 0; oh < {oh}; oh++)"):
        src.line(f"float *restrict yr = {out_row};")
        for i in range(kh):
            src.line(f"const float *restrict r{i} = p + (oh * {sh} + {i * dh}) * {wp};")
        terms = [f"r{i}[ow * {sw} + {j * dw}]" for i in range(kh) for j in range(kw)]
        src.line(f"for (long ow = 0; ow < {ow}; ow++) yr[ow] = {combine(terms)};")
