"""Run ONNX's node conformance suite against byoc; print counts, rewrite the failure list.

    python tests/conformance/run_suite.py          # counts, progress, and expected_failures.txt

The list keeps, for each failing case, the reason from the earlier list if there was one (a
person wrote it), else the error's last line.
"""

from __future__ import annotations

import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FAILURES = os.path.join(HERE, "expected_failures.txt")


def read_failures(path: str = FAILURES) -> dict[str, str]:
    """{case name: reason} from the list (lines 'name<TAB>reason', '#' comments)."""
    out: dict[str, str] = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if line and not line.startswith("#"):
                    name, _, reason = line.partition("\t")
                    out[name.strip()] = reason.strip()
    return out


def node_suite(exclude: dict[str, str] | None = None):
    """The BackendTest's node-test case class for byoc on CPU, minus ``exclude``."""
    import onnx.backend.test

    import byoc.frontends.onnx.backend as byoc_backend

    bt = onnx.backend.test.BackendTest(byoc_backend, __name__)
    bt.include(r"^test_.*_cpu$")
    for name in exclude or {}:
        bt.exclude(f"^{name}$")
    return bt.test_cases["OnnxBackendNodeModelTest"]


class _Progress(unittest.TextTestResult):
    def startTest(self, test):
        super().startTest(test)
        if self.testsRun % 200 == 0:
            print(f"  {self.testsRun} cases...", file=sys.stderr, flush=True)


def main() -> int:
    import warnings

    warnings.simplefilter("ignore")
    old = read_failures()
    cls = node_suite()
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(cls)
    start = time.time()
    with open(os.devnull, "w") as sink:
        result = unittest.TextTestRunner(stream=sink, resultclass=_Progress, verbosity=0).run(suite)
    ran = result.testsRun - len(result.skipped)
    failed = {t.id().rsplit(".", 1)[-1]: tb.strip().splitlines()[-1][:200]
              for t, tb in result.failures + result.errors}
    print(f"{ran - len(failed)} passed, {len(failed)} failed (of {ran} CPU node cases, "
          f"{time.time() - start:.0f} s)")
    with open(FAILURES + ".tmp", "w") as f:
        f.write("# ONNX node conformance cases byoc fails, with the reason. Written by\n"
                "# tests/conformance/run_suite.py; edit reasons by hand, they are kept.\n")
        for name in sorted(failed):
            f.write(f"{name}\t{old.get(name) or failed[name]}\n")
    os.replace(FAILURES + ".tmp", FAILURES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
