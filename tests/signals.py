"""Children that Ctrl-C reaches: tests that press it must not inherit an ignored SIGINT.

A shell starts a background job (``pytest ... &``, some CI runners) with SIGINT ignored, and
an ignored signal stays ignored across exec, so Python in the child would never raise
KeyboardInterrupt and a test pressing Ctrl-C would wait for a process that cannot hear it.
A terminal's foreground job, which these tests stand for, has SIGINT at its default.
"""

import signal


def sigint_at_default() -> None:
    """``preexec_fn`` for a child the test will interrupt: SIGINT as a terminal gives it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
