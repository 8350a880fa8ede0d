"""Children that must catch a moment (a call under way when it is interrupted or
interfered with): each is run up to a few times, with more work each time, until a
run catches it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable


def sigint_default() -> None:
    """Runs in each child before it starts Python: SIGINT back to its default action.
    A child inherits an ignored SIGINT (some library in this test process may have
    ignored it), and Python then installs no KeyboardInterrupt handler, so Ctrl-C
    could not be tested."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_until(
    child: str,
    case: str,
    tmp_path: Path,
    caught: Callable[[dict[str, Any]], bool],
    *,
    sigint: bool = False,
    attempts: int = 3,
) -> dict[str, Any]:
    """Runs ``python -c child case <dir> <scale>`` with scale 1, 2, 4, ... until
    ``caught`` accepts the JSON the child printed last, and returns that result (the
    last one when no run caught the moment: the caller decides)."""
    result: dict[str, Any] = {}
    for attempt in range(attempts):
        tmp = tmp_path / f"attempt{attempt}"
        tmp.mkdir()
        proc = subprocess.run(
            [sys.executable, "-c", child, case, str(tmp), str(2**attempt)],
            capture_output=True,
            text=True,
            timeout=600,
            preexec_fn=sigint_default if sigint else None,
        )
        assert proc.returncode == 0, f"the child died ({proc.returncode}): {proc.stderr}"
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        if caught(result):
            return result
    return result
