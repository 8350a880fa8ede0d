"""The exceptions zring raises.

Every engine error is a :class:`ZringError` and also an instance of the built-in
exception a Python user would catch for that kind of problem, so ``except ValueError``
or ``except OSError`` keep working::

    ZringError(Exception)
    ├── CorruptStoreError(ZringError, ValueError)      damaged file or record
    ├── UnsupportedFormatError(ZringError, ValueError) written by a newer format
    ├── SchemaError(ZringError, ValueError)            bad dtype / shape / layout
    ├── InvalidArgumentError(ZringError, ValueError)   bad argument value
    ├── ZringIndexError(ZringError, IndexError)        record index out of range
    ├── ClosedError(ZringError, ValueError)            store, writer or loader closed
    ├── StoreChangedError(ZringError, ValueError)      unpickled store's file was replaced
    ├── WriterPoisonedError(ZringError, RuntimeError)  writer failed earlier
    ├── VersionConflictError(ZringError, RuntimeError) another writer published first
    ├── CodecError(ZringError, RuntimeError)           zstd failure
    └── ZringOSError(ZringError, OSError)              I/O error (errno, filename)
        ├── StoreNotFoundError(ZringOSError, FileNotFoundError)
        ├── StorePermissionError(ZringOSError, PermissionError)
        └── StoreExistsError(ZringOSError, FileExistsError)

The message is the engine's own text (path, record, what was expected and found).
"""


class ZringError(Exception):
    """Base class of every error zring raises."""


class CorruptStoreError(ZringError, ValueError):
    """The file is not a valid zring store, or one of its records is damaged."""


class UnsupportedFormatError(ZringError, ValueError):
    """The store was written by a newer, incompatible format version."""


class SchemaError(ZringError, ValueError):
    """A dtype, shape or layout is invalid or does not match the operation."""


class InvalidArgumentError(ZringError, ValueError):
    """An argument has a wrong value or size."""


class ZringIndexError(ZringError, IndexError):
    """A record index is outside the store."""


class ClosedError(ZringError, ValueError):
    """The store, writer, sampler or loader was closed."""


class StoreChangedError(ZringError, ValueError):
    """An unpickled store's file is no longer the one that was pickled (replaced,
    rewritten or changed schema); reopen it explicitly to read the new file."""


class WriterPoisonedError(ZringError, RuntimeError):
    """A writer failed earlier and accepts nothing more; abort it and start again."""


class VersionConflictError(ZringError, RuntimeError):
    """Another writer published a version of the dataset since this write started;
    nothing of this write was published. Write again (with ``append=True`` the
    records go after the other writer's)."""


class CodecError(ZringError, RuntimeError):
    """zstd compression, decompression or dictionary training failed."""


class ImageDecodeError(ZringError, ValueError):
    """A record's encoded image could not be decoded (damaged, not a JPEG or PNG,
    or larger than ``max_pixels``); the message names the store or dataset field and
    the record."""


class ZringOSError(ZringError, OSError):
    """An operating-system error while reading or writing a store."""


class StoreNotFoundError(ZringOSError, FileNotFoundError):
    """The store file does not exist."""


class StorePermissionError(ZringOSError, PermissionError):
    """The store file cannot be accessed with the process's permissions."""


class StoreExistsError(ZringOSError, FileExistsError):
    """A file already exists at the destination and overwrite was not asked for."""

