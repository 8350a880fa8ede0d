"""loaderx 2.8's ``loaderx.dataloader``: the step-based :class:`Loader`."""

from ._loader import Loader

__all__ = ["Loader"]
