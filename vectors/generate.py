#!/usr/bin/python3
"""Independent test-vector generator for the FireMQ protocol, version 1.

Writes frames.json, encodings.json, invalid.json and urls.json (see README.md
next to this file). It is the second, independent implementation of the wire
format: it uses only the Python standard library and python3-msgpack, never the
C++ codec in protocol/. Every vector is self-checked before it is written:
headers are decoded again with msgpack.unpackb and with a format-aware walker
(which tells float32 from float64), frames are run through a small reference
decoder that implements the framing rules, and URLs through a reference parser.

Output is deterministic: no randomness, no timestamps, fixed key order.

Usage: /usr/bin/python3 vectors/generate.py [--out-dir DIR]
Run it with Debian's /usr/bin/python3 (python3-msgpack 1.0.3).
"""

import argparse
import json
import math
import os
import re
import struct
import sys
from dataclasses import dataclass

import msgpack

# --------------------------------------------------------------------------
# Protocol tables (spec: "Op codes" and the per-op field tables)
# --------------------------------------------------------------------------

# (op code, spec name, carries a payload)
OPS = [
    (0x01, "hello", False), (0x02, "welcome", False), (0x03, "ping", False),
    (0x04, "pong", False), (0x05, "close", False), (0x06, "ok", False),
    (0x07, "error", False), (0x08, "flow", False),
    (0x10, "declare_exchange", False), (0x11, "delete_exchange", False),
    (0x12, "declare_queue", False), (0x13, "delete_queue", False),
    (0x14, "purge_queue", False), (0x15, "bind", False), (0x16, "unbind", False),
    (0x20, "publish", True), (0x21, "confirm", False), (0x22, "return", True),
    (0x30, "subscribe", False), (0x31, "unsubscribe", False), (0x32, "credit", False),
    (0x33, "deliver", True), (0x34, "cancelled", False), (0x35, "ack", False),
    (0x36, "nack", False), (0x37, "get", False), (0x38, "get_ok", True),
]
OP_CODE = {name: code for code, name, _ in OPS}
OP_NAME = {code: name for code, name, _ in OPS}
OP_HAS_PAYLOAD = {code: has for code, _, has in OPS}

# Field types: uint, str, bool, map (free-form), strs ([str]), and the typed
# sub-maps auth, server and props listed in SUBFIELDS.
PROPS_FIELDS = {
    "content_type": "str", "content_encoding": "str", "correlation_id": "str",
    "reply_to": "str", "expiration": "uint", "message_id": "str",
    "timestamp": "uint", "type": "str", "user_id": "str", "app_id": "str",
    "priority": "uint",
}
SUBFIELDS = {
    "auth": {"mech": "str", "user": "str", "pass": "str"},
    "server": {"name": "str", "version": "str"},
    "props": PROPS_FIELDS,
}
_MESSAGE = {"exchange": "str", "key": "str", "props": "props", "headers": "map"}
_BIND = {"rid": "uint", "exchange": "str", "queue": "str", "to_exchange": "str",
         "key": "str", "args": "map"}
FIELDS = {
    "hello": {"ver": "uint", "vhost": "str", "auth": "auth", "heartbeat": "uint",
              "client": "map", "caps": "strs"},
    "welcome": {"ver": "uint", "server": "server", "conn_id": "str",
                "heartbeat": "uint", "max_frame": "uint", "caps": "strs"},
    "ping": {},
    "pong": {},
    "close": {"code": "uint", "msg": "str"},
    "ok": {"rid": "uint", "name": "str", "messages": "uint", "consumers": "uint",
           "empty": "bool"},
    "error": {"rid": "uint", "code": "uint", "msg": "str", "fatal": "bool"},
    "flow": {"pause": "bool"},
    "declare_exchange": {"rid": "uint", "name": "str", "type": "str",
                         "durable": "bool", "auto_delete": "bool",
                         "internal": "bool", "passive": "bool", "args": "map"},
    "delete_exchange": {"rid": "uint", "name": "str", "if_unused": "bool"},
    "declare_queue": {"rid": "uint", "name": "str", "durable": "bool",
                      "exclusive": "bool", "auto_delete": "bool",
                      "passive": "bool", "args": "map"},
    "delete_queue": {"rid": "uint", "name": "str", "if_unused": "bool",
                     "if_empty": "bool"},
    "purge_queue": {"rid": "uint", "name": "str"},
    "bind": _BIND,
    "unbind": _BIND,
    "publish": {"seq": "uint", "exchange": "str", "key": "str",
                "mandatory": "bool", "persistent": "bool", "props": "props",
                "headers": "map"},
    "confirm": {"upto": "uint", "seq": "uint", "nack": "bool", "code": "uint",
                "msg": "str"},
    "return": {"seq": "uint", "code": "uint", "msg": "str", **_MESSAGE},
    "subscribe": {"rid": "uint", "sub": "uint", "queue": "str", "credit": "uint",
                  "no_ack": "bool", "exclusive": "bool", "tag": "str",
                  "args": "map"},
    "unsubscribe": {"rid": "uint", "sub": "uint"},
    "credit": {"sub": "uint", "credit": "uint"},
    "deliver": {"sub": "uint", "tag": "uint", "redelivered": "bool", **_MESSAGE},
    "cancelled": {"sub": "uint", "code": "uint", "msg": "str"},
    "ack": {"tag": "uint", "multiple": "bool"},
    "nack": {"tag": "uint", "multiple": "bool", "requeue": "bool"},
    "get": {"rid": "uint", "queue": "str", "no_ack": "bool"},
    "get_ok": {"rid": "uint", "tag": "uint", "redelivered": "bool",
               "exchange": "str", "key": "str", "remaining": "uint",
               "props": "props", "headers": "map"},
}
assert set(FIELDS) == set(OP_CODE)

V1_CAPS = ["confirms", "credit", "mandatory", "exchange-bindings", "dead-letter", "ttl"]

PREAMBLE = b"FMQ1"
MAX_FRAME_BEFORE_WELCOME = 65536
MAX_FRAME_DEFAULT = 16777216
MAX_NESTING = 64          # the reference decoder's bound on container nesting
SAFE_INT = 2**53 - 1      # largest integer written as a bare JSON number

# --------------------------------------------------------------------------
# Value wrappers for the hand encoder
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class F32:
    """A float to be written as MessagePack float32."""
    x: float


@dataclass(frozen=True)
class F64:
    """A float to be written as MessagePack float64."""
    x: float


@dataclass(frozen=True)
class Ext:
    """A MessagePack ext value. (msgpack.ExtType refuses negative types.)"""
    code: int
    data: bytes


@dataclass(frozen=True)
class Fmt:
    """Forces the MessagePack format of one value, e.g. Fmt("uint16", 7)."""
    fmt: str
    value: object


@dataclass(frozen=True)
class Pairs:
    """A map with explicit key order and keys that may be Fmt-wrapped."""
    pairs: tuple
    fmt: str = None


@dataclass(frozen=True)
class Raw:
    """Bytes inserted verbatim (for malformed inputs)."""
    data: bytes


# --------------------------------------------------------------------------
# Hand MessagePack encoder (can force any format)
# --------------------------------------------------------------------------

INT_FORMATS = {  # name: (type byte, struct code)
    "uint8": (0xcc, ">B"), "uint16": (0xcd, ">H"), "uint32": (0xce, ">I"),
    "uint64": (0xcf, ">Q"), "int8": (0xd0, ">b"), "int16": (0xd1, ">h"),
    "int32": (0xd2, ">i"), "int64": (0xd3, ">q"),
}
# Length-prefixed families: format name -> (type byte or fix base, max length,
# struct code of the length). Fix formats carry the length in the type byte.
LEN_FORMATS = {
    "fixstr": (0xa0, 31, None), "str8": (0xd9, 0xff, ">B"),
    "str16": (0xda, 0xffff, ">H"), "str32": (0xdb, 0xffffffff, ">I"),
    "bin8": (0xc4, 0xff, ">B"), "bin16": (0xc5, 0xffff, ">H"),
    "bin32": (0xc6, 0xffffffff, ">I"),
    "fixarray": (0x90, 15, None), "array16": (0xdc, 0xffff, ">H"),
    "array32": (0xdd, 0xffffffff, ">I"),
    "fixmap": (0x80, 15, None), "map16": (0xde, 0xffff, ">H"),
    "map32": (0xdf, 0xffffffff, ">I"),
}
FIXEXT = {1: 0xd4, 2: 0xd5, 4: 0xd6, 8: 0xd7, 16: 0xd8}
EXT_FORMATS = {"ext8": (0xc7, ">B"), "ext16": (0xc8, ">H"), "ext32": (0xc9, ">I")}


def smallest_int_format(v):
    if 0 <= v <= 0x7f:
        return "fixint"
    if -32 <= v < 0:
        return "negative-fixint"
    order = ["uint8", "uint16", "uint32", "uint64"] if v >= 0 else ["int8", "int16", "int32", "int64"]
    for fmt in order:
        if int_fits(fmt, v):
            return fmt
    raise ValueError(f"integer out of MessagePack range: {v}")


def int_fits(fmt, v):
    if fmt == "fixint":
        return 0 <= v <= 0x7f
    if fmt == "negative-fixint":
        return -32 <= v <= -1
    bits = struct.calcsize(INT_FORMATS[fmt][1]) * 8
    if fmt.startswith("u"):
        return 0 <= v < 2**bits
    return -2**(bits - 1) <= v < 2**(bits - 1)


def enc_int(v, fmt=None):
    fmt = fmt or smallest_int_format(v)
    if not int_fits(fmt, v):
        raise ValueError(f"{v} does not fit {fmt}")
    if fmt in ("fixint", "negative-fixint"):
        return struct.pack(">b" if v < 0 else ">B", v)
    code, packfmt = INT_FORMATS[fmt]
    return bytes([code]) + struct.pack(packfmt, v)


def smallest_len_format(family, n):
    names = {"str": ["fixstr", "str8", "str16", "str32"],
             "bin": ["bin8", "bin16", "bin32"],
             "array": ["fixarray", "array16", "array32"],
             "map": ["fixmap", "map16", "map32"]}[family]
    return next(f for f in names if n <= LEN_FORMATS[f][1])


def enc_len(family, n, fmt=None):
    """The type byte(s) and length of a str, bin, array or map."""
    fmt = fmt or smallest_len_format(family, n)
    if not fmt.startswith(("fix" + family, family)):
        raise ValueError(f"{fmt} is not a {family} format")
    code, maxlen, packfmt = LEN_FORMATS[fmt]
    if n > maxlen:
        raise ValueError(f"length {n} does not fit {fmt}")
    if packfmt is None:
        return bytes([code | n])
    return bytes([code]) + struct.pack(packfmt, n)


def enc_ext(ext, fmt=None):
    n = len(ext.data)
    if fmt is None:
        fmt = f"fixext{n}" if n in FIXEXT else smallest_ext_format(n)
    if fmt.startswith("fixext"):
        if int(fmt[6:]) != n:
            raise ValueError(f"{fmt} needs {fmt[6:]} bytes, got {n}")
        head = bytes([FIXEXT[n]])
    else:
        code, packfmt = EXT_FORMATS[fmt]
        head = bytes([code]) + struct.pack(packfmt, n)
    return head + struct.pack(">b", ext.code) + ext.data


def smallest_ext_format(n):
    return "ext8" if n <= 0xff else "ext16" if n <= 0xffff else "ext32"


def enc_map(pairs, fmt=None):
    out = bytearray(enc_len("map", len(pairs), fmt))
    for k, v in pairs:
        out += enc(k) + enc(v)
    return bytes(out)


def enc_array(items, fmt=None):
    out = bytearray(enc_len("array", len(items), fmt))
    for item in items:
        out += enc(item)
    return bytes(out)


def enc_forced(fmt, v):
    """Encodes v in the MessagePack format named fmt."""
    if fmt == "float32":
        return b"\xca" + struct.pack(">f", v)
    if fmt == "float64":
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, bool):
        raise TypeError("bool has no format choice")
    if isinstance(v, int):
        return enc_int(v, fmt)
    if isinstance(v, str):
        data = v.encode("utf-8")
        return enc_len("str", len(data), fmt) + data
    if isinstance(v, bytes):
        return enc_len("bin", len(v), fmt) + v
    if isinstance(v, Ext):
        return enc_ext(v, fmt)
    if isinstance(v, (list, tuple)):
        return enc_array(v, fmt)
    if isinstance(v, dict):
        return enc_map(list(v.items()), fmt)
    raise TypeError(f"cannot force {fmt} on {v!r}")


def enc(v):
    """Encodes a value in its smallest format, as msgpack.packb does."""
    if isinstance(v, Raw):
        return v.data
    if isinstance(v, Fmt):
        return enc_forced(v.fmt, v.value)
    if isinstance(v, Pairs):
        return enc_map(v.pairs, v.fmt)
    if v is None:
        return b"\xc0"
    if isinstance(v, bool):
        return b"\xc3" if v else b"\xc2"
    if isinstance(v, int):
        return enc_int(v)
    if isinstance(v, F32):
        return enc_forced("float32", v.x)
    if isinstance(v, F64):
        return enc_forced("float64", v.x)
    if isinstance(v, float):
        raise TypeError("write floats as F32(...) or F64(...) so their width is deliberate")
    if isinstance(v, (str, bytes, Ext, list, tuple, dict)):
        return enc_forced(None, v)
    raise TypeError(f"cannot encode {v!r}")


# --------------------------------------------------------------------------
# Typed JSON (README: "Typed JSON")
# --------------------------------------------------------------------------

def json_float(x):
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def float32_value(x):
    return struct.unpack(">f", struct.pack(">f", x))[0]


def typed_int(v):
    return v if -SAFE_INT <= v <= SAFE_INT else {"$int": str(v)}


def typed_map(pairs):
    """pairs: list of (typed key, typed value)."""
    plain = all(isinstance(k, str) and not k.startswith("$") for k, _ in pairs)
    if plain:
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError(f"duplicate map keys: {keys}")
        return dict(pairs)
    return {"$map": [[k, v] for k, v in pairs]}


def typed(v):
    """Typed JSON of a generator value (plain Python plus the wrappers above)."""
    if isinstance(v, Fmt):
        return typed(v.value)
    if isinstance(v, Pairs):
        return typed_map([(typed(k), typed(x)) for k, x in v.pairs])
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return typed_int(v)
    if isinstance(v, F32):
        return {"$float32": json_float(float32_value(v.x))}
    if isinstance(v, F64):
        return {"$float64": json_float(v.x)}
    if isinstance(v, bytes):
        return {"$bin": v.hex()}
    if isinstance(v, Ext):
        return {"$ext": [v.code, v.data.hex()]}
    if isinstance(v, (list, tuple)):
        return [typed(x) for x in v]
    if isinstance(v, dict):
        return typed_map([(typed(k), typed(x)) for k, x in v.items()])
    raise TypeError(f"no typed JSON for {v!r}")


def is_tagged(t):
    return isinstance(t, dict) and len(t) == 1 and next(iter(t)).startswith("$")


def is_map(t):
    return isinstance(t, dict) and (not is_tagged(t) or "$map" in t)


def map_items(t):
    """(key, value) pairs of a typed map, plain object or $map."""
    return [tuple(p) for p in t["$map"]] if "$map" in t else list(t.items())


def is_uint(t):
    if isinstance(t, int) and not isinstance(t, bool):
        return t >= 0
    return isinstance(t, dict) and set(t) == {"$int"} and int(t["$int"]) >= 0


def is_zero(t):
    """The spec's zero values: false, 0, "", empty map, empty array."""
    if isinstance(t, bool):
        return t is False
    if isinstance(t, (int, str, list)):
        return t in (0, "", [])
    return is_map(t) and not map_items(t)


def typed_float(t, tag):
    x = t[tag]
    return float("nan") if x == "NaN" else float("inf") if x == "Infinity" \
        else float("-inf") if x == "-Infinity" else float(x)


def typed_to_py(t):
    """Typed JSON -> the Python value msgpack.unpackb(raw=False) gives."""
    if isinstance(t, list):
        return [typed_to_py(x) for x in t]
    if not isinstance(t, dict):
        return t
    if not is_tagged(t):
        return {k: typed_to_py(v) for k, v in t.items()}
    tag = next(iter(t))
    if tag == "$int":
        return int(t[tag])
    if tag in ("$float32", "$float64"):
        return typed_float(t, tag)
    if tag == "$bin":
        return bytes.fromhex(t[tag])
    if tag == "$ext":
        return Ext(t[tag][0], bytes.fromhex(t[tag][1]))
    if tag == "$map":
        return {hashable(typed_to_py(k)): typed_to_py(v) for k, v in t[tag]}
    raise ValueError(f"unknown tag {tag}")


def hashable(v):
    return tuple(hashable(x) for x in v) if isinstance(v, list) else v


def normalize_unpacked(v):
    """msgpack decodes ext type -1 as Timestamp; turn it back into Ext."""
    if isinstance(v, msgpack.Timestamp):
        return Ext(-1, v.to_bytes())
    if isinstance(v, (list, tuple)):
        return type(v)(normalize_unpacked(x) for x in v)
    if isinstance(v, dict):
        return {normalize_unpacked(k): normalize_unpacked(x) for k, x in v.items()}
    return v


def strict_equal(a, b):
    """Equality that tells bool from int and float from int, NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or struct.pack(">d", a) == struct.pack(">d", b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        ia, ib = list(a.items()), list(b.items())
        return len(ia) == len(ib) and all(
            strict_equal(ka, kb) and strict_equal(va, vb) for (ka, va), (kb, vb) in zip(ia, ib))
    return a == b


def canonical(t):
    return json.dumps(t, ensure_ascii=False)


# --------------------------------------------------------------------------
# Format-aware decoder: MessagePack bytes -> typed JSON
# --------------------------------------------------------------------------

class DecodeError(Exception):
    pass


class Walker:
    """Decodes MessagePack into typed JSON, keeping float32 and float64 apart.

    max_depth bounds container nesting; the outermost container has depth 1.
    """

    def __init__(self, data, max_depth=None):
        self.data, self.pos, self.max_depth = data, 0, max_depth

    def take(self, n):
        if n > len(self.data) - self.pos:
            raise DecodeError(f"truncated: need {n} bytes at offset {self.pos}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def value(self, depth=1):
        b = self.take(1)[0]
        if b <= 0x7f:
            return b
        if b >= 0xe0:
            return b - 0x100
        if 0x80 <= b <= 0x8f:
            return self.map(b & 0x0f, depth)
        if 0x90 <= b <= 0x9f:
            return self.array(b & 0x0f, depth)
        if 0xa0 <= b <= 0xbf:
            return self.string(b & 0x1f)
        return self.typed_value(b, depth)

    def typed_value(self, b, depth):
        simple = {0xc0: None, 0xc2: False, 0xc3: True}
        if b in simple:
            return simple[b]
        if b == 0xc1:
            raise DecodeError("0xc1 is never used in MessagePack")
        for fmt, (code, packfmt) in INT_FORMATS.items():
            if b == code:
                return typed_int(self.unpack(packfmt))
        if b == 0xca:
            return {"$float32": json_float(self.unpack(">f"))}
        if b == 0xcb:
            return {"$float64": json_float(self.unpack(">d"))}
        return self.sized_value(b, depth)

    def sized_value(self, b, depth):
        sizes = {0xd9: ">B", 0xda: ">H", 0xdb: ">I"}
        if b in sizes:
            return self.string(self.unpack(sizes[b]))
        bins = {0xc4: ">B", 0xc5: ">H", 0xc6: ">I"}
        if b in bins:
            return {"$bin": self.take(self.unpack(bins[b])).hex()}
        exts = {0xc7: ">B", 0xc8: ">H", 0xc9: ">I"}
        if b in exts:
            return self.ext(self.unpack(exts[b]))
        fixext = {v: k for k, v in FIXEXT.items()}
        if b in fixext:
            return self.ext(fixext[b])
        if b in (0xdc, 0xdd):
            return self.array(self.unpack(">H" if b == 0xdc else ">I"), depth)
        if b in (0xde, 0xdf):
            return self.map(self.unpack(">H" if b == 0xde else ">I"), depth)
        raise AssertionError(f"unhandled type byte {b:#x}")

    def string(self, n):
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"str is not UTF-8: {e}") from None

    def ext(self, n):
        code = self.unpack(">b")
        return {"$ext": [code, self.take(n).hex()]}

    def enter(self, depth):
        if self.max_depth is not None and depth > self.max_depth:
            raise DecodeError(f"nesting deeper than {self.max_depth} levels")

    def array(self, n, depth):
        self.enter(depth)
        return [self.value(depth + 1) for _ in range(n)]

    def map(self, n, depth):
        self.enter(depth)
        pairs = []
        for _ in range(n):
            k = self.value(depth + 1)
            pairs.append((k, self.value(depth + 1)))
        return typed_map(pairs)


def decode_typed(data, max_depth=None):
    """Decodes exactly one MessagePack value filling data."""
    w = Walker(data, max_depth)
    value = w.value()
    if w.pos != len(data):
        raise DecodeError(f"{len(data) - w.pos} trailing bytes after the value")
    return value


def decode_header(header_bytes):
    """Typed JSON of a header; hlen 0 means an empty map."""
    return {} if not header_bytes else decode_typed(header_bytes)


def unpack(data):
    """python-msgpack's decoding of one value, ext values as Ext."""
    return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=Ext)


def check_header(header_bytes, expected):
    """Self-check: both decoders must give the intended typed value."""
    got = decode_header(header_bytes)
    if canonical(got) != canonical(expected):
        raise AssertionError(f"walker gave {canonical(got)}, intended {canonical(expected)}")
    unpacked = {} if not header_bytes else normalize_unpacked(unpack(header_bytes))
    if not strict_equal(unpacked, typed_to_py(expected)):
        raise AssertionError(f"msgpack gave {unpacked!r}, intended {canonical(expected)}")


# --------------------------------------------------------------------------
# Frames
# --------------------------------------------------------------------------

def frame_body(op, header_bytes, payload=b""):
    """A frame without its len field: what one WebSocket message carries."""
    return bytes([op]) + struct.pack(">I", len(header_bytes)) + header_bytes + payload


def stream_frame(op, header_bytes, payload=b""):
    """A frame as sent on TCP and TLS: len u32 BE, then the frame body."""
    body = frame_body(op, header_bytes, payload)
    return struct.pack(">I", len(body)) + body


def has_f32(v):
    if isinstance(v, F32):
        return True
    if isinstance(v, dict):
        return any(has_f32(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return any(has_f32(x) for x in v)
    return False


def plain(v):
    """A generator value as msgpack.packb takes it (F64 -> float)."""
    if isinstance(v, F64):
        return v.x
    if isinstance(v, Ext):
        return msgpack.ExtType(v.code, v.data)
    if isinstance(v, (F32, Fmt, Pairs, Raw)):
        raise TypeError(f"{v!r} has no plain form")
    if isinstance(v, dict):
        return {plain(k): plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def packed_header(header):
    """Header bytes for frames.json: msgpack.packb, or the hand encoder when a
    float32 must be kept (packb can only write all floats one way). The hand
    encoder is checked against packb wherever both apply."""
    if header is None:
        return b""
    hand = enc(header)
    if has_f32(header):
        return hand
    packed = msgpack.packb(plain(header), use_bin_type=True)
    if packed != hand:
        raise AssertionError(f"hand encoder disagrees with packb: {hand.hex()} vs {packed.hex()}")
    return packed


def kebab(op_name):
    return op_name.replace("_", "-")


def frame_vector(name, description, op_name, header_bytes, header_typed, payload, variant=None):
    check_header(header_bytes, header_typed)
    op = OP_CODE[op_name]
    frame = stream_frame(op, header_bytes, payload)
    verdict = classify_stream(frame, False, MAX_FRAME_DEFAULT, True)
    if verdict != "ok":
        raise AssertionError(f"{name}: the reference decoder rejects a valid frame: {verdict}")
    vector = {"name": name, "description": description}
    if variant is not None:
        vector["variant"] = variant
    vector.update({"op": op, "op_name": op_name, "frame": frame.hex(),
                   "header": header_typed, "payload": payload.hex()})
    return vector


# --------------------------------------------------------------------------
# Reference decoder for framing and header rules (checks invalid.json)
# --------------------------------------------------------------------------

def field_error(fields, header_map, prefix=""):
    """The first field of header_map whose value has the wrong type, or None."""
    for key, value in map_items(header_map):
        ftype = fields.get(key) if isinstance(key, str) else None
        if ftype is None:
            continue  # unknown keys are ignored
        if value is None:
            continue  # nil reads as an omitted field (docs/spec-notes.md)
        path = prefix + key
        if ftype in SUBFIELDS:
            if not is_map(value):
                return path
            bad = field_error(SUBFIELDS[ftype], value, path + ".")
            if bad:
                return bad
        elif not value_has_type(ftype, value):
            return path
    return None


def value_has_type(ftype, value):
    if ftype == "uint":
        return is_uint(value)
    if ftype == "str":
        return isinstance(value, str)
    if ftype == "bool":
        return isinstance(value, bool)
    if ftype == "map":
        return is_map(value)
    if ftype == "strs":
        return isinstance(value, list) and all(isinstance(x, str) for x in value)
    raise AssertionError(ftype)


def classify_body(body):
    """A frame body (op, hlen, header, payload) -> "ok" or (code, fatal, field)."""
    op = body[0]
    hlen = struct.unpack(">I", body[1:5])[0]
    if hlen > len(body) - 5:
        return (501, True, None)
    header_bytes, payload = body[5:5 + hlen], body[5 + hlen:]
    if op not in OP_NAME:
        return (540, False, None)
    if payload and not OP_HAS_PAYLOAD[op]:
        return (501, True, None)
    try:
        header = {} if not header_bytes else decode_typed(header_bytes, MAX_NESTING)
    except DecodeError:
        return (502, True, None)
    if not is_map(header) or not all(isinstance(k, str) for k, _ in map_items(header)):
        return (502, True, None)
    bad = field_error(FIELDS[OP_NAME[op]], header)
    return (502, True, bad) if bad else "ok"


def classify_stream(data, includes_preamble, max_frame, end_of_stream):
    """TCP/TLS bytes -> "ok", "incomplete" or the first (code, fatal, field)."""
    pos = 0
    if includes_preamble:
        if data[:len(PREAMBLE)] != PREAMBLE[:len(data)]:
            return (501, True, None)
        if len(data) < len(PREAMBLE):
            return (501, True, None) if end_of_stream else "incomplete"
        pos = len(PREAMBLE)
    while pos < len(data):
        if len(data) - pos < 4:
            return (501, True, None) if end_of_stream else "incomplete"
        n = struct.unpack(">I", data[pos:pos + 4])[0]
        if n < 5 or 4 + n > max_frame:
            return (501, True, None)
        if len(data) - pos - 4 < n:
            return (501, True, None) if end_of_stream else "incomplete"
        verdict = classify_body(data[pos + 4:pos + 4 + n])
        if verdict != "ok":
            return verdict
        pos += 4 + n
    return "ok"


def classify_message(msg, max_frame):
    """One WebSocket binary message -> "ok" or (code, fatal, field)."""
    if len(msg) < 5 or len(msg) + 4 > max_frame:
        return (501, True, None)
    return classify_body(msg)


# --------------------------------------------------------------------------
# frames.json
# --------------------------------------------------------------------------

BODY = b"\xff\xfe\x00\x01" + "order #42 \u2713".encode("utf-8") + b"\x80\xc1\n"


def all_props():
    return {
        "content_type": "application/json", "content_encoding": "gzip",
        "correlation_id": "req-0042", "reply_to": "amq.gen-reply-7",
        "expiration": 60000, "message_id": "msg-000001", "timestamp": 1700000000,
        "type": "order.created", "user_id": "alice", "app_id": "shop-frontend",
        "priority": 5,
    }


def rich_headers():
    """Application headers exercising every MessagePack type."""
    return {
        "nil": None, "true": True, "false": False, "negative": -42,
        "u64-max": 2**64 - 1, "float32": F32(1.5), "float64": F64(2.718281828459045),
        "string": "gr\u00fc\u00dfe \u2713", "binary": b"\x00\x01\xfe\xff",
        "array": [1, "two", None, F64(3.5)],
        "nested": {"region": "eu", "limits": {"max": 10}},
        "ext": Ext(42, b"\x01\x02\x03\x04"),
    }


def message_fields():
    return {"props": all_props(), "headers": rich_headers()}


def session_frames():
    """(name, description, op, header) for the connection-level ops."""
    return [
        ("hello-all-fields", "hello with every field set to a non-zero value", "hello",
         {"ver": 1, "vhost": "dev", "auth": {"mech": "plain", "user": "alice", "pass": "s3cret"},
          "heartbeat": 60, "client": {"name": "firemq-go", "version": "0.1.0", "lang": "go"},
          "caps": ["confirms", "credit", "mandatory"]}),
        ("hello-minimal", "hello with only ver; every other field takes its zero value", "hello",
         {"ver": 1}),
        ("welcome-all-fields", "welcome with every field set, advertising the six version 1 capabilities",
         "welcome", {"ver": 1, "server": {"name": "firemq", "version": "1.0.0"},
                     "conn_id": "127.0.0.1:52814 -> 127.0.0.1:5673", "heartbeat": 30,
                     "max_frame": 16777216, "caps": list(V1_CAPS)}),
        ("ping-all-fields", "ping has no fields: hlen 0, an empty header meaning an empty map",
         "ping", None),
        ("pong-all-fields", "pong has no fields: the header is the one-byte empty fixmap 0x80",
         "pong", {}),
        ("close-all-fields", "close with a normal-shutdown code and a message", "close",
         {"code": 200, "msg": "normal shutdown"}),
        ("close-connection-forced", "close sent by a broker that is shutting down", "close",
         {"code": 320, "msg": "broker shutting down"}),
        ("ok-all-fields", "codec vector: ok with every reply field set at once", "ok",
         {"rid": 7, "name": "amq.gen-JzTY20BRgKO-HjmUJj0wLg", "messages": 42, "consumers": 2,
          "empty": True}),
        ("ok-rid-only", "ok reply carrying only the request id", "ok", {"rid": 1}),
        ("ok-declare-queue", "ok reply to declare_queue with name, messages and consumers", "ok",
         {"rid": 3, "name": "orders.eu", "messages": 5, "consumers": 1}),
        ("ok-get-empty", "ok reply to get on an empty queue", "ok", {"rid": 9, "empty": True}),
        ("error-all-fields", "codec vector: error with rid, code, msg and fatal all set", "error",
         {"rid": 12, "code": 404, "msg": "NOT_FOUND - no queue 'orders' in vhost '/'",
          "fatal": True}),
        ("error-access-refused", "fatal access-refused error without rid, sent when authentication fails",
         "error", {"code": 403, "msg": "ACCESS_REFUSED - login was refused", "fatal": True}),
        ("flow-all-fields", "flow pausing publishers", "flow", {"pause": True}),
        ("flow-resume", "flow resuming publishers, with pause false written explicitly", "flow",
         {"pause": False}),
    ]


def topology_frames():
    """(name, description, op, header) for the topology ops."""
    queue_args = {
        "x-message-ttl": 60000, "x-expires": 1800000, "x-max-length": 10000,
        "x-max-length-bytes": 1048576, "x-overflow": "reject-publish",
        "x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "orders.dead",
        "x-single-active-consumer": True, "x-max-priority": 10,
    }
    return [
        ("declare-exchange-all-fields", "declare_exchange with every field set to a non-zero value",
         "declare_exchange",
         {"rid": 2, "name": "orders", "type": "topic", "durable": True, "auto_delete": True,
          "internal": True, "passive": True, "args": {"alternate-exchange": "orders.unrouted"}}),
        ("declare-exchange-durable-direct", "declare_exchange of a durable direct exchange",
         "declare_exchange", {"rid": 3, "name": "billing", "type": "direct", "durable": True}),
        ("delete-exchange-all-fields", "delete_exchange with if_unused", "delete_exchange",
         {"rid": 4, "name": "orders", "if_unused": True}),
        ("declare-queue-all-fields",
         "declare_queue with every field set, args using RabbitMQ x- arguments", "declare_queue",
         {"rid": 5, "name": "orders.eu", "durable": True, "exclusive": True, "auto_delete": True,
          "passive": True, "args": queue_args}),
        ("declare-queue-server-named", "declare_queue with an empty name: the server picks one",
         "declare_queue", {"rid": 6, "exclusive": True, "auto_delete": True}),
        ("delete-queue-all-fields", "delete_queue with if_unused and if_empty", "delete_queue",
         {"rid": 7, "name": "orders.eu", "if_unused": True, "if_empty": True}),
        ("purge-queue-all-fields", "purge_queue of a named queue", "purge_queue",
         {"rid": 8, "name": "orders.eu"}),
        ("bind-all-fields",
         "codec vector: bind with both queue and to_exchange set (the spec allows exactly one)",
         "bind", {"rid": 10, "exchange": "orders", "queue": "orders.eu", "to_exchange": "audit",
                  "key": "orders.eu.#", "args": {"x-match": "all", "region": "eu"}}),
        ("bind-queue", "bind a queue to a topic exchange", "bind",
         {"rid": 11, "exchange": "orders", "queue": "orders.eu", "key": "orders.eu.*"}),
        ("bind-exchange", "exchange-to-exchange bind", "bind",
         {"rid": 12, "exchange": "orders", "to_exchange": "audit", "key": "#"}),
        ("unbind-all-fields",
         "codec vector: unbind with both queue and to_exchange set (the spec allows exactly one)",
         "unbind", {"rid": 13, "exchange": "docs", "queue": "pdf.eu", "to_exchange": "archive",
                    "key": "pdf", "args": {"x-match": "any", "format": "pdf"}}),
        ("unbind-queue", "unbind a queue from a headers exchange", "unbind",
         {"rid": 14, "exchange": "docs", "queue": "pdf.eu", "args": {"x-match": "any", "format": "pdf"}}),
        ("unbind-exchange", "unbind an exchange-to-exchange binding", "unbind",
         {"rid": 15, "exchange": "orders", "to_exchange": "audit", "key": "#"}),
    ]


def message_frames():
    """(name, description, op, header, payload) for the message ops."""
    return [
        ("publish-all-fields",
         "publish with every field, all 11 props, rich headers and a non-UTF-8 body", "publish",
         {"seq": 1, "exchange": "orders", "key": "orders.eu.created", "mandatory": True,
          "persistent": True, **message_fields()}, BODY),
        ("publish-default-exchange", "publish to the default exchange without a confirm (seq 0)",
         "publish", {"key": "orders.eu"}, b"hello"),
        ("publish-empty-body", "publish with a zero-length body", "publish",
         {"seq": 2, "exchange": "amq.fanout"}, b""),
        ("confirm-all-fields", "codec vector: confirm with upto, seq, nack, code and msg all set",
         "confirm", {"upto": 10, "seq": 11, "nack": True, "code": 506,
                     "msg": "queue 'orders.eu' is full"}, b""),
        ("confirm-upto", "confirm of every outstanding publish up to seq 10", "confirm",
         {"upto": 10}, b""),
        ("confirm-nack", "nack of one publish refused by a full reject-publish queue", "confirm",
         {"seq": 11, "nack": True, "code": 506, "msg": "queue 'orders.eu' is full"}, b""),
        ("return-all-fields", "return of an unroutable mandatory publish, every field set", "return",
         {"seq": 3, "code": 312, "msg": "NO_ROUTE", "exchange": "orders",
          "key": "orders.xx.created", **message_fields()}, BODY),
        ("subscribe-all-fields", "subscribe with every field set to a non-zero value", "subscribe",
         {"rid": 20, "sub": 1, "queue": "orders.eu", "credit": 100, "no_ack": True,
          "exclusive": True, "tag": "billing-worker", "args": {"x-priority": 10}}, b""),
        ("subscribe-minimal", "subscribe with queue and initial credit only", "subscribe",
         {"rid": 21, "sub": 2, "queue": "orders.eu", "credit": 50}, b""),
        ("unsubscribe-all-fields", "unsubscribe of subscription 1", "unsubscribe",
         {"rid": 22, "sub": 1}, b""),
        ("credit-all-fields", "credit top-up of 50 messages", "credit", {"sub": 1, "credit": 50}, b""),
        ("deliver-all-fields", "deliver with every field, all 11 props, rich headers and a non-UTF-8 body",
         "deliver", {"sub": 1, "tag": 1, "redelivered": True, "exchange": "orders",
                     "key": "orders.eu.created", **message_fields()}, BODY),
        ("deliver-tag-above-2-32", "deliver with a delivery tag that needs uint64", "deliver",
         {"sub": 2, "tag": 4294967296, "key": "orders.eu"}, b"{\"id\":1}"),
        ("cancelled-all-fields", "cancelled subscription after its queue was deleted", "cancelled",
         {"sub": 1, "code": 404, "msg": "queue 'orders.eu' was deleted"}, b""),
        ("ack-all-fields", "ack of every delivery up to tag 5", "ack",
         {"tag": 5, "multiple": True}, b""),
        ("ack-tag-2-40", "ack of a single delivery with a tag above 2^32", "ack",
         {"tag": 1099511627776}, b""),
        ("nack-all-fields", "nack of every delivery up to tag 6, requeued", "nack",
         {"tag": 6, "multiple": True, "requeue": True}, b""),
        ("nack-dead-letter", "nack of one delivery without requeue", "nack", {"tag": 7}, b""),
        ("get-all-fields", "get with no_ack", "get", {"rid": 30, "queue": "orders.eu", "no_ack": True}, b""),
        ("get-ok-all-fields", "get_ok with every field, all 11 props, rich headers and a non-UTF-8 body",
         "get_ok", {"rid": 30, "tag": 8, "redelivered": True, "exchange": "orders",
                    "key": "orders.eu.created", "remaining": 41, **message_fields()}, BODY),
    ]


def check_all_fields(op_name, header):
    """The "<op>-all-fields" rule: every field of the op, each non-zero, no others."""
    t = typed(header) if header is not None else {}
    if set(t) != set(FIELDS[op_name]):
        raise AssertionError(f"{op_name}-all-fields: fields {sorted(t)} != {sorted(FIELDS[op_name])}")
    for key, ftype in FIELDS[op_name].items():
        if is_zero(t[key]) or field_error({key: ftype}, {key: t[key]}):
            raise AssertionError(f"{op_name}-all-fields: {key} is zero or mistyped")
        if ftype in SUBFIELDS and set(t[key]) != set(SUBFIELDS[ftype]):
            raise AssertionError(f"{op_name}-all-fields: {key} lacks sub-fields")
        if ftype in SUBFIELDS and any(is_zero(v) for v in t[key].values()):
            raise AssertionError(f"{op_name}-all-fields: {key} has a zero sub-field")


def frames_vectors():
    specs = [s + (b"",) for s in session_frames() + topology_frames()] + message_frames()
    vectors, seen_ops = [], []
    for name, description, op_name, header, payload in specs:
        if op_name not in seen_ops:
            seen_ops.append(op_name)
            if name != kebab(op_name) + "-all-fields":
                raise AssertionError(f"first vector of {op_name} is {name}")
            check_all_fields(op_name, header)
        header_typed = typed(header) if header is not None else {}
        vectors.append(frame_vector(name, description, op_name, packed_header(header),
                                    header_typed, payload))
    if seen_ops != [name for _, name, _ in OPS]:
        raise AssertionError(f"frames.json must list the ops in table order: {seen_ops}")
    return vectors


# --------------------------------------------------------------------------
# encodings.json
# --------------------------------------------------------------------------

CLOSE = {"code": 200, "msg": "bye"}
INT_VARIANTS = ["fixint", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"]


def map_format_encodings():
    out = [(f"close-{fmt}", fmt, f"close header {{code 200, msg bye}} as {fmt}", "close",
            Fmt(fmt, CLOSE), b"") for fmt in ("fixmap", "map16", "map32")]
    out.append(("close-key-order", "key-order", "close header with msg written before code",
                "close", {"msg": "bye", "code": 200}, b""))
    out.append(("close-keys-str8-str16", "keys-str8-str16",
                "close header whose keys are written as str8 and str16 instead of fixstr", "close",
                Pairs(((Fmt("str8", "code"), 200), (Fmt("str16", "msg"), "bye"))), b""))
    return out


def int_encodings():
    out = [(f"publish-seq-{fmt}", fmt, f"publish seq 7 as {fmt}", "publish",
            {"seq": Fmt(fmt, 7)}, b"hello") for fmt in INT_VARIANTS]
    out.append(("publish-seq-uint64-max", "uint64-max", "publish seq 2^64-1 as uint64", "publish",
                {"seq": Fmt("uint64", 2**64 - 1)}, b"hello"))
    negatives = [("negative-fixint", -1), ("int8", -1), ("int16", -1), ("int32", -1), ("int64", -1),
                 ("negative-fixint", -32), ("int8", -128), ("int16", -32768),
                 ("int32", -2**31), ("int64", -2**63)]
    for fmt, v in negatives:
        label = "minus-1" if v == -1 else "min"
        out.append((f"publish-header-{fmt}-{label}", fmt,
                    f"publish application header n = {v} as {fmt}", "publish",
                    {"headers": {"n": Fmt(fmt, v)}}, b"hello"))
    out.append(("deliver-tag-above-2-53", "uint64-big",
                "deliver tag 2^53+1, written in typed JSON as {\"$int\": ...}", "deliver",
                {"sub": 1, "tag": 2**53 + 1}, b"hello"))
    return out


def str_encodings():
    long_msg = "\u00fcnic\u00f6de \U0001f525 " * 20
    assert 255 < len(long_msg.encode("utf-8")) <= 0xffff
    out = [(f"close-msg-{fmt}", fmt, f"close msg bye as {fmt}", "close",
            {"code": 200, "msg": Fmt(fmt, "bye")}, b"") for fmt in ("fixstr", "str8", "str16", "str32")]
    out.append(("close-msg-str16-utf8", "str16-utf8",
                f"close msg of {len(long_msg.encode('utf-8'))} bytes of multi-byte UTF-8 as str16",
                "close", {"code": 200, "msg": long_msg}, b""))
    out.append(("close-msg-empty", "fixstr-empty", "close msg written explicitly as the empty string",
                "close", {"code": 200, "msg": ""}, b""))
    return out


def bin_ext_encodings():
    out = [(f"publish-header-{fmt}", fmt, f"publish application header bin 00ff80 as {fmt}",
            "publish", {"headers": {"b": Fmt(fmt, b"\x00\xff\x80")}}, b"hello")
           for fmt in ("bin8", "bin16", "bin32")]
    out.append(("publish-header-bin8-empty", "bin8-empty", "publish application header: empty bin8",
                "publish", {"headers": {"b": b""}}, b"hello"))
    out.append(("publish-header-bin16-256-bytes", "bin16-256", "publish application header: 256-byte bin16",
                "publish", {"headers": {"b": bytes(range(256))}}, b"hello"))
    for n, code in ((1, 1), (2, 2), (4, 4), (8, 8), (16, 16)):
        out.append((f"publish-header-fixext{n}", f"fixext{n}",
                    f"publish application header ext type {code} with {n} data bytes as fixext{n}",
                    "publish", {"headers": {"x": Ext(code, bytes(range(1, n + 1)))}}, b"hello"))
    exts = [("ext8", Ext(5, b"\x01\x02\x03"), "type 5 with 3 bytes"),
            ("ext16", Ext(127, b"\x01\x02\x03"), "type 127 with 3 bytes"),
            ("ext32", Ext(-128, b"\x01\x02\x03\x04\x05"), "type -128 with 5 bytes")]
    for fmt, ext, what in exts:
        out.append((f"publish-header-{fmt}", fmt, f"publish application header ext {what} as {fmt}",
                    "publish", {"headers": {"x": Fmt(fmt, ext)}}, b"hello"))
    out.append(("publish-header-ext8-empty", "ext8-empty", "publish application header ext type 6 with no data (ext8)",
                "publish", {"headers": {"x": Ext(6, b"")}}, b"hello"))
    out.append(("publish-header-timestamp32", "timestamp32",
                "publish application header: MessagePack timestamp (ext type -1, fixext4)",
                "publish", {"headers": {"ts": Ext(-1, struct.pack(">I", 1700000000))}}, b"hello"))
    return out


def float_encodings():
    cases = [("float32", F32(1.5), "1.5"), ("float32-inexact", F32(0.1), "0.1 rounded to float32"),
             ("float64", F64(0.1), "0.1"), ("float64-integral", F64(2.0), "2.0 (a float, not an int)"),
             ("float64-negative-zero", F64(-0.0), "-0.0"),
             ("float32-nan", F32(float("nan")), "NaN"),
             ("float32-negative-infinity", F32(float("-inf")), "-Infinity"),
             ("float64-infinity", F64(float("inf")), "Infinity")]
    return [(f"publish-header-{variant}", variant, f"publish application header f = {what} as "
             f"{variant.split('-')[0]}", "publish", {"headers": {"f": value}}, b"hello")
            for variant, value, what in cases]


def container_encodings():
    caps = ["confirms", "credit"]
    out = [(f"hello-caps-{fmt}", fmt, f"hello caps as {fmt}", "hello",
            {"ver": 1, "caps": Fmt(fmt, caps)}, b"") for fmt in ("fixarray", "array16", "array32")]
    out.append(("publish-props-map16-headers-map32", "nested-map16-map32",
                "publish props as map16 and headers as map32", "publish",
                {"seq": 1, "props": Fmt("map16", {"content_type": "text/plain", "priority": 1}),
                 "headers": Fmt("map32", {"a": 1})}, b"hello"))
    deep = 1
    for _ in range(16):
        deep = [deep]
    out.append(("publish-header-nested-arrays-16", "nesting-16",
                "publish application header of 16 nested arrays, well under any nesting bound",
                "publish", {"headers": {"deep": deep}}, b"hello"))
    return out


def map_key_encodings():
    return [
        ("publish-header-nil", "nil", "publish application headers holding nil, alone and in an array",
         "publish", {"headers": {"a": None, "b": [None, 1]}}, b"hello"),
        ("publish-header-int-keys", "int-keys",
         "publish application header holding a map with integer keys (typed JSON uses $map)",
         "publish", {"headers": {"m": {1: "one", -2: "minus two"}}}, b"hello"),
        ("publish-header-dollar-key", "dollar-key",
         "publish application headers with a key starting with $ (typed JSON uses $map)",
         "publish", {"headers": {"$type": "order", "plain": 1}}, b"hello"),
    ]


def empty_and_unknown_encodings():
    return [
        ("ping-empty-fixmap", "fixmap-empty", "ping whose header is the empty fixmap 0x80", "ping", {}, b""),
        ("pong-hlen-0", "hlen-0", "pong with hlen 0", "pong", None, b""),
        ("ok-empty-fixmap", "fixmap-empty",
         "ok whose header is the empty fixmap 0x80: every field takes its zero value", "ok", {}, b""),
        ("publish-hlen-0", "hlen-0",
         "publish with hlen 0 and a body: every field takes its zero value", "publish", None, b"body"),
        ("publish-explicit-zero-values", "explicit-zeros",
         "publish with every field written explicitly as its zero value", "publish",
         {"seq": 0, "exchange": "", "key": "", "mandatory": False, "persistent": False,
          "props": {}, "headers": {}}, b"hello"),
        ("hello-caps-empty", "fixarray-empty", "hello with caps written as an empty array", "hello",
         {"ver": 1, "caps": []}, b""),
        ("publish-unknown-key", "unknown-key", "publish with an unknown key that decoders must ignore",
         "publish", {"seq": 1, "x-future": {"a": [1, 2]}}, b"hello"),
        ("hello-unknown-keys", "unknown-keys", "hello with unknown keys of several types that decoders must ignore",
         "hello", {"ver": 1, "zz-nil": None, "zz-flag": True, "zz-list": [F64(1.25), b"\x01"]}, b""),
        ("publish-unknown-prop", "unknown-prop", "publish props with an unknown key that decoders must ignore",
         "publish", {"seq": 1, "props": {"content_type": "text/plain", "x-unknown-prop": 5}}, b"hello"),
    ]


def encodings_vectors():
    groups = [map_format_encodings(), int_encodings(), str_encodings(), bin_ext_encodings(),
              float_encodings(), container_encodings(), map_key_encodings(),
              empty_and_unknown_encodings()]
    vectors = []
    for name, variant, description, op_name, header, payload in [e for g in groups for e in g]:
        header_bytes = b"" if header is None else enc(header)
        header_typed = {} if header is None else typed(header)
        vectors.append(frame_vector(name, description, op_name, header_bytes, header_typed,
                                    payload, variant=variant))
    return vectors


# --------------------------------------------------------------------------
# invalid.json
# --------------------------------------------------------------------------

def invalid(name, description, data, code, fatal, basis, framing="stream",
            phase="after_welcome", preamble=False, eos=False, field=None):
    max_frame = MAX_FRAME_BEFORE_WELCOME if phase == "before_welcome" else MAX_FRAME_DEFAULT
    if framing == "stream":
        verdict = classify_stream(data, preamble, max_frame, eos)
    else:
        verdict = classify_message(data, max_frame)
    if verdict != (code, fatal, field):
        raise AssertionError(f"{name}: reference decoder says {verdict}, vector says {(code, fatal, field)}")
    vector = {"name": name, "description": description, "framing": framing,
              "includes_preamble": preamble, "phase": phase, "max_frame": max_frame,
              "input": data.hex(), "end_of_stream": eos, "code": code, "fatal": fatal,
              "basis": basis}
    if field is not None:
        vector["field"] = field
    return vector


def u32(n):
    return struct.pack(">I", n)


def framing_invalid():
    close = stream_frame(0x05, msgpack.packb(CLOSE))
    publish = stream_frame(0x20, msgpack.packb({"seq": 1}), b"hello world")
    ping = stream_frame(0x03, b"")
    return [
        invalid("truncated-len-field", "two bytes of a len field, then the peer closes",
                b"\x00\x00", 501, True, "spec", eos=True),
        invalid("truncated-header", "a close frame cut inside its header, then the peer closes",
                close[:-4], 501, True, "spec", eos=True),
        invalid("truncated-payload", "a publish frame cut inside its payload, then the peer closes",
                publish[:-3], 501, True, "spec", eos=True),
        invalid("truncated-after-valid-frame", "a complete ping, then half a frame, then the peer closes",
                ping + close[:6], 501, True, "spec", eos=True),
        invalid("len-0", "len 0: smaller than op and hlen (5 bytes)", u32(0), 501, True, "spec"),
        invalid("len-4", "len 4: one byte short of op and hlen", u32(4) + b"\x03\x00\x00\x00",
                501, True, "spec"),
        invalid("hlen-beyond-empty-frame", "len 5 with hlen 1: the header would run past the frame",
                u32(5) + b"\x03" + u32(1), 501, True, "spec"),
        invalid("hlen-beyond-frame-by-one", "hlen one byte larger than the rest of the frame",
                u32(6) + b"\x05" + u32(2) + b"\x80", 501, True, "spec"),
        invalid("hlen-max", "hlen 0xffffffff in a 6-byte frame (hlen + 5 overflows 32 bits)",
                u32(6) + b"\x05" + u32(0xffffffff) + b"\x80", 501, True, "spec"),
        invalid("oversize-before-welcome",
                "len 65533 before welcome: 4 + len exceeds 65536; refuse from the len field alone",
                u32(65533), 501, True, "spec", phase="before_welcome"),
        invalid("oversize-len-max-before-welcome", "len 0xffffffff before welcome; refuse from the len field alone",
                u32(0xffffffff), 501, True, "spec", phase="before_welcome"),
        invalid("oversize-after-welcome", "len 16777213 after welcome: 4 + len exceeds max_frame 16777216",
                u32(16777213), 501, True, "spec"),
        invalid("ws-empty-message", "an empty WebSocket message", b"", 501, True, "spec",
                framing="message"),
        invalid("ws-message-1-byte", "a WebSocket message holding only an op", b"\x03", 501, True,
                "spec", framing="message"),
        invalid("ws-message-4-bytes", "a 4-byte WebSocket message: shorter than op and hlen",
                b"\x03\x00\x00\x00", 501, True, "spec", framing="message"),
        invalid("ws-hlen-beyond-message", "a WebSocket message too short for its hlen",
                b"\x05" + u32(16) + b"\x80", 501, True, "spec", framing="message"),
    ]


def header_invalid():
    def close(header_bytes):
        return stream_frame(0x05, header_bytes)
    return [
        invalid("header-invalid-byte-c1", "header is 0xc1, a byte MessagePack never uses",
                close(b"\xc1"), 502, True, "reference"),
        invalid("header-array", "header is a MessagePack array, not a map",
                close(msgpack.packb([200, "bye"])), 502, True, "reference"),
        invalid("header-str", "header is a MessagePack str, not a map",
                close(msgpack.packb("bye")), 502, True, "reference"),
        invalid("header-int", "header is a MessagePack int, not a map",
                close(msgpack.packb(200)), 502, True, "reference"),
        invalid("header-trailing-bytes", "a complete map followed by a nil inside hlen",
                close(msgpack.packb({"code": 200}) + b"\xc0"), 502, True, "reference"),
        invalid("header-map-truncated", "a map of 2 entries holding only 1 within hlen",
                close(b"\x82" + msgpack.packb("code") + msgpack.packb(200)), 502, True, "reference"),
        invalid("header-map-completed-by-payload",
                "publish header {seq: ...} cut at hlen; the payload byte would complete it if read past hlen",
                stream_frame(0x20, b"\x81" + msgpack.packb("seq"), b"\x01"), 502, True, "reference"),
        invalid("header-int-key", "header map with an integer key",
                close(enc(Pairs((("code", 200), (1, "x"))))), 502, True, "reference"),
        invalid("header-bin-key", "header map with a bin key (keys must be str)",
                close(enc(Pairs(((b"code", 200),)))), 502, True, "reference"),
        invalid("header-nesting-65-arrays",
                "publish headers holding 65 nested single-element arrays (reference bound: 64 levels)",
                stream_frame(0x20, enc({"headers": {"deep": nested_arrays(65)}}), b"x"),
                502, True, "reference"),
        invalid("header-ext32-huge-size", "publish headers holding an ext32 that declares 0xffffffff bytes",
                stream_frame(0x20, enc({"headers": {"x": Raw(b"\xc9" + u32(0xffffffff) + b"\x01\x00\x00")}}), b"x"),
                502, True, "reference"),
    ]


def nested_arrays(levels):
    value = 1
    for _ in range(levels):
        value = [value]
    return value


def wrong_type_invalid():
    cases = [
        ("publish-seq-str", "publish seq as a str", 0x20, {"seq": "1"}, b"x", "seq", "after_welcome"),
        ("hello-ver-str", "hello ver as a str", 0x01, {"ver": "1"}, b"", "ver", "before_welcome"),
        ("close-code-negative", "close code as a negative int", 0x05, {"code": -1, "msg": "bye"}, b"",
         "code", "after_welcome"),
        ("subscribe-credit-float64", "subscribe credit as float64 10.0", 0x30,
         {"rid": 1, "sub": 1, "queue": "q", "credit": F64(10.0)}, b"", "credit", "after_welcome"),
        ("declare-queue-durable-int", "declare_queue durable as the int 1", 0x12,
         {"rid": 1, "name": "q", "durable": 1}, b"", "durable", "after_welcome"),
        ("publish-props-expiration-str", "publish props.expiration as an AMQP-style decimal str", 0x20,
         {"seq": 1, "props": {"expiration": "60000"}}, b"x", "props.expiration", "after_welcome"),
        ("hello-auth-user-int", "hello auth.user as an int", 0x01,
         {"ver": 1, "auth": {"mech": "plain", "user": 42, "pass": "x"}}, b"", "auth.user", "before_welcome"),
        ("hello-caps-str", "hello caps as a str instead of an array", 0x01,
         {"ver": 1, "caps": "confirms"}, b"", "caps", "before_welcome"),
        ("hello-caps-int-element", "hello caps holding an int", 0x01,
         {"ver": 1, "caps": ["confirms", 1]}, b"", "caps", "before_welcome"),
    ]
    return [invalid(f"wrong-type-{name}", f"wrong field type: {what}",
                    stream_frame(op, enc(header), payload), 502, True, "reference",
                    phase=phase, field=field)
            for name, what, op, header, payload, field, phase in cases]


def misc_invalid():
    return [
        invalid("unknown-op-0x7f", "op 0x7f is not in the op table; a valid empty header",
                stream_frame(0x7f, b"\x80"), 540, False, "spec"),
        invalid("unknown-op-0x39", "op 0x39 (commit_offset, reserved for later versions) with hlen 0",
                stream_frame(0x39, b""), 540, False, "spec"),
        invalid("ping-with-payload", "ping carrying a 3-byte payload; only 4 ops carry one",
                stream_frame(0x03, b"", b"abc"), 501, True, "reference"),
        invalid("ws-close-with-payload", "a WebSocket close message carrying a 1-byte payload",
                frame_body(0x05, msgpack.packb(CLOSE), b"\x00"), 501, True, "reference",
                framing="message"),
        invalid("preamble-amqp", "an AMQP 0-9-1 protocol header instead of FMQ1",
                b"AMQP\x00\x00\x09\x01", 501, True, "reference", phase="before_welcome", preamble=True),
        invalid("preamble-fmq2", "preamble FMQ2: an unsupported protocol version",
                b"FMQ2", 501, True, "reference", phase="before_welcome", preamble=True),
        invalid("preamble-truncated", "three bytes of the preamble, then the peer closes",
                b"FMQ", 501, True, "reference", phase="before_welcome", preamble=True, eos=True),
    ]


def invalid_vectors():
    return framing_invalid() + header_invalid() + wrong_type_invalid() + misc_invalid()


# --------------------------------------------------------------------------
# urls.json
# --------------------------------------------------------------------------

DEFAULT_PORTS = {"fire": 5673, "fires": 5674, "ws": 15672, "wss": 15671}


class UrlError(Exception):
    pass


def percent_decode(s):
    out, i = bytearray(), 0
    while i < len(s):
        if s[i] == "%":
            if not re.fullmatch(r"[0-9A-Fa-f]{2}", s[i + 1:i + 3]):
                raise UrlError(f"'%' not followed by two hex digits in {s!r}")
            out.append(int(s[i + 1:i + 3], 16))
            i += 3
        else:
            out += s[i].encode("utf-8")
            i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise UrlError(f"percent-decoded bytes are not UTF-8 in {s!r}") from None


def split_host_port(hostport):
    """host and port text (None when absent) of an authority without userinfo."""
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0:
            raise UrlError("unterminated IPv6 literal")
        host, rest = hostport[1:close], hostport[close + 1:]
        if rest and not rest.startswith(":"):
            raise UrlError(f"unexpected {rest!r} after the IPv6 literal")
        return host, (rest[1:] if rest else None)
    host, colon, port = hostport.partition(":")
    return host, (port if colon else None)


def parse_port(text, scheme):
    if text is None or text == "":
        return DEFAULT_PORTS[scheme]
    if not re.fullmatch(r"[0-9]+", text):
        raise UrlError(f"port {text!r} is not decimal digits")
    port = int(text)
    if not 1 <= port <= 65535:
        raise UrlError(f"port {port} is outside 1..65535")
    return port


def parse_userinfo(authority):
    """(user, password, host-and-port) with guest defaults."""
    userinfo, at, hostport = authority.rpartition("@")
    if not at:
        return "guest", "guest", hostport
    user, colon, password = userinfo.partition(":")
    return percent_decode(user), (percent_decode(password) if colon else "guest"), hostport


def query_vhost(query):
    """The percent-decoded vhost query parameter, "/" when absent or empty."""
    for param in (query or "").split("&"):
        name, _, value = param.partition("=")
        if name == "vhost":
            return percent_decode(value) or "/"
    return "/"


def check_url_chars(url):
    if url == "":
        raise UrlError("empty URL")
    # ASCII space and control characters only, as the C++ parser: other characters pass through as UTF-8.
    if any(ord(c) <= 0x20 or ord(c) == 0x7f for c in url):
        raise UrlError("space or control character in the URL")
    if "#" in url:
        raise UrlError("fragments are not allowed")


def parse_url(url):
    """A FireMQ connection URL -> the expect object of urls.json, or UrlError."""
    check_url_chars(url)
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", url)
    if not m:
        raise UrlError("missing scheme")
    scheme = m.group(1).lower()
    if scheme not in DEFAULT_PORTS:
        raise UrlError(f"unsupported scheme {m.group(1)!r}")
    rest = url[m.end():]
    if not rest.startswith("//"):
        raise UrlError("'//' and an authority are required")
    rest = rest[2:]
    end = min([i for i in (rest.find("/"), rest.find("?")) if i >= 0], default=len(rest))
    authority, rest = rest[:end], rest[end:]
    path, _, query = rest.partition("?")
    user, password, hostport = parse_userinfo(authority)
    host, port_text = split_host_port(hostport)
    if host == "":
        raise UrlError("host is required")
    port = parse_port(port_text, scheme)
    websocket = scheme in ("ws", "wss")
    if websocket:
        vhost, path = query_vhost(query), (path if path not in ("", "/") else "/fire")
    else:
        vhost, path = (percent_decode(path[1:]) if path not in ("", "/") else "/"), ""
    return {"scheme": scheme, "tls": scheme in ("fires", "wss"), "websocket": websocket,
            "host": host, "port": port, "user": user, "password": password,
            "vhost": vhost, "path": path}


URL_CASES = [  # (name, description, url, valid)
    ("fire-defaults", "host only: default port, guest/guest, vhost /", "fire://localhost", True),
    ("fire-root-path", "path / means vhost /", "fire://localhost/", True),
    ("fire-full", "user, password, port and vhost", "fire://alice:secret@broker.example.com:5680/dev", True),
    ("fire-vhost-encoded-slash", "path /%2F decodes to vhost /", "fire://localhost/%2F", True),
    ("fire-vhost-nested-path", "path /a/b gives vhost a/b", "fire://localhost/a/b", True),
    ("fire-vhost-space", "percent-encoded space in the vhost", "fire://localhost/my%20vhost", True),
    ("fire-vhost-utf8-lowercase-hex", "multi-byte UTF-8 vhost with lowercase hex", "fire://localhost/caf%c3%a9", True),
    ("fire-vhost-utf8-uppercase-hex", "multi-byte UTF-8 vhost with uppercase hex", "fire://localhost/caf%C3%A9", True),
    ("fire-query-ignored", "fire ignores the query string, even a vhost parameter",
     "fire://localhost/dev?vhost=other&heartbeat=10", True),
    ("fire-query-without-path", "a query right after the authority: empty path, vhost /",
     "fire://localhost?vhost=dev", True),
    ("fire-empty-port", "host: with an empty port takes the default", "fire://localhost:/dev", True),
    ("fire-ipv4", "IPv4 address with the default port written out", "fire://127.0.0.1:5673", True),
    ("fire-host-case-kept", "the host is kept as written", "fire://Broker.Example.COM/", True),
    ("fire-port-1", "lowest valid port", "fire://localhost:1", True),
    ("fire-port-65535", "highest valid port", "fire://localhost:65535", True),
    ("fire-user-only", "user without password: password guest", "fire://alice@localhost", True),
    ("fire-empty-password", "password present but empty stays empty", "fire://alice:@localhost", True),
    ("fire-empty-user", "user present but empty stays empty", "fire://:secret@localhost/dev", True),
    ("fire-encoded-userinfo", "percent-encoded user and password", "fire://us%65r:p%40ss@localhost", True),
    ("fire-encoded-colon-in-password", "percent-encoded colon in the password",
     "fire://alice:a%3Ab@localhost", True),
    ("fire-ipv6", "IPv6 literal without a port", "fire://[::1]", True),
    ("fire-ipv6-port-vhost", "IPv6 literal with a port and a vhost", "fire://[::1]:5680/dev", True),
    ("fires-defaults", "TLS with the default port 5674", "fires://localhost", True),
    ("fires-full", "TLS with credentials, port 443 and a vhost", "fires://bob:pw@mq.example.com:443/prod", True),
    ("ws-defaults", "WebSocket: default port 15672, path /fire, vhost /", "ws://localhost", True),
    ("ws-root-path", "WebSocket path / means /fire", "ws://localhost/", True),
    ("ws-vhost-query", "WebSocket vhost from the query", "ws://localhost:15672/fire?vhost=dev", True),
    ("ws-custom-path", "WebSocket path kept as written", "ws://localhost:8080/mq/fire", True),
    ("ws-path-not-decoded", "the WebSocket path is not percent-decoded", "ws://localhost/a%20b", True),
    ("ws-vhost-encoded-slash", "vhost=%2F decodes to /", "ws://localhost/fire?vhost=%2F", True),
    ("ws-vhost-encoded-space", "vhost=my%20vhost decodes to my vhost", "ws://localhost/fire?vhost=my%20vhost", True),
    ("ws-vhost-plus-not-space", "+ in the vhost parameter is not a space", "ws://localhost/fire?vhost=a+b", True),
    ("ws-vhost-empty", "an empty vhost parameter means /", "ws://localhost/fire?vhost=", True),
    ("ws-other-params", "other query parameters are ignored", "ws://localhost/fire?heartbeat=10&vhost=dev&x=1", True),
    ("ws-query-without-path", "query right after the authority: path /fire", "ws://localhost?vhost=dev", True),
    ("ws-ipv6", "WebSocket with an IPv6 literal and a port", "ws://[fe80::1]:8080/fire", True),
    ("wss-defaults", "secure WebSocket: default port 15671", "wss://localhost", True),
    ("wss-full", "secure WebSocket with credentials and vhost", "wss://bob:pw@mq.example.com/fire?vhost=prod", True),
    ("scheme-uppercase", "the scheme is case-insensitive and output lowercased", "FIRE://localhost/dev", True),
    ("scheme-mixed-case", "mixed-case wss scheme", "WsS://localhost", True),
    ("error-empty", "the empty string", "", False),
    ("error-missing-scheme", "no scheme", "localhost", False),
    ("error-missing-scheme-authority", "authority without a scheme", "//localhost/dev", False),
    ("error-empty-scheme", "empty scheme before ://", "://localhost", False),
    ("error-scheme-amqp", "amqp is not a FireMQ scheme", "amqp://localhost", False),
    ("error-scheme-http", "http is not a FireMQ scheme", "http://localhost:15672/fire", False),
    ("error-no-authority", "scheme without //", "fire:localhost/dev", False),
    ("error-empty-host", "nothing after //", "fire://", False),
    ("error-empty-host-with-path", "empty host before the path", "fire:///dev", False),
    ("error-empty-host-with-userinfo", "userinfo and port but no host", "fire://alice@:5673/", False),
    ("error-empty-ipv6", "empty IPv6 brackets", "fire://[]/", False),
    ("error-ipv6-unterminated", "IPv6 literal without its closing bracket", "fire://[::1/dev", False),
    ("error-ipv6-junk", "text after the IPv6 literal that is not a port", "fire://[::1]x/", False),
    ("error-port-0", "port 0", "fire://localhost:0", False),
    ("error-port-65536", "port above 65535", "fire://localhost:65536", False),
    ("error-port-huge", "port with 20 digits", "fire://localhost:99999999999999999999", False),
    ("error-port-letters", "port with a letter", "fire://localhost:5x73", False),
    ("error-port-negative", "negative port", "fire://localhost:-1", False),
    ("error-port-plus", "port with a sign", "fire://localhost:+5673", False),
    ("error-percent-short", "% followed by one hex digit at the end of the vhost", "fire://localhost/%2", False),
    ("error-percent-not-hex", "% followed by non-hex characters in the vhost", "fire://localhost/%zz", False),
    ("error-percent-user", "bad percent escape in the user", "fire://al%ice@localhost", False),
    ("error-percent-password", "bad percent escape in the password", "fire://alice:p%4@localhost", False),
    ("error-percent-ws-vhost", "bad percent escape in the WebSocket vhost parameter",
     "ws://localhost/fire?vhost=%g0", False),
    ("error-fragment", "a fragment", "fire://localhost/dev#frag", False),
    ("error-fragment-empty", "an empty fragment", "fire://localhost#", False),
    ("error-fragment-ws", "a fragment after a WebSocket query", "ws://localhost/fire?vhost=dev#x", False),
    ("error-space-in-host", "a space inside the host", "fire://local host/", False),
    ("error-leading-space", "a leading space", " fire://localhost", False),
    ("error-trailing-newline", "a trailing newline", "fire://localhost/dev\n", False),
    ("error-tab", "a tab in the path", "fire://localhost/d\tev", False),
    ("error-nul", "a NUL character", "fire://localhost/\u0000", False),
    ("error-del", "a DEL character", "fire://localhost/\u007f", False),
]


def url_vectors():
    vectors = []
    for name, description, url, valid in URL_CASES:
        vector = {"name": f"url-{name}", "description": description, "url": url}
        try:
            vector["expect"] = parse_url(url)
        except UrlError as e:
            vector["error"] = str(e)
        if ("expect" in vector) != valid:
            raise AssertionError(f"{name}: parser outcome {vector} contradicts the intended validity")
        vectors.append(vector)
    spot_check_urls({v["url"]: v.get("expect") for v in vectors})
    return vectors


def spot_check_urls(results):
    """Hand-written expectations for a few URLs, independent of the parser code."""
    hand = {
        "fire://localhost": ("fire", False, False, "localhost", 5673, "guest", "guest", "/", ""),
        "fire://us%65r:p%40ss@localhost": ("fire", False, False, "localhost", 5673, "user", "p@ss", "/", ""),
        "fire://:secret@localhost/dev": ("fire", False, False, "localhost", 5673, "", "secret", "dev", ""),
        "fire://[::1]:5680/dev": ("fire", False, False, "::1", 5680, "guest", "guest", "dev", ""),
        "fire://localhost/a/b": ("fire", False, False, "localhost", 5673, "guest", "guest", "a/b", ""),
        "fires://localhost": ("fires", True, False, "localhost", 5674, "guest", "guest", "/", ""),
        "ws://localhost": ("ws", False, True, "localhost", 15672, "guest", "guest", "/", "/fire"),
        "ws://localhost/fire?vhost=a+b": ("ws", False, True, "localhost", 15672, "guest", "guest", "a+b", "/fire"),
        "ws://localhost/a%20b": ("ws", False, True, "localhost", 15672, "guest", "guest", "/", "/a%20b"),
        "WsS://localhost": ("wss", True, True, "localhost", 15671, "guest", "guest", "/", "/fire"),
    }
    keys = ["scheme", "tls", "websocket", "host", "port", "user", "password", "vhost", "path"]
    for url, values in hand.items():
        if results[url] != dict(zip(keys, values)):
            raise AssertionError(f"URL parser disagrees with the hand expectation for {url}: {results[url]}")


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------

FILES = [
    ("frames.json",
     "One or more encoded frames per op of FireMQ protocol v1 with the decoded header and payload",
     frames_vectors),
    ("encodings.json",
     "Frames using every MessagePack encoding a decoder must accept, with the decoded header and payload",
     encodings_vectors),
    ("invalid.json", "Inputs a FireMQ v1 decoder must reject, with the error code and fatality",
     invalid_vectors),
    ("urls.json", "FireMQ connection URLs with their parsed form, or the fact that they are invalid",
     url_vectors),
]


def check_unique_names(documents):
    names = [v["name"] for doc in documents.values() for v in doc["vectors"]]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise AssertionError(f"duplicate vector names: {duplicates}")


def render(document):
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=os.path.dirname(os.path.abspath(__file__)),
                        help="where to write the vector files (default: this script's directory)")
    args = parser.parse_args(argv)
    documents = {name: {"description": description, "version": 1, "vectors": build()}
                 for name, description, build in FILES}
    check_unique_names(documents)
    os.makedirs(args.out_dir, exist_ok=True)
    for name, document in documents.items():
        with open(os.path.join(args.out_dir, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(render(document))
    counts = ", ".join(f"{name} {len(doc['vectors'])}" for name, doc in documents.items())
    print(f"generate: wrote {counts} to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
