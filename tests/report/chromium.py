"""Headless Chromium driven over the DevTools protocol on a pipe: no Python dependency, no port.

    with Chromium() as page:               # None of this runs where chromium is not installed
        page.open("file:///tmp/report.html")
        page.wait_for("document.body.dataset.state === 'ready'")
        page.hover(120, 80)
        page.screenshot("shot.png")

Chromium's ``--remote-debugging-pipe`` reads NUL-terminated JSON commands on fd 3 and writes
replies and events on fd 4. Flags: those that work on a closed network as root (see the
project's machine notes): no sandbox, no GPU, no background connections, a fresh profile.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--remote-debugging-pipe"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    def __init__(self, width: int = 1400, height: int = 900, timeout: float = 60.0):
        self.width, self.height, self.timeout = width, height, timeout
        self.binary = find_chromium()
        if self.binary is None:
            raise FileNotFoundError("no chromium on PATH (Debian: apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="byoc-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds():  # in the child: the pipe ends on fd 3 and 4, as Chromium expects
            a = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [self.binary, *FLAGS, f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            preexec_fn=fds, close_fds=False, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._id = 0
        self._buffer = b""
        self.session: str | None = None
        self.errors: list[str] = []  # exceptions the page threw, and console errors

    # --- the protocol ------------------------------------------------------------------------

    def send(self, method: str, session: bool = True, **params):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise EOFError("chromium closed the pipe")
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def _event(self, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append(details.get("exception", {}).get("description")
                               or details.get("text", "exception"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                        for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(params["entry"].get("text", ""))

    # --- a page ------------------------------------------------------------------------------

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", session=False, url="about:blank")
        self.session = self.send("Target.attachToTarget", session=False,
                                 targetId=target["targetId"], flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)
        self.send("Page.navigate", url=url)

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except RuntimeError:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout:.0f} s for {expression}")
            time.sleep(0.1)

    def hover(self, x: float, y: float) -> None:
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def click(self, x: float, y: float) -> None:
        self.hover(x, y)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=1)

    def screenshot(self, path: str) -> None:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def cpu_seconds(self) -> float:
        """CPU time the browser's processes have used so far: unlike the clock, it does not grow
        when other work shares the machine."""
        tick = os.sysconf("SC_CLK_TCK")
        parents, used = {}, {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(pid)] = int(fields[1])
            used[int(pid)] = (int(fields[11]) + int(fields[12])) / tick
        total = 0.0
        for pid, seconds in used.items():
            p = pid
            while p in parents and p != self.proc.pid and p > 1:
                p = parents[p]
            if p == self.proc.pid:
                total += seconds
        return total

    # --- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False)
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait(timeout=10)
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
