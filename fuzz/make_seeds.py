#!/usr/bin/env python3
"""Writes the fuzz seed corpora from the test vectors (vectors/*.json), one file per vector and target.

Run with Debian's python: /usr/bin/python3 fuzz/make_seeds.py. Files are named seed-<vector name>, so that a
rerun rewrites the same files; inputs kept from fuzzer findings are named crash-* or regress-* and are left alone.
"""
import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
VECTORS = HERE.parent / "vectors"
PREAMBLE = b"FMQ1"


def load(name):
    return json.loads((VECTORS / name).read_text())["vectors"]


def write(target, name, data):
    directory = HERE / "corpus" / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ("seed-" + name)).write_bytes(data)


def split_frame(frame):
    """(op, header bytes) of a TCP frame: len u32, op u8, hlen u32, header, payload."""
    op = frame[4]
    hlen = int.from_bytes(frame[5:9], "big")
    return op, frame[9:9 + hlen]


def main():
    frames = load("frames.json") + load("encodings.json")
    for v in frames:
        frame = bytes.fromhex(v["frame"])
        op, header = split_frame(frame)
        write("fuzz_frame_decoder", v["name"], bytes([len(frame) % 64]) + PREAMBLE + frame)
        write("fuzz_header_decoder", v["name"], bytes([op]) + header)
        write("fuzz_round_trip", v["name"], frame)
    # Every frame of frames.json in one stream: sessions of several frames.
    stream = b"".join(bytes.fromhex(v["frame"]) for v in load("frames.json"))
    write("fuzz_frame_decoder", "all-frames", b"\x07" + PREAMBLE + stream)
    write("fuzz_round_trip", "all-frames", stream)
    for v in load("invalid.json"):
        data = bytes.fromhex(v["input"])
        if v["framing"] == "stream" and not v.get("includes_preamble"):
            data = PREAMBLE + data
        write("fuzz_frame_decoder", v["name"], b"\x01" + data)
    for v in load("urls.json"):
        write("fuzz_url", v["name"], v["url"].encode())


if __name__ == "__main__":
    main()
