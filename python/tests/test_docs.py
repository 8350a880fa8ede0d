"""The documentation's examples run as written: every fenced block marked
``<!-- run -->`` in README.md and docs/*.md runs, in order, in one temporary
directory per page (``python`` blocks with this interpreter, ``sh`` blocks with bash
and this environment's ``bin`` first on PATH, so ``zring`` and ``torchrun`` are the
installed ones). ``<!-- run: save NAME -->`` writes the block to NAME instead."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ZRING_SOURCE_ROOT") or Path(__file__).resolve().parents[2])
MARK = re.compile(r"^<!-- run(?:: save (?P<save>\S+))? -->\n```(?P<lang>\w+)[^\n]*\n(?P<body>.*?)^```", re.M | re.S)
PAGES = {
    "README.md": [],
    "python/README.md": [],
    "docs/python.md": [],
    "docs/torch.md": ["torch"],
    "docs/jax.md": ["jax"],
    "docs/loaderx.md": [],
    "docs/language-models.md": [],
    "docs/remote.md": [],
    "docs/images.md": ["PIL", "torch"],
}


def blocks(page):
    return [(m["save"], m["lang"], m["body"]) for m in MARK.finditer((ROOT / page).read_text())]


# The torch guide starts DataLoader worker processes under every start method (~40 s).
SLOW_PAGES = {"docs/torch.md"}


@pytest.mark.parametrize("page", [pytest.param(p, marks=pytest.mark.slow) if p in SLOW_PAGES else p for p in sorted(PAGES)])
def test_examples_run_in_order(page, tmp_path):
    for module in PAGES[page]:
        pytest.importorskip(module)
    found = blocks(page)
    assert found, f"{page} has no <!-- run --> blocks"
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("ZRING_THREADS", None)
    for k, (save, lang, body) in enumerate(found):
        if save:
            (tmp_path / save).write_text(body)
            continue
        if lang == "python":
            cmd = [sys.executable, "-c", body]
        elif lang in ("sh", "bash"):
            cmd = ["bash", "-euo", "pipefail", "-c", body]
        else:
            pytest.fail(f"{page}: block {k} is marked to run but is {lang}")
        r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{page} block {k} ({lang}) failed:\n{body}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
