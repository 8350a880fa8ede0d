"""docs/datasets.md's Python examples run as written, in order, in one empty directory."""

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "datasets.md"


def test_the_examples_in_docs_datasets_md_run(tmp_path, monkeypatch):
    for mod in ("pyarrow", "datasets", "PIL", "torch", "jax"):
        pytest.importorskip(mod)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    for k, code in enumerate(blocks):
        exec(compile(code, f"{DOC.name} block {k}", "exec"), {"__name__": f"doc{k}"})
