#!/usr/bin/python3
"""Validates the FireMQ vector files against their JSON Schemas, plus invariants
a schema cannot say.

Invariants: names unique across all files, one-line descriptions, exact
lowercase hex, bare JSON floats only inside $float32/$float64, $int only outside
+-(2^53-1); frames.json covers all 27 ops, each op starting with an
"<op>-all-fields" vector that sets every field of the op to a non-zero value;
every frames.json and encodings.json "frame" decodes (python msgpack and the
format-aware walker of generate.py) to its "header" and "payload"; the
reference decoder accepts every frame, rejects every invalid.json input with
its code, and parses every urls.json URL to its expectation.

Usage: /usr/bin/python3 vectors/check_schemas.py [--dir DIR]
(DIR holds the vector files; default: this script's directory. Schemas are
always read from schema/ next to this script.)
"""

import argparse
import json
import os
import re
import struct
import sys

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # importing generate must not leave __pycache__ in vectors/
sys.path.insert(0, HERE)
import generate as gen  # noqa: E402  (shared typed-JSON helpers and reference decoders)

FILES = ["frames.json", "encodings.json", "invalid.json", "urls.json"]
HEX_FIELDS = {"frame", "payload", "input"}
HEX_RE = re.compile(r"(?:[0-9a-f]{2})*")
FLOAT_TAGS = {"$float32", "$float64"}


def reject_constant(name):
    raise ValueError(f"bare {name} is not allowed; write it inside $float32 or $float64 as a string")


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f, parse_constant=reject_constant)


def schema_errors(schema_path, document):
    schema = load(schema_path)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for error in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in error.absolute_path) or "(top)"
        yield f"schema: at {where}: {error.message[:300]}"


# ------------------------------------------------------------------ typed JSON


def typed_errors(value, where, parent_key=None):
    """Bare floats outside float tags, and $int values that should be plain."""
    if isinstance(value, float) and parent_key not in FLOAT_TAGS:
        yield f"{where}: bare JSON number with a fraction or exponent: {value!r}"
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from typed_errors(item, f"{where}[{i}]", None)
    elif isinstance(value, dict):
        if set(value) == {"$int"} and isinstance(value["$int"], str):
            yield from big_int_errors(value["$int"], where)
        for key, item in value.items():
            yield from typed_errors(item, f"{where}.{key}", key)


def big_int_errors(text, where):
    try:
        n = int(text)
    except ValueError:
        yield f"{where}: $int is not a decimal integer: {text!r}"
        return
    if -gen.SAFE_INT <= n <= gen.SAFE_INT:
        yield f"{where}: $int {n} must be written as a plain JSON integer"
    if not -2**63 <= n <= 2**64 - 1:
        yield f"{where}: $int {n} is outside MessagePack's integer range"


# ------------------------------------------------------------------ frames


def parse_frame(frame):
    """(op, header bytes, payload) of TCP framing, or raises ValueError."""
    if len(frame) < 9:
        raise ValueError(f"frame of {len(frame)} bytes is shorter than len + op + hlen")
    length, op, hlen = struct.unpack(">IBI", frame[:9])
    if length != len(frame) - 4:
        raise ValueError(f"len {length} but {len(frame) - 4} bytes follow it")
    if hlen > length - 5:
        raise ValueError(f"hlen {hlen} runs past the frame")
    return op, frame[9:9 + hlen], frame[9 + hlen:]


def header_errors(header_bytes, expected):
    try:
        walked = gen.decode_header(header_bytes)
    except gen.DecodeError as e:
        return [f"header does not decode: {e}"]
    errors = []
    if json.dumps(walked, sort_keys=True) != json.dumps(expected, sort_keys=True):
        errors.append(f"header decodes to {gen.canonical(walked)[:200]}, "
                      f"the vector says {gen.canonical(expected)[:200]}")
    try:
        unpacked = {} if not header_bytes else gen.normalize_unpacked(gen.unpack(header_bytes))
    except Exception as e:  # any python-msgpack failure is a finding to report
        return errors + [f"python msgpack cannot decode the header: {e!r}"]
    if not gen.strict_equal(unpacked, gen.typed_to_py(walked)):
        errors.append(f"python msgpack decodes the header to {unpacked!r}")
    return errors


def frame_vector_errors(v):
    try:
        frame = bytes.fromhex(v["frame"])
        op, header_bytes, payload = parse_frame(frame)
    except ValueError as e:
        return [f"frame: {e}"]
    errors = []
    if op != v["op"]:
        errors.append(f"frame op {op:#04x} but op {v['op']:#04x}")
    if payload.hex() != v["payload"]:
        errors.append(f"frame payload {payload.hex()[:80]} but payload {v['payload'][:80]}")
    if payload and not gen.OP_HAS_PAYLOAD.get(op, False):
        errors.append(f"op {v['op_name']} carries no payload")
    errors += header_errors(header_bytes, v["header"])
    verdict = gen.classify_stream(frame, False, gen.MAX_FRAME_DEFAULT, True)
    if verdict != "ok":
        errors.append(f"the reference decoder rejects it: {verdict}")
    return errors


def all_fields_errors(v):
    """The "<op>-all-fields" rule on a typed header."""
    fields = gen.FIELDS[v["op_name"]]
    header = v["header"]
    errors = []
    if set(header) != set(fields):
        errors.append(f"all-fields header has keys {sorted(header)}, the op has {sorted(fields)}")
    for key in set(header) & set(fields):
        if gen.is_zero(header[key]) or gen.field_error({key: fields[key]}, {key: header[key]}):
            errors.append(f"all-fields: {key} is a zero value or has the wrong type")
        sub = gen.SUBFIELDS.get(fields[key])
        if sub and gen.is_map(header[key]):
            items = dict(gen.map_items(header[key]))
            if set(items) != set(sub) or any(gen.is_zero(x) for x in items.values()):
                errors.append(f"all-fields: {key} must set every one of {sorted(sub)} to a non-zero value")
    return errors


def frames_file_errors(vectors):
    errors, seen = [], []
    for v in vectors:
        if v["op_name"] not in seen:
            seen.append(v["op_name"])
            expected_name = gen.kebab(v["op_name"]) + "-all-fields"
            if v["name"] != expected_name:
                errors.append(f"{v['name']}: the first {v['op_name']} vector must be {expected_name}")
            else:
                errors += [f"{v['name']}: {e}" for e in all_fields_errors(v)]
    missing = [name for _, name, _ in gen.OPS if name not in seen]
    if missing:
        errors.append(f"frames.json lacks ops: {', '.join(missing)}")
    return errors


# ------------------------------------------------------------------ invalid, urls


def invalid_vector_errors(v):
    data = bytes.fromhex(v["input"])
    if v["framing"] == "stream":
        verdict = gen.classify_stream(data, v["includes_preamble"], v["max_frame"], v["end_of_stream"])
    else:
        verdict = gen.classify_message(data, v["max_frame"])
    expected = (v["code"], v["fatal"], v.get("field"))
    if verdict != expected:
        return [f"the reference decoder gives {verdict}, the vector says {expected}"]
    return []


def url_vector_errors(v):
    try:
        got = {"expect": gen.parse_url(v["url"])}
    except gen.UrlError as e:
        got = {"error": str(e)}
    if "expect" in v and got.get("expect") != v["expect"]:
        return [f"the reference parser gives {got}"]
    if "error" in v and "error" not in got:
        return [f"the reference parser accepts it: {got['expect']}"]
    return []


# ------------------------------------------------------------------ driver


def common_errors(v):
    errors = []
    for key in ("name", "description"):
        text = v.get(key)
        if not isinstance(text, str) or not text.strip() or "\n" in text or "\r" in text:
            errors.append(f"{key} must be a non-empty single line")
    for key in HEX_FIELDS & set(v):
        if not isinstance(v[key], str) or not HEX_RE.fullmatch(v[key]):
            errors.append(f"{key} is not lowercase hex")
    return errors


PER_VECTOR = {
    "frames.json": frame_vector_errors,
    "encodings.json": frame_vector_errors,
    "invalid.json": invalid_vector_errors,
    "urls.json": url_vector_errors,
}


def file_errors(directory, filename, names):
    path = os.path.join(directory, filename)
    try:
        document = load(path)
    except (OSError, ValueError) as e:
        return [f"{filename}: cannot load: {e}"], 0
    errors = [f"{filename}: {e}" for e in schema_errors(
        os.path.join(HERE, "schema", filename.replace(".json", ".schema.json")), document)]
    if errors:  # the invariants below assume the shape the schema guarantees
        return errors, 0
    errors += [f"{filename}: {e}" for e in typed_errors(document, "$")]
    for v in document["vectors"]:
        names.setdefault(v["name"], []).append(filename)
        errors += [f"{filename}: {v['name']}: {e}" for e in common_errors(v) + PER_VECTOR[filename](v)]
    if filename == "frames.json":
        errors += [f"frames.json: {e}" for e in frames_file_errors(document["vectors"])]
    return errors, len(document["vectors"])


def main(argv=None):
    parser = argparse.ArgumentParser(description="Validate the FireMQ vector files.")
    parser.add_argument("--dir", default=HERE, help="directory of the vector files (default: %(default)s)")
    args = parser.parse_args(argv)
    errors, total, names = [], 0, {}
    for filename in FILES:
        file_errs, count = file_errors(args.dir, filename, names)
        errors += file_errs
        total += count
    errors += [f"name {name} is used {len(files)} times ({', '.join(files)})"
               for name, files in sorted(names.items()) if len(files) > 1]
    if errors:
        for error in errors:
            print(error, file=sys.stderr)
        print(f"schemas: {len(errors)} problem(s) in {len(FILES)} files", file=sys.stderr)
        return 1
    print(f"schemas: {len(FILES)} files, {total} vectors, all valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
