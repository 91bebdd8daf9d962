"""Token cost of image parts, following OpenAI's published vision accounting.

``detail: low`` costs a flat base. ``high`` (and ``auto``, counted as ``high`` to err on the side of
more tokens) fits the image into 2048x2048, scales the short side down to 768 and charges per
512-pixel tile plus the base. Image sizes are read from the header of ``data:`` URLs; a remote URL
is charged the largest cost an image can have, because the proxy never fetches anything.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ImageCosts:
    base: int = 85
    tile: int = 170

    def for_size(self, width: int, height: int, detail: str) -> int:
        if detail == "low":
            return self.base
        return self.base + self.tile * tiles(width, height)

    @property
    def worst(self) -> int:
        # 768 x 2048 is the largest tile grid the scaling rules can produce: 2 x 4 tiles.
        return self.base + self.tile * 8


def tiles(width: int, height: int) -> int:
    if width <= 0 or height <= 0:
        return 8
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    short = min(w, h)
    if short > 768:
        w, h = w * 768 / short, h * 768 / short
    return math.ceil(w / 512) * math.ceil(h / 512)


def image_tokens(url: object, detail: object, costs: ImageCosts) -> int:
    detail_s = detail if isinstance(detail, str) else "auto"
    if detail_s == "low":
        return costs.base
    size = data_url_size(url) if isinstance(url, str) else None
    if size is None:
        return costs.worst
    return costs.for_size(size[0], size[1], detail_s)


def data_url_size(url: str) -> tuple[int, int] | None:
    """Width and height from a base64 ``data:`` URL's image header, if recognisable."""
    if not url.startswith("data:"):
        return None
    comma = url.find(",")
    if comma < 0 or ";base64" not in url[:comma]:
        return None
    # 64 KiB of decoded header is enough for every JPEG we have seen to reach its SOF marker.
    chunk = url[comma + 1 : comma + 1 + 87384]
    chunk = chunk[: len(chunk) - len(chunk) % 4]
    try:
        head = base64.b64decode(chunk, validate=False)
    except (binascii.Error, ValueError):
        return None
    return header_size(head)


def header_size(head: bytes) -> tuple[int, int] | None:
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
        w, h = struct.unpack(">II", head[16:24])
        return int(w), int(h)
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        w, h = struct.unpack("<HH", head[6:10])
        return int(w), int(h)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _webp_size(head)
    if head[:2] == b"\xff\xd8":
        return _jpeg_size(head)
    return None


def _webp_size(head: bytes) -> tuple[int, int] | None:
    kind = head[12:16]
    if kind == b"VP8X" and len(head) >= 30:
        w = int.from_bytes(head[24:27], "little") + 1
        h = int.from_bytes(head[27:30], "little") + 1
        return w, h
    if kind == b"VP8 " and len(head) >= 30:
        w, h = struct.unpack("<HH", head[26:30])
        return int(w) & 0x3FFF, int(h) & 0x3FFF
    if kind == b"VP8L" and len(head) >= 25:
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _jpeg_size(head: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(head):
        if head[i] != 0xFF:
            i += 1
            continue
        marker = head[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            i += 1 if marker == 0xFF else 2
            continue
        (length,) = struct.unpack(">H", head[i + 2 : i + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h, w = struct.unpack(">HH", head[i + 5 : i + 9])
            return int(w), int(h)
        i += 2 + length
    return None
