"""Reading a pixel of a PNG (a browser's screenshot) with the standard library: 8-bit RGBA or
RGB, not interlaced, as Chromium writes them. Small images only (a clipped screenshot): the
rows are unfiltered in Python."""

from __future__ import annotations

import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {6: 4, 2: 3}  # colour type: RGBA, RGB


def pixels(png: bytes) -> tuple[int, int, int, list[bytes]]:
    """(width, height, channels, rows of raw bytes)."""
    assert png.startswith(SIGNATURE), "not a PNG"
    at, data, head = len(SIGNATURE), b"", None
    while at < len(png):
        length, kind = struct.unpack(">I4s", png[at:at + 8])
        body = png[at + 8:at + 8 + length]
        at += 12 + length
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            data += body
    assert head is not None, "no IHDR"
    width, height, depth, colour, _, _, interlace = head
    assert depth == 8 and colour in CHANNELS and not interlace, head
    step = CHANNELS[colour]
    raw, stride = zlib.decompress(data), width * step
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - step] if i >= step else 0
            up, corner = previous[i], previous[i - step] if i >= step else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                near = min((abs(guess - left), 0, left), (abs(guess - up), 1, up),
                           (abs(guess - corner), 2, corner))
                line[i] = (line[i] + near[2]) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, step, rows


def alpha_at(png: bytes, x: int, y: int) -> int:
    """The alpha of pixel (x, y): 255 for a PNG without an alpha channel."""
    _, _, step, rows = pixels(png)
    return rows[y][x * step + 3] if step == 4 else 255


def size(png: bytes) -> tuple[int, int]:
    """(width, height) from the header alone."""
    assert png.startswith(SIGNATURE) and png[12:16] == b"IHDR", "not a PNG"
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)
