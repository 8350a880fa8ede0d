"""loaderx's error contract on top of zring's typed errors.

loaderx raises ``ZrecordError`` (a ``RuntimeError`` carrying the native ``.code``)
for engine failures, ``FileNotFoundError`` for a missing store, ``IndexError`` for an
index outside the store, ``ValueError``/``TypeError`` for bad arguments and
``RuntimeError`` for any use of a closed container. zring's own errors keep their
classes; :func:`translated` turns them into loaderx's at the compatibility boundary
(matching on classes, never on message text).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .._internal import errors as z

__all__ = ["ZrecordError", "ERRORS"]

#: loaderx's native codes and their messages (the stable C ABI table).
ERRORS = {
    -1: "out of memory",
    -2: "file I/O failed",
    -4: "record exceeds the 2147483648 byte limit",
    -5: "store is full",
    -6: "buffer too small",
    -7: "stored record failed to decode",
    -8: "invalid or unsupported zrecord store format",
    -9: "zstd dictionary training failed (too few or too small samples)",
    -11: "store not found",
    -12: "store already exists",
    -13: "store is busy (already open by another native handle or process)",
}

OUT_OF_MEMORY, IO_FAILED, CORRUPT_RECORD, BAD_FORMAT = -1, -2, -7, -8
DICT_TRAIN_FAILED, ALREADY_EXISTS = -9, -12

CLOSED_MESSAGE = "Container is closed"


class ZrecordError(RuntimeError):
    """An engine failure, with loaderx's native error ``code`` (see :data:`ERRORS`).

    The message is loaderx's text for the code followed by zring's own detail
    (path, record, what was expected and found).
    """

    def __init__(self, code: int, detail: str | None = None):
        self.code = int(code)
        text = ERRORS.get(self.code, f"unknown zrecord error {self.code}")
        super().__init__(f"{text}: {detail}" if detail else text)


@contextlib.contextmanager
def translated(codec_code: int = CORRUPT_RECORD, format_code: int = BAD_FORMAT) -> Iterator[None]:
    """Re-raises zring errors as loaderx raises them.

    ``codec_code`` is the code a zstd failure gets here (decode on reads, -1 on
    writes, -9 in training); ``format_code`` the code of a damaged store (-8 when
    opening, -7 for a record that fails on read).
    """
    try:
        yield
    except z.ClosedError as e:
        raise RuntimeError(CLOSED_MESSAGE) from e
    except z.StoreExistsError as e:
        raise ZrecordError(ALREADY_EXISTS, str(e)) from e
    except (z.CorruptStoreError, z.UnsupportedFormatError) as e:
        raise ZrecordError(format_code, str(e)) from e
    except z.CodecError as e:
        raise ZrecordError(codec_code, str(e)) from e
    except z.WriterPoisonedError as e:
        raise ZrecordError(IO_FAILED, str(e)) from e
    except z.StoreNotFoundError:
        raise
    except z.ZringOSError as e:
        raise ZrecordError(IO_FAILED, str(e)) from e
