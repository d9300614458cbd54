#!/usr/bin/python3
"""Cross-check of an encoder against the vectors: decodes frames written by
another implementation (the C++ codec's test) with python msgpack and compares
them with the vectors they claim to encode.

Usage: /usr/bin/python3 vectors/check_encoded.py ENCODED.json [--vectors-dir DIR] [--require-all]

ENCODED.json: {"vectors": [{"file": "frames.json", "name": "<vector name>",
                            "frame": "<hex, TCP framing>"}, ...]}

Each frame is parsed here (len u32 BE, op u8, hlen u32 BE, header, payload),
its header decoded with python msgpack (raw=False, strict_map_key=False) and
turned into typed JSON, then compared with the vector's op, header and payload.

Comparison rule: an encoder may omit a field whose value is a zero value
(false, 0, "", empty map, empty array), so a key whose value in the vector is
a zero value may be absent from the encoded header. This applies to the
header's own fields and to the fields of its typed sub-maps (props, auth,
server), never inside free-form maps (headers, args, client). Everything else
must be equal exactly: int vs float, float32 vs float64, str vs bin, bool vs
int. Map key order does not matter.

Prints "encoded: N frames match" and exits 0, or lists the mismatches and exits 1.
"""

import argparse
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # importing generate must not leave __pycache__ in vectors/
sys.path.insert(0, HERE)
import generate as gen  # noqa: E402  (typed-JSON helpers and the format-aware walker)

VECTOR_FILES = ("frames.json", "encodings.json")
TYPED_SUBMAPS = {"props", "auth", "server"}  # maps of spec fields, where zero values may be omitted


def load_vectors(directory):
    """{(file, name): vector} for the frame-carrying vector files."""
    vectors = {}
    for filename in VECTOR_FILES:
        path = os.path.join(directory, filename)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            for v in json.load(f)["vectors"]:
                vectors[(filename, v["name"])] = v
    return vectors


def parse_frame(frame):
    """(op, header bytes, payload) of TCP framing, or raises ValueError."""
    if len(frame) < 9:
        raise ValueError(f"{len(frame)} bytes: shorter than len + op + hlen")
    length, op, hlen = struct.unpack(">IBI", frame[:9])
    if length != len(frame) - 4:
        raise ValueError(f"len field is {length} but {len(frame) - 4} bytes follow it")
    if hlen > length - 5:
        raise ValueError(f"hlen {hlen} runs past the frame")
    return op, frame[9:9 + hlen], frame[9 + hlen:]


def decode_header(header_bytes):
    """Typed JSON of the header, decoded by python msgpack; the walker only
    supplies the float widths msgpack does not report, and must agree."""
    if not header_bytes:
        return {}
    unpacked = gen.normalize_unpacked(gen.unpack(header_bytes))
    walked = gen.decode_typed(header_bytes)
    if not gen.strict_equal(unpacked, gen.typed_to_py(walked)):
        raise ValueError(f"python msgpack ({unpacked!r}) and the typed walker disagree")
    return walked


def is_object(t):
    return isinstance(t, dict) and not gen.is_tagged(t)


def diff(expected, got, path, lenient):
    """Messages describing how got differs from expected (typed JSON)."""
    if is_object(expected) and is_object(got):
        return diff_objects(expected, got, path, lenient)
    if isinstance(expected, list) and isinstance(got, list):
        if len(expected) != len(got):
            return [f"{path}: array of {len(got)} items, expected {len(expected)}"]
        return [m for i, (e, g) in enumerate(zip(expected, got)) for m in diff(e, g, f"{path}[{i}]", False)]
    if isinstance(expected, dict) and "$map" in expected and isinstance(got, dict) and "$map" in got:
        return diff_pair_maps(expected["$map"], got["$map"], path)
    if type(expected) is type(got) and gen.canonical(expected) == gen.canonical(got):
        return []
    return [f"{path}: got {gen.canonical(got)[:200]}, expected {gen.canonical(expected)[:200]}"]


def diff_objects(expected, got, path, lenient):
    messages = []
    for key, value in expected.items():
        if key not in got and not (lenient and gen.is_zero(value)):
            messages.append(f"{path}.{key}: missing, expected {gen.canonical(value)[:200]}")
    for key in got:
        if key not in expected:
            messages.append(f"{path}.{key}: unexpected key, value {gen.canonical(got[key])[:200]}")
    for key in expected:
        if key in got:
            child_lenient = path == "header" and key in TYPED_SUBMAPS
            messages += diff(expected[key], got[key], f"{path}.{key}", child_lenient)
    return messages


def diff_pair_maps(expected, got, path):
    """Maps written as $map pairs compare as unordered sets of pairs."""
    canon = lambda pairs: sorted(gen.canonical(p) for p in pairs)  # noqa: E731
    if canon(expected) != canon(got):
        return [f"{path}: got {gen.canonical(got)[:200]}, expected {gen.canonical(expected)[:200]}"]
    return []


def check_entry(entry, vectors):
    """Mismatch messages for one encoded frame."""
    key = (entry.get("file"), entry.get("name"))
    vector = vectors.get(key)
    if vector is None:
        return [f"no vector named {key[1]!r} in {key[0]!r}"]
    try:
        op, header_bytes, payload = parse_frame(bytes.fromhex(entry["frame"]))
        header = decode_header(header_bytes)
    except Exception as e:  # a bad frame from the encoder is a finding, whatever the failure
        return [f"frame does not decode: {e}"]
    messages = []
    if op != vector["op"]:
        messages.append(f"op {op:#04x}, expected {vector['op']:#04x} ({vector['op_name']})")
    messages += diff(vector["header"], header, "header", True)
    if payload.hex() != vector["payload"]:
        messages.append(f"payload {payload.hex()[:80]}, expected {vector['payload'][:80]}")
    return messages


def read_entries(path):
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    entries = document.get("vectors") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and all(isinstance(e.get(k), str) for k in ("file", "name", "frame"))
            for e in entries):
        raise ValueError('expected {"vectors": [{"file": str, "name": str, "frame": hex str}, ...]}')
    return entries


def main(argv=None):
    parser = argparse.ArgumentParser(description="Compare encoded frames with the FireMQ vectors.")
    parser.add_argument("encoded", help="JSON file written by the encoder under test")
    parser.add_argument("--vectors-dir", default=HERE, help="directory of frames.json (default: %(default)s)")
    parser.add_argument("--require-all", action="store_true",
                        help="also fail when a frames.json vector has no encoded frame")
    args = parser.parse_args(argv)
    try:
        entries = read_entries(args.encoded)
    except (OSError, ValueError) as e:
        print(f"encoded: cannot read {args.encoded}: {e}", file=sys.stderr)
        return 1
    vectors = load_vectors(args.vectors_dir)
    failures = [f"{e['file']}:{e['name']}: {m}" for e in entries for m in check_entry(e, vectors)]
    if args.require_all:
        covered = {(e["file"], e["name"]) for e in entries}
        failures += [f"{f}:{n}: no encoded frame" for (f, n) in vectors
                     if f == "frames.json" and (f, n) not in covered]
    if not entries:
        failures.append("no encoded frames to check")
    if failures:
        for failure in failures:
            print(failure, file=sys.stderr)
        print(f"encoded: {len(failures)} mismatch(es) in {len(entries)} frames", file=sys.stderr)
        return 1
    print(f"encoded: {len(entries)} frames match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
