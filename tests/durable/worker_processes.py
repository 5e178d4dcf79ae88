"""Worker subprocesses (``worker.py``) that a test may SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


class Workers:
    """Worker subprocesses of one test; every one still running is killed at the end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, *args: str, wait_ready: bool = True, script: str = "worker.py") -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / script), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=HERE,
        )
        self.procs.append(proc)
        if wait_ready:
            assert proc.stdout is not None
            said = []
            for line in proc.stdout:  # engines may print their own lines first
                if line.strip() == "READY":
                    break
                said.append(line)
            else:
                raise AssertionError(f"worker {args[0]} did not start (said {''.join(said)!r})")
        return proc

    @staticmethod
    def kill(proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(120)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                self.kill(proc)
            if proc.stdout is not None:
                proc.stdout.close()
