"""Documentation that cannot drift: every public name has a docstring, the
docstrings' examples pass as doctests, the typed public-API module runs, and the
type information is installed. (test_docs.py runs the docs' marked examples.)"""

from __future__ import annotations

import doctest
import importlib
import inspect
import os
import sys
import types

import pytest

import zring
import zring.converters
import zring.loaderx
import zring.loaderx.dtypes
import zring.loaderx.sampler
import zring.loaderx.zrecord
import zring.types

sys.path.insert(0, os.path.dirname(__file__))

# The integrations import their framework (PyTorch, JAX, Ray Data), which may be
# missing: their names are checked where it is installed.
OPTIONAL_MODULES = ("zring.torch", "zring.jax", "zring.ray")
FRAMEWORKS = {"zring.torch": "torch", "zring.jax": "jax", "zring.ray": "ray.data"}


def _modules():
    yield from (zring, zring.loaderx, zring.converters, zring.types)
    yield from (zring.loaderx.zrecord, zring.loaderx.sampler, zring.loaderx.dtypes)
    for name in OPTIONAL_MODULES:
        try:
            yield importlib.import_module(name)
        except ImportError:
            continue


@pytest.mark.parametrize("name", OPTIONAL_MODULES)
def test_optional_module_imports_where_its_framework_is_installed(name):
    # Skips (saying which framework is missing) only where the framework is absent;
    # with it installed, the integration itself must import.
    pytest.importorskip(FRAMEWORKS[name])
    importlib.import_module(name)


def _is_alias(obj):
    """A type alias (``Union[...]``, ``Literal[...]``, ``dict[str, ...]``): documented
    by the string after its assignment in the source, which pdoc shows but
    ``__doc__`` cannot hold."""
    return isinstance(obj, types.GenericAlias) or type(obj).__module__ == "typing"


def _public_names():
    for module in _modules():
        # Public names kept out of `__all__` (zring.open: `import *` must not shadow
        # the builtin) are documented all the same.
        for name in [*module.__all__, *getattr(module, "_PUBLIC_NOT_STARRED", ())]:
            obj = getattr(module, name)
            yield f"{module.__name__}.{name}", obj
            if _is_alias(obj):
                continue
            if inspect.isclass(obj) and not issubclass(obj, BaseException):
                for member in dir(obj):
                    if member.startswith("_"):
                        continue
                    owner = next(c for c in obj.__mro__ if member in c.__dict__)
                    if owner is object or not owner.__module__.startswith("zring"):
                        continue
                    yield f"{module.__name__}.{name}.{member}", owner.__dict__[member]


@pytest.mark.parametrize("name,obj", list(_public_names()), ids=lambda v: v if isinstance(v, str) else "")
def test_public_name_has_a_docstring(name, obj):
    if isinstance(obj, (int, str, dict, tuple)) or type(obj).__name__ == "Mode":
        return  # constants and enum members document themselves in their class
    if _is_alias(obj):
        return  # see _is_alias
    doc = inspect.getdoc(obj)
    assert doc and doc.strip(), f"{name} has no docstring"


def _doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    seen = set()
    for name, obj in _public_names():
        if inspect.isclass(obj) or inspect.isroutine(obj):
            for test in finder.find(obj, name, module=False, globs={}):
                private = any(p.startswith("_") and not p.endswith("__") for p in test.name.split("."))
                if test.examples and not private and test.name not in seen:
                    seen.add(test.name)
                    yield test


DOCTESTS = list(_doctests())


def test_the_main_entry_points_have_examples():
    names = {t.name for t in DOCTESTS}
    for entry in ("DenseWriter", "RaggedWriter", "DenseStore", "RaggedStore", "Sampler", "Loader", "open", "train_dict",
                  "Dataset", "write_dataset", "open_dataset", "convert"):
        assert f"zring.{entry}" in names, f"zring.{entry} has no doctest example"


@pytest.mark.parametrize("test", DOCTESTS, ids=lambda t: t.name)
def test_docstring_examples(test, tmp_path, monkeypatch):
    # An example of an optional integration (zring.convert reads Hugging Face
    # datasets) runs where its package is installed.
    for optional in ("datasets", "pyarrow"):
        if any(f"import {optional}" in e.source or f", {optional}" in e.source for e in test.examples):
            pytest.importorskip(optional)
    monkeypatch.chdir(tmp_path)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, f"{test.name}: {runner.failures} doctest failures (output above)"


def test_typed_public_api_runs(tmp_path):
    pytest.importorskip("typing_extensions")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "typing"))
    import public_api

    public_api.main(str(tmp_path))


def test_type_information_is_installed():
    # PEP 561: the marker and the extension's stub ship in the wheel next to the code.
    from importlib.resources import files

    package = files("zring")
    assert package.joinpath("py.typed").is_file()
    stub = package.joinpath("_zring.pyi").read_text()
    assert "class DenseStore" in stub
