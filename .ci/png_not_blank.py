#!/usr/bin/env python3
"""Exit 0 if the PNG at argv[1] is a real picture: decodes, and its pixels vary.

With `--panel-right N`, also require the inspector's egui panel in the rightmost N pixels: mostly
dark (egui's dark theme) with text on it, against the example's light sky.

Standard library only (zlib): handles 8-bit RGB/RGBA PNGs without interlacing, which is what
Bevy's screenshot writer produces.
"""
import struct
import sys
import zlib


def pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or interlace != 0 or color not in (2, 6):
                raise ValueError(f"unsupported PNG: depth {depth}, colour {color}")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, channels, rows


def main():
    path = sys.argv[1]
    width, height, channels, rows = pixels(path)
    colours = set()
    for line in rows[:: max(1, height // 64)]:
        for x in range(0, width * channels, channels * max(1, width // 64)):
            colours.add(bytes(line[x:x + 3]))
    print(f"{path}: {width}x{height}, {len(colours)} distinct sampled colours")
    if len(colours) < 16:
        print("the picture is blank or nearly so", file=sys.stderr)
        sys.exit(1)
    if "--panel-right" in sys.argv:
        strip = int(sys.argv[sys.argv.index("--panel-right") + 1])
        dark, total, panel_colours = 0, 0, set()
        for line in rows[:: max(1, height // 128)]:
            for x in range((width - strip) * channels, width * channels, channels * 4):
                px = bytes(line[x:x + 3])
                total += 1
                dark += max(px) < 70
                panel_colours.add(px)
        share = dark / max(total, 1)
        print(f"panel strip: {share:.0%} dark, {len(panel_colours)} distinct colours")
        if share < 0.5 or len(panel_colours) < 8:
            print("the inspector panel is not in the picture", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
