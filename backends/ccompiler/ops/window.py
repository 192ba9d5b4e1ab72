"""Sliding-window geometry shared by Conv, ConvTranspose and the pools: kernel, strides,
dilations and the padding at each end, with auto_pad resolved for the concrete shapes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from byoc.ir import Call


@dataclass(frozen=True)
class Window:
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begin: tuple[int, ...]  # padding before each spatial dim
    end: tuple[int, ...]  # padding after it

    def as_2d(self) -> Window:
        """A 1-D window as a 2-D one over a height of 1, so one C helper serves both."""
        if len(self.kernel) == 2:
            return self
        return Window((1, *self.kernel), (1, *self.strides), (1, *self.dilations),
                      (0, *self.begin), (0, *self.end))


def window(call: Call, in_spatial: Sequence[int], kernel: Sequence[int],
           out_spatial: Sequence[int]) -> Window:
    """The window of a Conv or pool ``call`` producing ``out_spatial`` from ``in_spatial``."""
    n = len(in_spatial)
    strides = tuple(call.attrs.get("strides") or [1] * n)
    dilations = tuple(call.attrs.get("dilations") or [1] * n)
    auto = call.attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        total = [max((o - 1) * s + (k - 1) * d + 1 - i, 0)
                 for i, o, k, s, d in zip(in_spatial, out_spatial, kernel, strides, dilations)]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
        end = [t - b for t, b in zip(total, begin)]
    elif auto == "VALID":
        begin = end = [0] * n
    else:
        pads = list(call.attrs.get("pads") or [0] * (2 * n))
        begin, end = pads[:n], pads[n:]
    return Window(tuple(kernel), strides, dilations, tuple(begin), tuple(end))


def transpose_window(call: Call, in_spatial: Sequence[int], kernel: Sequence[int],
                     out_spatial: Sequence[int]) -> Window:
    """The window of a ConvTranspose: the padding is what makes ``out_spatial`` come out."""
    n = len(in_spatial)
    strides = tuple(call.attrs.get("strides") or [1] * n)
    dilations = tuple(call.attrs.get("dilations") or [1] * n)
    extra = list(call.attrs.get("output_padding") or [0] * n)
    auto = call.attrs.get("auto_pad", "NOTSET")
    pads = call.attrs.get("pads")
    if pads and auto == "NOTSET" and not call.attrs.get("output_shape"):
        begin, end = list(pads[:n]), list(pads[n:])
    else:
        total = [s * (i - 1) + e + (k - 1) * d + 1 - o for i, o, k, s, d, e in
                 zip(in_spatial, out_spatial, kernel, strides, dilations, extra)]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
        end = [t - b for t, b in zip(total, begin)]
    return Window(tuple(kernel), strides, dilations, tuple(begin), tuple(end))
