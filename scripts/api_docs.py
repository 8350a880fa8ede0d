"""Renders the zring API reference with pdoc: ``python scripts/api_docs.py OUTDIR``.

pdoc reads a module's type information from the ``.pyi`` stub next to it, but the
native classes are documented where users find them, in ``zring`` (re-exported from
``zring._zring``), so this also applies ``zring/_zring.pyi`` to the members of
``zring`` that come from the extension. Any pdoc warning (an annotation it cannot
resolve, a stub that does not match) fails the build.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from unittest import mock

import pdoc
import pdoc.doc
import pdoc.doc_pyi

_original = pdoc.doc_pyi.include_typeinfo_from_stub_files


def _with_native_stub(module: pdoc.doc.Module) -> None:
    _original(module)
    if module.modulename != "zring":
        return
    stub_file = pdoc.doc_pyi.find_stub_file("zring._zring")
    if stub_file is None:
        raise SystemExit("zring/_zring.pyi is not installed next to the extension")
    imported = pdoc.doc_pyi._import_stub_file("zring._zring", stub_file)
    stub = pdoc.doc.Module(imported)
    pdoc.doc_pyi._prepare_module(module)
    # The stub's annotations are evaluated in the namespace of the module they
    # belong to, so that module is the stub while they are copied.
    with mock.patch.dict("sys.modules", {"zring._zring": imported}):
        for member in module.members.values():
            if member.taken_from[0] == "zring._zring":
                pdoc.doc_pyi._patch_doc(member, stub)


def main(out: str) -> None:
    import zring

    # pdoc documents `__all__`; public names kept out of it (zring.open, so that
    # `from zring import *` leaves the builtin) are documented too.
    zring.__all__ = [*zring.__all__, *zring._PUBLIC_NOT_STARRED]
    pdoc.doc_pyi.include_typeinfo_from_stub_files = _with_native_stub
    pdoc.doc.doc_pyi.include_typeinfo_from_stub_files = _with_native_stub
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pdoc.pdoc("zring", output_directory=Path(out))


if __name__ == "__main__":
    main(sys.argv[1])
