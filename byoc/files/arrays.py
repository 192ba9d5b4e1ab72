"""``.npy`` and ``.npz`` files read with every size checked before anything is allocated.

``np.load`` trusts a file's header: 200 bytes declaring a shape of 10^10 floats make it
allocate 40 GB before it finds the data missing, and a header length of 4 GB is read as a
header. Here the header's own length is checked against the file, then the array's size
against what the file (or the zip member) holds and against byoc's allocation limit
(``runtime/limits.py``); object arrays (pickles) are refused, never loaded.
"""

from __future__ import annotations

import math
import os
import struct
import zipfile
from collections.abc import Callable

import numpy as np
import numpy.lib.format as npy_format

from ..errors import InputError
from ..runtime.limits import room, too_big
from .reading import open_regular

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip with members, an empty zip
MAX_HEADER_BYTES = 1 << 16  # numpy writes headers of a few hundred bytes


def _header(f, size: int, where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """The (shape, fortran_order, dtype) of the ``.npy`` at ``f``'s position, every length
    checked against ``size``, the bytes from there to the end of the array's file."""
    start = f.tell()
    lead = f.read(8)
    if len(lead) < 8 or not lead.startswith(NPY_MAGIC):
        raise InputError(f"{where} is not a .npy file")
    version = (lead[6], lead[7])
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise InputError(f"{where}: .npy format version {version[0]}.{version[1]} is unknown")
    width = 2 if version == (1, 0) else 4
    raw = f.read(width)
    if len(raw) < width:
        raise InputError(f"{where}: the .npy header is cut short")
    length = struct.unpack("<H" if width == 2 else "<I", raw)[0]
    if length > min(MAX_HEADER_BYTES, size - 8 - width):
        raise InputError(f"{where}: its .npy header claims {length:,} bytes, more than the file "
                         f"holds ({size:,}) or a header needs")
    f.seek(start + 8)
    try:
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(f, MAX_HEADER_BYTES)
        elif version == (2, 0):
            shape, fortran, dtype = npy_format.read_array_header_2_0(f, MAX_HEADER_BYTES)
        else:
            shape, fortran, dtype = npy_format._read_array_header(f, version, MAX_HEADER_BYTES)
    except (ValueError, TypeError, SyntaxError, struct.error, UnicodeDecodeError) as exc:
        raise InputError(f"{where}: its .npy header cannot be read ({exc})") from None
    if dtype.hasobject:
        raise InputError(f"{where} holds Python objects (a pickle), which byoc never loads")
    need = math.prod(shape) * dtype.itemsize
    left = size - (f.tell() - start)
    if need > left:
        raise InputError(f"{where}: its header declares shape {list(shape)} of {dtype} "
                         f"({need:,} bytes), but it holds only {left:,} bytes of data")
    why = too_big(shape, dtype.itemsize)
    if why:
        raise InputError(f"{where}: {why}")
    return shape, fortran, dtype


def _read(f, size: int, where: str) -> np.ndarray:
    """The array of the ``.npy`` at ``f``'s start, its header checked first."""
    start = f.tell()
    _header(f, size, where)
    f.seek(start)
    try:
        return npy_format.read_array(f, allow_pickle=False, max_header_size=MAX_HEADER_BYTES)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{where}: cannot be read ({exc})") from None


def _check_total(archive: zipfile.ZipFile, names: list[str], members: list[zipfile.ZipInfo],
                 where: str) -> None:
    """Every member's header checked, and the bytes they declare together held to what byoc
    may allocate, before any array is read: each may fit while all of them do not."""
    total = 0
    for name, member in zip(names, members):
        with archive.open(member) as stream:
            shape, _, dtype = _header(stream, member.file_size, f"{where} array {name!r}")
        total += math.prod(shape) * dtype.itemsize
    left = room()
    if total > left:
        raise InputError(f"{where}: its {len(members)} arrays would take {total:,} bytes "
                         f"together, more than the {left:,} byoc may allocate "
                         f"(BYOC_MAX_TENSOR_BYTES, the address-space limit, free memory)")


def load_arrays(path: str | os.PathLike, what: str,
                check_names: Callable[[list[str]], None] | None = None
                ) -> dict[str | None, np.ndarray]:
    """A ``.npy`` file as ``{None: array}``, a ``.npz`` as ``{name: array}`` (told apart by
    their bytes, not their names). ``check_names`` sees a ``.npz``'s names before any array is
    read (to refuse a name before allocating for it). ``what`` names the file in errors."""
    with open_regular(path, what, error=InputError) as f:
        size = os.fstat(f.fileno()).st_size
        where = f"{what}: {os.fspath(path)!r}"
        lead = f.read(6)
        f.seek(0)
        if lead == NPY_MAGIC:
            return {None: _read(f, size, where)}
        if lead[:4] not in ZIP_MAGICS:
            raise InputError(f"{where} is not a .npy or .npz file")
        try:
            with zipfile.ZipFile(f) as archive:
                members = [m for m in archive.infolist() if not m.is_dir()]
                names = [m.filename[:-4] if m.filename.endswith(".npy") else m.filename
                         for m in members]
                if len(set(names)) != len(names):
                    raise InputError(f"{where} holds one name twice")
                if check_names is not None:
                    check_names(names)
                _check_total(archive, names, members, where)
                out: dict[str | None, np.ndarray] = {}
                for name, member in zip(names, members):
                    with archive.open(member) as stream:
                        out[name] = _read(stream, member.file_size, f"{where} array {name!r}")
                return out
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError,
                OSError) as exc:
            raise InputError(f"{where} is not a readable .npz file ({exc})") from None
