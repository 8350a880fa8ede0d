"""The `zring` console script: the Rust CLI compiled into the extension."""

import signal
import sys


def main() -> None:
    from ._zring import cli_main

    # Behave like the native binary: Ctrl-C stops the command at once (the Rust code
    # never returns to Python to see a KeyboardInterrupt) and `zring info | head`
    # ends quietly instead of failing on a closed pipe.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.stdout.flush()
    sys.exit(cli_main(["zring", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
