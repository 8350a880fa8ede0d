"""Decoding encoded images on the read path.

A field of encoded images (ragged ``uint8`` records holding JPEG or PNG bytes, as
``zring.convert`` writes them from ImageFolder, WebDataset, Hugging Face or Parquet
image columns) is decoded in native code, on the engine's threads, straight into a
dense ``uint8`` batch of pixels: ``(B, height, width, 3)`` (``layout="hwc"``) or
``(B, 3, height, width)`` (``"chw"``). Pass ``decode={"image": Image(...)}`` to
``Dataset.gather``, ``zring.Loader``, ``zring.torch.Dataset`` /
``IterableDataset`` or ``zring.jax``.

Random crops and flips are a pure function of ``(seed, epoch, record)``: the same
record gives the same pixels with any number of threads or workers and on resume,
and a new epoch (the loader's, or ``epoch=`` of a gather) gives new crops.

>>> import zring
>>> zring.decode.Image(size=(224, 224), crop="random_resized", flip=True, seed=1)
Image(size=(224, 224), crop='random_resized', flip=True, scale=(0.08, 1.0), ratio=(0.75, 1.3333333333333333), layout='hwc', seed=1, max_pixels=67108864, on_error='raise')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Image", "Decoded", "DEFAULT_MAX_PIXELS"]

#: Source images with more pixels are refused before they are decoded (64 Mi).
DEFAULT_MAX_PIXELS = 64 << 20


@dataclass(frozen=True)
class Image:
    """How one field of encoded images is decoded.

    - ``size``: the output ``(height, width)``.
    - ``crop``: ``"center"`` (the largest centred region with the output's aspect
      ratio), ``"random_resized"`` (torchvision's ``RandomResizedCrop``: an area
      fraction uniform in ``scale`` and an aspect ratio log-uniform in ``ratio``) or
      ``"full"`` (the whole image, aspect ratio not kept). The region is resized
      with a bilinear, antialiasing filter.
    - ``flip``: flip horizontally with probability 1/2, per record and epoch.
    - ``layout``: ``"hwc"`` (``(h, w, 3)``, NumPy's and PIL's order) or ``"chw"``
      (torch's channels-first).
    - ``seed``: the seed of every random choice.
    - ``max_pixels``: larger source images are refused before they are decoded.
    - ``on_error``: a record that cannot be decoded raises
      :class:`zring.ImageDecodeError` naming the store or field and the record
      (``"raise"``), is left out of the batch, every field alike (``"skip"``), or is
      replaced, every field alike, by another record drawn from ``(seed, epoch,
      record)`` (``"substitute"``).
    """

    size: tuple[int, int]
    crop: Literal["center", "random_resized", "full"] = "center"
    flip: bool = False
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    layout: Literal["hwc", "chw"] = "hwc"
    seed: int = 0
    max_pixels: int = DEFAULT_MAX_PIXELS
    on_error: Literal["raise", "skip", "substitute"] = "raise"

    def __post_init__(self) -> None:
        if self.crop not in ("center", "random_resized", "full"):
            raise ValueError(f"crop must be 'center', 'random_resized' or 'full', got {self.crop!r}")
        if self.layout not in ("hwc", "chw"):
            raise ValueError(f"layout must be 'hwc' or 'chw', got {self.layout!r}")
        if self.on_error not in ("raise", "skip", "substitute"):
            raise ValueError(
                f"on_error must be 'raise', 'skip' or 'substitute', got {self.on_error!r}"
            )
        height, width = self.size
        object.__setattr__(self, "size", (int(height), int(width)))
        object.__setattr__(self, "scale", tuple(float(v) for v in self.scale))
        object.__setattr__(self, "ratio", tuple(float(v) for v in self.ratio))

    @property
    def shape(self) -> tuple[int, int, int]:
        """One decoded record's shape: ``(h, w, 3)`` or ``(3, h, w)``."""
        height, width = self.size
        return (height, width, 3) if self.layout == "hwc" else (3, height, width)

    def _spec(self) -> dict[str, Any]:
        """The spec the native decoder takes."""
        return {
            "size": self.size,
            "crop": self.crop,
            "flip": bool(self.flip),
            "scale": self.scale,
            "ratio": self.ratio,
            "layout": self.layout,
            "seed": int(self.seed),
            "max_pixels": int(self.max_pixels),
            "on_error": self.on_error,
        }


class Decoded(dict[str, Any]):
    """What ``Dataset.gather(..., decode=...)`` returns: ``{name: ndarray |
    RaggedBatch}`` as ``gather`` does, with the decoded fields as ``uint8`` pixel
    arrays, and which records it holds in the end:

    - ``indices``: the records of the batch, in order (the ones asked for, less
      those skipped, with substitutes in place);
    - ``skipped``: records left out because their image could not be decoded
      (``on_error="skip"``);
    - ``substituted``: ``(bad record, the record read in its place)`` pairs
      (``on_error="substitute"``).
    """

    indices: list[int]
    skipped: list[int]
    substituted: list[tuple[int, int]]

    def __init__(
        self,
        fields: Mapping[str, Any],
        indices: list[int],
        skipped: list[int],
        substituted: list[tuple[int, int]],
    ) -> None:
        super().__init__(fields)
        self.indices = list(indices)
        self.skipped = list(skipped)
        self.substituted = [tuple(p) for p in substituted]  # type: ignore[misc]

    def __reduce__(self) -> tuple[Any, ...]:
        return (Decoded, (dict(self), self.indices, self.skipped, self.substituted))


def _specs(decode: Any) -> dict[str, dict[str, Any]] | None:
    """``{field: Image}`` as ``{field: spec}`` for the native side (``None`` stays)."""
    if decode is None:
        return None
    if not isinstance(decode, Mapping):
        raise TypeError(f"decode must be a dict of field name -> zring.decode.Image, got {type(decode).__name__}")
    out = {}
    for name, image in decode.items():
        if not isinstance(image, Image):
            raise TypeError(
                f"decode[{name!r}] must be a zring.decode.Image, got {type(image).__name__}"
            )
        out[str(name)] = image._spec()
    return out
