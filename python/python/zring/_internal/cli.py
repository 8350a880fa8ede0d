"""The `zring` console script: the Rust CLI compiled into the extension, except
`zring convert`, which runs the Python converters (`python -m zring convert`)."""

import signal
import sys


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["convert"]:
        # The converters read the source formats with Python libraries (pyarrow,
        # datasets, h5py, Pillow), so the Rust CLI's `convert` only names this
        # command; here, where Python is running anyway, it is run directly.
        from ..converters import convert_cli

        sys.exit(convert_cli(args[1:]))

    from .._zring import cli_main

    # Behave like the native binary: Ctrl-C stops the command at once (the Rust code
    # never returns to Python to see a KeyboardInterrupt) and `zring info | head`
    # ends quietly instead of failing on a closed pipe.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.stdout.flush()
    sys.exit(cli_main(["zring", *args]))


if __name__ == "__main__":
    main()
