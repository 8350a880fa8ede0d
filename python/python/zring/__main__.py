"""``python -m zring convert FORMAT SRC... DST``: the converters' command line (see
:mod:`zring.converters`)."""

import sys

from .converters import convert_cli


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "convert":
        print("usage: python -m zring convert FORMAT SRC [SRC...] DST [options]", file=sys.stderr)
        return 2
    return convert_cli(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
