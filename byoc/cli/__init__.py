"""The ``byoc`` command line: one module per command, each with a ``register(sub)`` that adds
its parser; ``common`` holds what they share.

Every error byoc raises on purpose becomes one line on stderr and exit code 2; a comparison
out of tolerance exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from . import bench, build, debug, info, partition, plan, report, run, tune
from .common import default_model_path, escaped, one_line

__all__ = ["main", "build_parser", "default_model_path"]

COMMANDS = (info, run, bench, partition, report, build, debug, tune, plan)


class Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line (it prints the usage first) and exit 2; the
    commands' parsers are of this class too (add_subparsers makes them so)."""

    def error(self, message: str):
        # argparse's messages are one line but for what the user typed (--x$'\n'y): escaped
        print(escaped(f"byoc: error: {message} (see {self.prog} --help)"), file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="byoc", description="Bring your own codegen to ONNX models.")
    sub = parser.add_subparsers(dest="command")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .interrupt import MESSAGE, Interrupts

    with Interrupts() as interrupts:
        try:
            return _main(argv)
        except KeyboardInterrupt:  # wherever it came: parsing, imports, a command's clean-up
            interrupts.handled.set()
            print(MESSAGE, file=sys.stderr)
            return 130


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        argv = ["run"]
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or an argument error already said in one line
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "fn", None):
        parser.print_help()
        return 2
    from ..errors import ByocError, ByocWarning

    warnings.simplefilter("ignore") if not os.environ.get("BYOC_WARNINGS") else None
    # byoc's own warnings (a damaged cache entry rebuilt) as one line each, like its errors.
    warnings.filterwarnings("always", category=ByocWarning)
    warnings.showwarning = show_warning
    from ..runtime import threads

    before = threads.configured()
    try:
        if getattr(args, "threads", None) is not None:  # every build of the command takes it
            threads.set_threads(args.threads)
        code = args.fn(args)
        sys.stdout.flush()  # a reader that went away (`byoc ... | head`) shows here, not at exit
        return code
    except BrokenPipeError:
        return closed_pipe()
    except ByocError as exc:
        print(one_line(f"byoc: error: {exc}"), file=sys.stderr)
        return 2
    except Exception as exc:  # a bug in byoc: still one line, and how to see more
        if os.environ.get("BYOC_TRACEBACK"):
            raise
        print(f"byoc: internal error: {type(exc).__name__}: {one_line(str(exc))} (set "
              "BYOC_TRACEBACK=1 for the traceback)", file=sys.stderr)
        return 2
    finally:
        threads.set_threads(before)  # main() called in-process leaves the setting as it was


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """byoc's own warnings as one ``byoc: warning:`` line; others (BYOC_WARNINGS=1) as Python
    shows them."""
    from ..errors import ByocWarning

    if issubclass(category, ByocWarning):
        print(one_line(f"byoc: warning: {message}"), file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def closed_pipe() -> int:
    """The reader of stdout is gone: end quietly, as a tool killed by SIGPIPE would (status
    128 + 13), with stdout pointed at /dev/null so the flush at exit has nowhere to fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":
    sys.exit(main())
