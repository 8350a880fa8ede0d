"""loaderx 2.8's ``loaderx.allocator``: the :class:`Allocator` a store view reads into."""

from .zrecord import Allocator

__all__ = ["Allocator"]
