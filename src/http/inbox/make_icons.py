"""Draws the inbox's app icons (the favicon's blue square and white tick) as PNG files:
icon-192.png and icon-512.png (rounded, purpose "any"), icon-maskable-512.png (full bleed,
the tick inside the safe zone) and apple-touch-icon.png (180 px, full bleed: iOS rounds it).
Python's standard library only; run it from this folder after changing the drawing."""

import math
import struct
import zlib

BLUE = (0x2F, 0x6F, 0xDE)
WHITE = (255, 255, 255)
TICK = [(9, 17), (14, 22), (23, 11)]  # in the favicon's 32-unit box
STROKE = 3.5


def seg_dist(px, py, a, b):
    (ax, ay), (bx, by) = a, b
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
    return math.hypot(px - (ax + t * dx), py - (ay + t * dy))


def rounded_inside(px, py, size, r):
    # distance outside a rounded square of side `size` with corner radius r (negative inside)
    cx = min(max(px, r), size - r)
    cy = min(max(py, r), size - r)
    return math.hypot(px - cx, py - cy) - r if (px < r or px > size - r) and (py < r or py > size - r) else -1.0


def draw(size, rounded, scale):
    unit = size / 32.0
    rows = []
    for y in range(size):
        row = bytearray([0])
        for x in range(size):
            px, py = x + 0.5, y + 0.5
            if rounded:
                d = rounded_inside(px, py, size, 7 * unit)
                alpha = max(0.0, min(1.0, 0.5 - d))
            else:
                alpha = 1.0
            # the tick, scaled about the centre
            ux = (px / unit - 16) / scale + 16
            uy = (py / unit - 16) / scale + 16
            dist = min(seg_dist(ux, uy, TICK[0], TICK[1]), seg_dist(ux, uy, TICK[1], TICK[2]))
            cover = max(0.0, min(1.0, (STROKE / 2 - dist) * unit * scale + 0.5))
            rgb = [round(BLUE[i] * (1 - cover) + WHITE[i] * cover) for i in range(3)]
            row += bytes(rgb + [round(alpha * 255)])
        rows.append(bytes(row))
    raw = b"".join(rows)

    def chunk(kind, data):
        c = kind + data
        return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


for name, size, rounded, scale in [
    ("icon-192.png", 192, True, 1.0),
    ("icon-512.png", 512, True, 1.0),
    ("icon-maskable-512.png", 512, False, 0.75),
    ("apple-touch-icon.png", 180, False, 0.9),
]:
    with open(name, "wb") as f:
        f.write(draw(size, rounded, scale))
