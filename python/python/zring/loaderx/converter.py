"""loaderx 2.8's ``loaderx.converter``: :func:`convert` writes a Hugging Face
``datasets.Dataset`` as one store per column under one directory."""

from ._convert import convert

__all__ = ["convert"]
