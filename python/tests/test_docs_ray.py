"""docs/ray.md's Python example runs as written, in an empty directory."""

import re
from pathlib import Path

import pytest
import ray

pytestmark = pytest.mark.slow  # a Ray cluster (scripts/test.sh --quick leaves it out)

DOC = Path(__file__).resolve().parents[2] / "docs" / "ray.md"


def test_the_example_in_docs_ray_md_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    try:
        exec(compile(blocks[0], DOC.name, "exec"), {"__name__": "doc"})
    finally:
        ray.shutdown()
