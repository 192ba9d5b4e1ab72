"""Nothing byoc is given to read makes it hang or read without bound (byoc/files/reading.py,
byoc/files/arrays.py): a FIFO or device where a model, an input, external data or a case file
is wanted is refused at once; a .npy header is checked against its file and byoc's allocation
limit before anything is allocated. The CLI runs under a 6 GB address-space limit
(``run_cli``), and a hang would end in its timeout."""

from __future__ import annotations

import io
import os
import re
import shutil
import struct
import zipfile

import numpy as np
import onnx
import pytest

import byoc
from byoc.errors import InputError
from byoc.files.arrays import load_arrays
from tests.bad_inputs.test_bad_models import assert_refused, run_cli


@pytest.fixture
def work(tmp_path):
    """The embedded model as m.onnx, a FIFO, and a symlink to /dev/zero, in the CLI's cwd."""
    from byoc.cli import default_model_path

    shutil.copy(default_model_path(), tmp_path / "m.onnx")
    os.mkfifo(tmp_path / "fifo")
    os.symlink("/dev/zero", tmp_path / "zero")
    return tmp_path


@pytest.mark.parametrize("args,needle", [
    (("run", "fifo"), "model: 'fifo' is a FIFO (named pipe), not a regular file"),
    (("info", "zero"), "model: 'zero' is a character device, not a regular file"),
    (("run", "."), "model: '.' is a folder, not a regular file"),
    (("run", "m.onnx", "--input", "image=fifo"), "--input image: 'fifo' is a FIFO"),
    (("run", "m.onnx", "--input", "image=zero"), "--input image: 'zero' is a character device"),
    (("run", "m.onnx", "--input", "fifo"), "--input fifo: 'fifo' is a FIFO"),
])
def test_a_fifo_or_device_is_refused_at_once(work, args, needle):
    assert_refused(run_cli(*args, cwd=work), needle)


def test_a_model_file_bigger_than_protobuf_parses_is_not_read(tmp_path):
    """A 3 GB file (sparse: it takes no room) was read whole, then found not to parse."""
    with open(tmp_path / "big.onnx", "wb") as f:
        f.truncate(3 << 30)
    with pytest.raises(byoc.errors.ModelError, match=r"model: '.*big.onnx' holds "
                       r"3,221,225,472 bytes, more than the 2,147,483,647 it may \(protobuf's "
                       r"limit for one message: bigger weights go in external data files\)"):
        byoc.load_onnx(str(tmp_path / "big.onnx"))


def test_external_data_that_is_a_fifo_is_refused(tmp_path):
    from tests.bad_inputs.make_corpus import external

    os.mkfifo(tmp_path / "w.bin")
    onnx.save(external("w.bin"), tmp_path / "m.onnx")
    assert_refused(run_cli("run", "m.onnx", cwd=tmp_path),
                   "external data file 'w.bin' is a FIFO (named pipe), not a regular file")


def test_a_case_file_that_is_a_fifo_is_refused(work):
    r = run_cli("extract", "m.onnx", "--backend", "reference", "--region", "0", "-o", "case",
                cwd=work)
    assert r.returncode == 0, r.stderr
    os.unlink(work / "case" / "test_data_set_0" / "input_0.pb")
    os.mkfifo(work / "case" / "test_data_set_0" / "input_0.pb")
    assert_refused(run_cli("repro", "case", "--backend", "reference", cwd=work),
                   "input_0.pb' is a FIFO")


def _tensor_file(path, dims, **data) -> None:
    t = onnx.TensorProto(name="image", data_type=onnx.TensorProto.FLOAT, dims=dims, **data)
    if "external_data" in data:
        t.data_location = onnx.TensorProto.EXTERNAL
    path.write_bytes(t.SerializeToString())


def test_a_case_file_declaring_more_than_it_holds_or_external_data_is_refused(tmp_path):
    """Was `internal error: ValueError`; external data would have onnx open a file the case
    names (a FIFO there blocks)."""
    from byoc.cli import default_model_path
    from byoc.extract import extract, load_case
    from byoc.inputs import random_inputs

    case = tmp_path / "case"
    mod = byoc.load_onnx(default_model_path())
    extract(mod, "reference", str(case), random_inputs(mod.main, {"batch": 1}), region=0)
    pb = case / "test_data_set_0" / "input_0.pb"
    os.mkfifo(tmp_path / "fifo")
    for data, needle in [
            ({"dims": [100000, 100000, 10], "raw_data": b"\0" * 4},
             "tensor 'image' (shape [100000, 100000, 10]): its data does not match"),
            ({"dims": [-1, 3], "float_data": [0.0] * 3}, "has a negative dim: [-1, 3]"),
            ({"dims": [1, 3, 32, 32], "external_data": [onnx.StringStringEntryProto(
                key="location", value="../fifo")]}, "points to external data")]:
        _tensor_file(pb, **data)
        with pytest.raises(InputError, match=re.escape(needle)):
            load_case(str(case))


# -- .npy headers ----------------------------------------------------------------------------------


def _npy(header: bytes, version=(1, 0), data: bytes = b"") -> bytes:
    width = "<H" if version == (1, 0) else "<I"
    return b"\x93NUMPY" + bytes(version) + struct.pack(width, len(header)) + header + data


def _header(shape, descr="<f4") -> bytes:
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    return (text + " " * (63 - len(text) % 64) + "\n").encode()


def test_a_small_npy_declaring_a_huge_shape_is_refused_before_allocating(work):
    """200 bytes declaring 10^10 floats: np.load allocated 37 GiB first."""
    (work / "huge.npy").write_bytes(_npy(_header((100000, 100000)), data=b"\0" * 100))
    assert_refused(run_cli("run", "m.onnx", "--input", "image=huge.npy", cwd=work),
                   "its header declares shape [100000, 100000] of float32 (40,000,000,000 bytes),"
                   " but it holds only 100 bytes of data")


def test_a_header_length_of_4_gb_is_refused(work):
    (work / "long.npy").write_bytes(b"\x93NUMPY\x02\x00" + struct.pack("<I", 2**32 - 1) + b"{}")
    assert_refused(run_cli("run", "m.onnx", "--input", "image=long.npy", cwd=work),
                   "its .npy header claims 4,294,967,295 bytes, more than the file holds")


def test_an_array_beyond_byocs_allocation_limit_is_refused(work, monkeypatch):
    np.save(work / "x.npy", np.zeros((1, 3, 32, 32), np.float32))
    monkeypatch.setenv("BYOC_MAX_TENSOR_BYTES", "1000")
    assert_refused(run_cli("run", "m.onnx", "--input", "image=x.npy", cwd=work),
                   "would take 12,288 bytes, more than the 1,000 byoc may allocate")


@pytest.mark.parametrize("content,needle", [
    (b"", "is not a .npy or .npz file"),
    (b"\x93NUMPY\x09\x00", "format version 9.0 is unknown"),
    (b"\x93NUMPY\x01\x00\x10", "the .npy header is cut short"),
    (_npy(b"{'descr': 'nonsense'}\n"), "its .npy header cannot be read"),
    (_npy(_header((2,), "|O")), "holds Python objects (a pickle), which byoc never loads"),
])
def test_odd_npy_files_are_refused(tmp_path, content, needle):
    (tmp_path / "a.npy").write_bytes(content)
    with pytest.raises(InputError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        load_arrays(tmp_path / "a.npy", "--input a")


def test_npy_versions_and_orders_load_as_numpy_wrote_them(tmp_path):
    for k, array in enumerate([np.arange(6, dtype=">f8").reshape(2, 3), np.asfortranarray(
            np.arange(6, dtype=np.int32).reshape(2, 3)), np.zeros((0, 4), np.float32),
            np.float32(3)]):
        buf = io.BytesIO()
        np.lib.format.write_array(buf, np.asanyarray(array), version=(2, 0) if k else (1, 0))
        (tmp_path / f"{k}.npy").write_bytes(buf.getvalue())
        (got,) = load_arrays(tmp_path / f"{k}.npy", "x").values()
        assert got.dtype == array.dtype and np.array_equal(got, array)


def test_an_npz_member_is_checked_like_a_npy(tmp_path):
    with zipfile.ZipFile(tmp_path / "x.npz", "w") as z:
        z.writestr("image.npy", _npy(_header((100000, 100000)), data=b"\0" * 100))
    with pytest.raises(InputError, match="array 'image': its header declares shape"):
        load_arrays(tmp_path / "x.npz", "--input x.npz")
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(InputError, match="is not a readable .npz file"):
        load_arrays(tmp_path / "bad.npz", "--input bad.npz")


def test_an_npz_whose_members_together_exceed_the_limit_is_refused_before_any_is_read(
        tmp_path, monkeypatch, capsys):
    """Three members of 4,000 bytes each fit a limit of 10,000 one by one, not together: the
    total is checked from their headers before any array is read (a 1 KB compressed file)."""
    import numpy.lib.format as npy_format

    np.savez_compressed(tmp_path / "x.npz", a=np.zeros(1000, np.float32),
                        b=np.zeros(1000, np.float32), c=np.zeros(1000, np.float32))
    assert (tmp_path / "x.npz").stat().st_size < 2000
    monkeypatch.setenv("BYOC_MAX_TENSOR_BYTES", "10000")
    read = npy_format.read_array
    monkeypatch.setattr(npy_format, "read_array", lambda *a, **k: pytest.fail("an array was read"))
    with pytest.raises(InputError, match=r"its 3 arrays would take 12,000 bytes together, more "
                                         r"than the [0-9,]+ byoc may allocate"):
        load_arrays(tmp_path / "x.npz", "--input x.npz")
    monkeypatch.setattr(npy_format, "read_array", read)
    monkeypatch.setenv("BYOC_MAX_TENSOR_BYTES", "12000")  # the limit itself is allowed
    assert sorted(load_arrays(tmp_path / "x.npz", "--input x.npz")) == ["a", "b", "c"]
    monkeypatch.setenv("BYOC_MAX_TENSOR_BYTES", "10000")
    from onnx import helper

    from byoc.cli import main
    from tests.conftest import FLOAT, make_model

    model = make_model([helper.make_node("Sum", ["a", "b", "c"], ["y"], name="sum")],
                       [(n, FLOAT, [1000]) for n in "abc"], [("y", FLOAT, [1000])])
    onnx.save(model, tmp_path / "m.onnx")
    assert main(["run", str(tmp_path / "m.onnx"), "--input", str(tmp_path / "x.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "12,000 bytes together" in err, err


def test_npz_names_are_checked_before_any_array_is_read(tmp_path):
    np.savez(tmp_path / "x.npz", a=np.zeros(3), b=np.zeros(2))
    seen = []

    def refuse(names):
        seen.append(names)
        raise InputError("no")

    with pytest.raises(InputError, match="no"):
        load_arrays(tmp_path / "x.npz", "x", refuse)
    assert seen == [["a", "b"]]


# -- the API ---------------------------------------------------------------------------------------


def test_a_ragged_list_through_the_api_names_the_input():
    exe = byoc.build(byoc.load_onnx(byoc.cli.default_model_path()))
    with pytest.raises(InputError, match="input 'image' cannot be made into an array: .*"
                                         "inhomogeneous"):
        exe.run({"image": [[1.0, 2.0], [3.0]]})


def test_a_tune_cache_entry_that_is_a_fifo_or_device_is_a_miss(tmp_path):
    """The measurement cache (byoc/tuning/cache.py) reads only a regular file of a sane size."""
    from byoc.tuning import MeasurementCache

    cache = MeasurementCache(tmp_path)
    for key, make in (("ab" * 32, os.mkfifo), ("cd" * 32, lambda p: os.symlink("/dev/zero", p))):
        path = cache.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        make(path)
        assert cache.get(key) is None


def test_the_openvino_answers_file_that_is_a_fifo_is_not_read(tmp_path):
    """backends/openvino/answers.py keeps OpenVINO's verdicts in the cache folder."""
    answers = pytest.importorskip("byoc.backends.openvino.answers")
    os.mkfifo(tmp_path / "answers.json")
    assert answers._read(tmp_path / "answers.json") == {"verdicts": {}, "held": {}}

