"""Start `app.py` on a free local port and wait until it listens: the one helper the browser test, the dashboard
benchmarks and the screenshot script share."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_app(data_dir: str | Path | None = None, timeout_s: float = 120.0,
              log: IO[Any] | int = subprocess.DEVNULL) -> tuple[subprocess.Popen, str]:
    """(process, base URL) of `python3 app.py` on a free port; RuntimeError when it exits or does not listen in time."""
    port = free_port()
    cmd = [sys.executable, str(ROOT / "app.py"), "--port", str(port)]
    cmd += ["--data-dir", str(data_dir)] if data_dir else []
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=log,
                            stderr=subprocess.STDOUT if log is not subprocess.DEVNULL else subprocess.DEVNULL)
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"app.py exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc, f"http://127.0.0.1:{port}/"
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"app.py did not listen within {timeout_s:.0f} s")
