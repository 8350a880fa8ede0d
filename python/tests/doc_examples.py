"""The Python examples of the docs, for ``mypy --strict``.

In README.md and docs/python.md, torch.md, jax.md, loaderx.md and images.md, a
```` ```python ```` block right after a ``<!-- run -->`` line (or a
``<!-- run: save NAME -->`` line, a script that a later block runs) is an example
that tests/test_docs.py runs (a page's marked blocks in order, in one directory)
and scripts/typecheck.sh type-checks; unmarked blocks are fragments. Every Python
block of docs/datasets.md and docs/ray.md is an example (their own tests,
test_docs_datasets.py and test_docs_ray.py, run them all).

``python doc_examples.py DIR`` writes each example to ``DIR/<doc>_<n>.py``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# ``<!-- run: save NAME -->`` blocks (a script the page runs later, such as
# torch.md's ddp_train.py under torchrun) are examples too.
_BLOCK = re.compile(r"^<!-- run(?:: save \S+)? -->\n```python[^\n]*\n(.*?)^```", re.S | re.M)
_ANY_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def examples() -> list[tuple[str, str]]:
    """``(name, code)`` of every runnable example, in document order."""
    marked = [ROOT / "README.md"] + [ROOT / "docs" / f"{p}.md" for p in ("python", "torch", "jax", "loaderx", "images")]
    every = [ROOT / "docs" / f"{p}.md" for p in ("datasets", "ray")]
    found = []
    for docs, block in ((marked, _BLOCK), (every, _ANY_BLOCK)):
        for doc in docs:
            for n, match in enumerate(block.finditer(doc.read_text()), 1):
                found.append((f"{doc.stem.replace('-', '_').lower()}_{n}", match.group(1)))
    return found


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, code in examples():
        (out / f"{name}.py").write_text(code)
