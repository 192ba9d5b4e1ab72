"""Ctrl-C ends any command: exit status 130 and one line, ``byoc: interrupted``.

Python turns SIGINT into KeyboardInterrupt only between bytecodes of the main thread, so a
command inside onnxruntime's ``run`` (a Loop that never ends, offloaded) or another long C call
would not hear it. The signal's wakeup fd is written by the C-level handler whatever the main
thread does; a watchdog thread reads it and, if the main thread has not reached ``main``'s
handler ``GRACE_S`` seconds later (or on a second Ctrl-C), prints the same line and ends the
process. Temporaries it leaves are named by its pid (``byoc/files/scratch.py``): the next run
removes them.
"""

from __future__ import annotations

import os
import signal
import threading

GRACE_S = 3.0
MESSAGE = "byoc: interrupted"


class Interrupts:
    """A ``with`` block in which Ctrl-C always ends the command (see the module)."""

    def __init__(self):
        self.handled = threading.Event()
        self._pipe: tuple[int, int] | None = None
        self._old_fd = -1

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is not threading.main_thread():
            return self  # signals go to the main thread only: nothing to watch here
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return self  # someone else handles Ctrl-C (ignored, or an embedding program)
        read, write = os.pipe()
        os.set_blocking(write, False)
        try:
            self._old_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except ValueError:
            os.close(read)
            os.close(write)
            return self
        self._pipe = (read, write)
        threading.Thread(target=self._watch, args=(read,), name="byoc-interrupt",
                         daemon=True).start()
        return self

    def __exit__(self, *exc) -> bool:
        if self._pipe is not None:
            signal.set_wakeup_fd(self._old_fd)
            os.close(self._pipe[1])  # the watchdog's read ends, and so does it
            self._pipe = None
        return False

    def _watch(self, read: int) -> None:
        try:
            while True:
                data = os.read(read, 64)
                if not data:
                    return
                if signal.SIGINT not in data:
                    continue
                if data.count(signal.SIGINT) > 1 or not self._wait_for_main(read):
                    os.write(2, (MESSAGE + "\n").encode())
                    os._exit(130)
                return
        except OSError:
            return
        finally:
            os.close(read)

    def _wait_for_main(self, read: int) -> bool:
        """True if the main thread handles the interrupt in time; False on a second Ctrl-C or
        when the grace period ends first."""
        import select

        ready, _, _ = select.select([read], [], [], GRACE_S)
        if ready:
            more = os.read(read, 64)
            if signal.SIGINT in more:
                return self.handled.is_set()
            if not more:
                return True  # the command ended meanwhile
        return self.handled.is_set()
