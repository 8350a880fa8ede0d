"""The package as installed: the `zring` command (the Rust CLI compiled into the
extension), and, under scripts/test.sh, that the tests import the installed wheel
rather than the source tree."""

import builtins
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zring


def zring_command():
    exe = shutil.which("zring", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if exe is None:
        pytest.fail("the zring command is not installed next to this Python")
    return exe


def test_tests_run_against_the_installed_wheel():
    if os.environ.get("ZRING_TEST_INSTALLED") != "1":
        pytest.skip("only under scripts/test.sh, which installs the wheel")
    root = Path(os.environ["ZRING_SOURCE_ROOT"]).resolve()
    here = Path(zring.__file__).resolve()
    assert root not in here.parents, f"zring was imported from the source tree: {here}"
    assert "site-packages" in here.parts


def test_zring_command_runs_the_rust_cli(tmp_path):
    exe = zring_command()
    r = subprocess.run([exe, "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("zring ")
    np.save(tmp_path / "a.npy", np.arange(24, dtype=np.float32).reshape(6, 4))
    r = subprocess.run([exe, "pack", "a.zr", "--npy", "a.npy", "--codec", "raw"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert zring.DenseStore(tmp_path / "a.zr")[5].tolist() == [20, 21, 22, 23]
    r = subprocess.run([exe, "info", "a.zr", "--json"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0 and '"dense"' in r.stdout


def _stderr_through(cmd, tty, cwd):
    """The command's stderr, written to a pseudo-terminal (``tty``) or a pipe."""
    if not tty:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True)
        assert r.returncode == 0, r.stderr
        return r.stderr.decode(errors="replace")
    import fcntl
    import struct
    import termios

    main, side = os.openpty()
    # An 80-column terminal: a new pty has 0 columns, in which tqdm draws nothing.
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=side)
    os.close(side)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the other side closed
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    assert r.returncode == 0, out
    return out.decode(errors="replace")


def test_long_commands_show_progress_on_a_terminal_and_stay_quiet_otherwise(tmp_path):
    """`zring pack`, `zring verify` and `python -m zring convert` draw a progress bar
    on a terminal; with stderr piped (CI logs, scripts) they print nothing there."""
    pytest.importorskip("tqdm")
    exe = zring_command()
    np.save(tmp_path / "a.npy", np.zeros((4000, 1024), np.uint8))
    commands = [
        ("pack", [exe, "pack", "a.zr", "--npy", "a.npy", "--codec", "raw", "--overwrite"]),
        ("verify", [exe, "verify", "a.zr"]),
        ("zring", [sys.executable, "-m", "zring", "convert", "npy", "a.npy", "ds", "--overwrite"]),
    ]
    for label, cmd in commands:
        shown = _stderr_through(cmd, tty=True, cwd=tmp_path)
        assert label in shown and ("[" in shown or "|" in shown), (label, shown[-300:])
        assert _stderr_through(cmd, tty=False, cwd=tmp_path) == "", label


def test_zring_command_exit_statuses(tmp_path):
    exe = zring_command()
    bad = subprocess.run([exe, "no-such-command"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Usage" in bad.stderr
    (tmp_path / "junk.zr").write_bytes(b"not a store" * 1000)
    failed = subprocess.run([exe, "verify", str(tmp_path / "junk.zr")], capture_output=True, text=True)
    assert failed.returncode == 1 and failed.stderr.startswith("zring: ")
    ok = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert ok.returncode == 0 and "pack" in ok.stdout


def test_cli_main_is_callable_in_process():
    from zring._zring import cli_main

    assert cli_main(["zring", "--version"]) == 0


def test_star_import_keeps_the_builtin_open(tmp_path):
    namespace: dict = {}
    exec("from zring import *\nseen = open", namespace)
    assert "open" not in namespace and namespace["seen"] is builtins.open
    assert "open" not in zring.__all__
    assert "DenseStore" in namespace and "Sampler" in namespace
    # zring.open is still there, and still opens stores.
    path = tmp_path / "labels.zr"
    with zring.DenseWriter(path, "int64", ()) as w:
        w.append(np.arange(5, dtype=np.int64))
    store = zring.open(path)
    assert isinstance(store, zring.DenseStore) and int(store[3]) == 3


def test_the_layout_keeps_the_names_users_import():
    """Internals live in zring._internal; the public modules keep their names, and
    zring.datasets (the converters' former name) re-exports every converter."""
    import zring.converters
    import zring.datasets

    for name in zring.converters.__all__:
        assert getattr(zring.datasets, name) is getattr(zring.converters, name), name

    assert zring.Dataset.__module__.startswith("zring")
    for name in ("torch", "jax", "ray", "loaderx", "types", "converters"):
        assert f"zring.{name}" in _public_modules()


def _public_modules():
    import pkgutil

    import zring

    return {f"zring.{m.name}" for m in pkgutil.iter_modules(zring.__path__) if not m.name.startswith("_")}
