#!/usr/bin/python3
"""Differential test of the AMQP 0-9-1 listener: the reference broker against RabbitMQ from Debian.

A seed gives a sequence of operations over one AMQP connection (pika's BlockingConnection, 1-3 channels):
queue and exchange declares with x- arguments, bindings, publishes (properties, typed headers, mandatory,
confirm mode), gets, consumers, acks, nacks and rejects, recover, qos, purge, deletes, transactions and channel
closes. The same sequence runs against both brokers; after every operation each side waits for quiescence and
records an observation (replies, close codes, returns, confirms, the messages gets and consumers see, and every
queue's message and consumer count), normalised for what legitimately differs. The first observation that
differs is a divergence; it is shrunk to the shortest sequence that still shows it and printed as a replayable
listing with both observations. A divergence the FireMQ spec decides differently from RabbitMQ is listed, with
its reason, in amqp_differential_known.json: it is excused (and counted), not a failure.

    amqp_differential.py --broker build/reference-broker/firemq-broker --seeds 1..200 --keep-going
    amqp_differential.py --broker ... --seed 17 --ops 60 -v          # one seed, every observation printed
    amqp_differential.py --broker ... --replay-json '[...]'          # the listing a divergence prints
    amqp_differential.py --broker ... --catch-faults lossy-header-types,global-qos-per-consumer
    amqp_differential.py --self-check --seeds 1..50                  # RabbitMQ against itself: is it deterministic?

Open bugs of the reference broker that this test found are in amqp_differential_open_bugs.json (--replay-bug ID
replays one); a run steers around one only when --avoid-bug names it (reference-broker/CMakeLists.txt names each,
until it is fixed). RabbitMQ is started
on private ports (--rabbitmq-port, 25690 by default, and the two above it) by scripts/rabbitmq-private-node.sh,
and stopped at the end; --rabbitmq-running uses a node already listening there. Exit status 0 only when no
unexcused divergence was found (--expect-divergence inverts it; --catch-faults needs one for each fault).
"""
import argparse
import copy
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import pika
import pika.data
import pika.exceptions
import pika.spec

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
KNOWN_FILE = os.path.join(HERE, "amqp_differential_known.json")
OPEN_BUGS_FILE = os.path.join(HERE, "amqp_differential_open_bugs.json")
NODE_SCRIPT = os.path.join(ROOT, "scripts", "rabbitmq-private-node.sh")

QUEUES = ["q0", "q1", "q2", "q3"]      # queue slots; "gen" is a server-named queue, "" the channel's last declared
EXCHANGES = ["x0", "x1", "x2"]         # exchange slots; "missing" is never declared
KEYS = ["k0", "k1", "a.b", "a.c"]
OBSERVER_CHANNEL = 99                  # the channel that reads queue and exchange state; no operation uses it
OP_TIMEOUT = 15.0                      # seconds for one operation and its settling: a broker that hangs


# ---------------------------------------------------------------------------------------------------------------
# Field tables with their type letters. pika writes Python values in a few types (S, x, t, I/l, d, D, T, F, A, V)
# and reads every integer and float as an int; the test sends every letter RabbitMQ knows and reads what arrives
# letter by letter, so that a header that comes back in another type is a difference.

class Typed:
    """A field value with its AMQP type letter, for pika's encoder."""
    __slots__ = ("kind", "value")

    def __init__(self, kind, value):
        self.kind, self.value = kind, value


_FIXED = {"b": "b", "B": "B", "s": "h", "u": "H", "I": "i", "i": "I", "l": "q", "L": "q", "f": "f", "d": "d",
          "T": "Q", "t": "B"}
_original_encode_value = pika.data.encode_value


def _encode_value(pieces, value):
    if not isinstance(value, Typed):
        return _original_encode_value(pieces, value)
    kind, v = value.kind, value.value
    if kind in _FIXED:
        piece = struct.pack(">c" + _FIXED[kind], kind.encode(), v)
    elif kind in ("S", "x"):
        raw = v if isinstance(v, bytes) else v.encode()
        piece = struct.pack(">cI", kind.encode(), len(raw)) + raw
    elif kind == "D":
        piece = struct.pack(">cBi", b"D", v[0], v[1])
    elif kind == "V":
        piece = b"V"
    elif kind == "F":
        inner = []
        pika.data.encode_table(inner, v)
        piece = b"F" + b"".join(inner)
    elif kind == "A":
        inner = []
        for item in v:
            _encode_value(inner, item)
        body = b"".join(inner)
        piece = struct.pack(">cI", b"A", len(body)) + body
    else:
        raise ValueError("unknown field type " + kind)
    pieces.append(piece)
    return len(piece)


pika.data.encode_value = _encode_value


def _text(raw):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"bytes": raw.hex()}


def decode_typed_value(encoded, offset):
    """One field value as [letter, value], with RabbitMQ's letters (docs/spec-notes.md, "AMQP field types")."""
    kind = chr(encoded[offset])
    offset += 1
    if kind in _FIXED:
        fmt = ">" + _FIXED[kind]
        (value,) = struct.unpack_from(fmt, encoded, offset)
        offset += struct.calcsize(fmt)
        if kind == "t":
            value = bool(value)
    elif kind in ("S", "x"):
        (length,) = struct.unpack_from(">I", encoded, offset)
        raw = bytes(encoded[offset + 4:offset + 4 + length])
        offset += 4 + length
        value = _text(raw) if kind == "S" else {"bytes": raw.hex()}
    elif kind == "D":
        scale, raw = struct.unpack_from(">Bi", encoded, offset)
        offset += 5
        value = [scale, raw]
    elif kind == "V":
        value = None
    elif kind == "F":
        value, offset = decode_typed_table(encoded, offset)
    elif kind == "A":
        (length,) = struct.unpack_from(">I", encoded, offset)
        offset += 4
        end, value = offset + length, []
        while offset < end:
            item, offset = decode_typed_value(encoded, offset)
            value.append(item)
    else:
        raise pika.exceptions.InvalidFieldTypeException(kind)
    return [kind, value], offset


def decode_typed_table(encoded, offset):
    (size,) = struct.unpack_from(">I", encoded, offset)
    offset += 4
    end, table = offset + size, {}
    while offset < end:
        length = encoded[offset]
        key = encoded[offset + 1:offset + 1 + length]
        offset += 1 + length
        key = _text(bytes(key))
        key = key if isinstance(key, str) else "bytes:" + key["bytes"]
        table[key], offset = decode_typed_value(encoded, offset)
    return table, offset


_original_properties_decode = pika.spec.BasicProperties.decode


def _properties_decode(self, encoded, offset=0):
    saved = pika.data.decode_table
    pika.data.decode_table = decode_typed_table  # only while a content header's properties are read
    try:
        return _original_properties_decode(self, encoded, offset)
    finally:
        pika.data.decode_table = saved


pika.spec.BasicProperties.decode = _properties_decode


def to_field(spec):
    """A header value of an operation's listing ([letter, value]) as a Typed for pika."""
    kind, value = spec
    if kind == "F":
        return Typed("F", {k: to_field(v) for k, v in value.items()})
    if kind == "A":
        return Typed("A", [to_field(v) for v in value])
    if kind in ("S", "x") and isinstance(value, dict):
        return Typed(kind, bytes.fromhex(value["bytes"]))
    return Typed(kind, value)


# ---------------------------------------------------------------------------------------------------------------
# The generator: a seed gives a list of operations. Operations are symbolic (queue slots, "the n-th delivery the
# channel holds", "a tag it never had"), resolved when they run, so that any subsequence is still a sequence.

def gen_header_value(rng, depth=0):
    kinds = ["S", "S", "I", "l", "t", "d", "b", "B", "s", "u", "i", "f", "D", "T", "x", "V"]
    if depth < 2:
        kinds += ["F", "A"]
    kind = rng.choice(kinds)
    value = {
        "S": lambda: rng.choice(["a", "b", "text", ""]),
        "I": lambda: rng.randint(-100000, 100000), "l": lambda: rng.choice([2 ** 40, -(2 ** 40), 7]),
        "t": lambda: rng.random() < 0.5, "d": lambda: rng.choice([2.5, -0.125, 1e10]),
        "b": lambda: rng.randint(-128, 127), "B": lambda: rng.randint(0, 255),
        "s": lambda: rng.randint(-32768, 32767), "u": lambda: rng.randint(0, 65535),
        "i": lambda: rng.choice([0, 7, 2 ** 32 - 1]), "f": lambda: rng.choice([1.5, -0.25, 1024.0]),
        "D": lambda: [rng.randint(0, 4), rng.randint(-99999, 99999)], "T": lambda: 1700000000 + rng.randint(0, 99),
        "x": lambda: {"bytes": bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 3))).hex()},
        "V": lambda: None,
        "F": lambda: {"n%d" % i: gen_header_value(rng, depth + 1) for i in range(rng.randint(0, 2))},
        "A": lambda: [gen_header_value(rng, depth + 1) for _ in range(rng.randint(0, 2))],
    }[kind]()
    return [kind, value]


def gen_headers(rng):
    headers = {}
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if roll < 0.3:
            headers["h1"] = ["S", rng.choice(["a", "b"])]         # what headers-exchange bindings look for
        elif roll < 0.5:
            headers["h2"] = [rng.choice(["I", "b", "l"]), rng.choice([1, 2])]
        elif roll < 0.55:
            headers["CC"] = ["A", [["S", rng.choice(KEYS + ["@q1", "@q2"])]]]
        elif roll < 0.58:
            headers["BCC"] = ["A", [["S", rng.choice(["@q0", "@q3"])]]]
        elif roll < 0.6:
            headers["nonutf8"] = ["S", {"bytes": "fffe41"}]
        else:
            headers["v%d" % rng.randint(0, 9)] = gen_header_value(rng)
    return headers


def gen_properties(rng, mistake=False):
    props = {}
    candidates = {
        "delivery_mode": lambda: rng.choice([1, 2, 2]), "priority": lambda: rng.randint(0, 9),
        "expiration": lambda: rng.choice(["3600000", "7200000"]), "headers": lambda: gen_headers(rng),
        "content_type": lambda: "text/plain", "content_encoding": lambda: "gzip",
        "correlation_id": lambda: "corr-%d" % rng.randint(0, 9), "message_id": lambda: "id-%d" % rng.randint(0, 99),
        "timestamp": lambda: 1700000000 + rng.randint(0, 999), "type": lambda: "kind", "app_id": lambda: "app",
        "reply_to": lambda: "reply", "user_id": lambda: "guest",
    }
    for name, make in candidates.items():
        if rng.random() < (0.5 if name in ("delivery_mode", "headers", "priority") else 0.12):
            props[name] = make()
    if mistake:  # refused: 406
        props.update(rng.choice([{"user_id": "someone-else"}, {"expiration": "soon"}]))
    return props


MISTAKE = 0.05  # the share of operations that are meant to be refused (unknown names and tags, wrong modes, ...)


class GenState:
    """What the generator believes of the broker, to make sequences that mostly work (and a few mistakes).
    Only a guess: the runner resolves what an operation names when it runs, and the broker decides."""

    def __init__(self, rng):
        self.channels = rng.randint(1, 3)
        self.queues = {}            # slot -> its config ({"args", flags}), while it should exist
        self.queue_configs = {}     # slot -> the config of its first declare: later declares repeat it
        self.exchanges = {}         # slot -> its config ({"type", flags}), while it should exist
        self.exchange_configs = {}
        self.bindings = []          # (exchange, key, args) that bind some queue
        self.gen = False            # a server-named queue was declared
        self.tx, self.confirm = set(), set()
        self.consumed = {}          # channel -> the queue its last consume named
        self.consumers = {}         # channel -> how many consumers it has
        self.unacked = {}           # channel -> whether it may hold deliveries to acknowledge
        self.dlx_slot = rng.choice(QUEUES)  # the one queue slot that may dead-letter (see gen_queue_args)

    def channel_closed(self, ch):
        self.tx.discard(ch)
        self.confirm.discard(ch)
        self.consumed.pop(ch, None)
        self.consumers.pop(ch, None)
        self.unacked.pop(ch, None)


def gen_queue_args(rng, g, slot):
    args = {}
    if rng.random() < 0.35:
        args["x-max-length"] = rng.randint(0, 4)
        if rng.random() < 0.6:
            args["x-overflow"] = rng.choice(["drop-head", "reject-publish"])
    if rng.random() < 0.25:
        args["x-max-priority"] = rng.randint(1, 10)
    # One queue slot per sequence dead-letters: messages dead-lettered from two queues into a third in one
    # operation reach it in an order RabbitMQ does not fix (two queue processes), so the test never builds that.
    if slot == g.dlx_slot and rng.random() < 0.6:
        args["x-dead-letter-exchange"] = rng.choice(["", "", "@x0", "@x1", "@missing"])
        if rng.random() < 0.7:
            args["x-dead-letter-routing-key"] = rng.choice(["@q0", "@q1", "@q2", "@q3", "k0"])
    if rng.random() < 0.15:
        args["x-message-ttl"] = rng.choice([3600000, 7200000])  # long: no result depends on time
    if rng.random() < 0.15:
        args["x-single-active-consumer"] = True
    return args


def generate(seed, count):
    """The operations of a seed: a pure function of (seed, count)."""
    rng = random.Random(seed)
    g = GenState(rng)
    ops = []
    weights = {
        "publish": 24, "get": 8, "consume": 8, "cancel": 3, "ack": 9, "nack": 4, "reject": 3, "recover": 1.5,
        "qos": 4, "declare_queue": 7, "delete_queue": 1.5, "purge": 1.5, "bind_queue": 5, "unbind_queue": 1.5,
        "declare_exchange": 3, "delete_exchange": 1, "bind_exchange": 2, "unbind_exchange": 1, "confirm": 2,
        "tx_select": 1.5, "tx_commit": 2.5, "tx_rollback": 1, "close_channel": 2, "bad_vhost": 0.3,
    }
    kinds, cumulative = list(weights), list(weights.values())

    def queue_ref(mistake):
        if mistake:
            wrong = [q for q in QUEUES if q not in g.queues] + ([] if g.gen else ["gen"]) + [""]
            return rng.choice(wrong)
        if not g.queues:
            return rng.choice(QUEUES)
        if g.gen and rng.random() < 0.1:
            return "gen"
        return rng.choice(sorted(g.queues)) if rng.random() < 0.97 else ""  # "": the channel's last declared

    def exchange_ref(mistake):
        if mistake:
            return rng.choice(["missing"] + [x for x in EXCHANGES if x not in g.exchanges])
        if g.exchanges and rng.random() < 0.7:
            return rng.choice(sorted(g.exchanges))
        return rng.choice(["amq.direct", "amq.fanout", "amq.topic", "amq.headers"])

    def queue_config(slot, mistake):
        if slot in g.queue_configs and not mistake:
            return copy.deepcopy(g.queue_configs[slot])
        config = {"args": gen_queue_args(rng, g, slot)} if slot not in g.queue_configs else \
            copy.deepcopy(g.queue_configs[slot])
        if mistake:  # an inequivalent redeclare
            change = rng.choice(["args", "durable", "auto_delete", "exclusive"])
            if change == "args":
                config["args"] = gen_queue_args(rng, g, slot)
            else:
                config[change] = not config.get(change, False)
        else:
            for flag, p in (("auto_delete", 0.08), ("exclusive", 0.04), ("durable", 0.1)):
                if rng.random() < p:
                    config[flag] = True
        return config

    setup = rng.randint(3, 6)  # declares and bindings first, so that most operations find their objects
    while len(ops) < count:
        if len(ops) < setup:
            kind = rng.choice(["declare_queue", "declare_queue", "declare_exchange", "bind_queue"]) if ops else \
                "declare_queue"
        else:
            kind = rng.choices(kinds, cumulative)[0]
        mistake = rng.random() < MISTAKE
        i = len(ops)
        op = {"op": kind}
        if kind != "bad_vhost":
            op["ch"] = ch = rng.randint(1, g.channels)
        # Acknowledgements and cancels where there is probably something to acknowledge or cancel.
        if kind in ("ack", "nack", "reject", "recover") and not mistake:
            holding = [c for c in sorted(g.unacked) if g.unacked[c]]
            if not holding and rng.random() < 0.85:
                continue
            op["ch"] = ch = rng.choice(holding) if holding else ch
        if kind == "cancel":
            consuming = [c for c in sorted(g.consumers) if g.consumers[c]]
            if not consuming and rng.random() < 0.9:
                continue
            op["ch"] = ch = rng.choice(consuming) if consuming else ch
            g.consumers[ch] = max(0, g.consumers.get(ch, 0) - 1)
        if kind == "publish":
            if mistake and rng.random() < 0.5:
                op.update(x="missing", key="k0")
            elif rng.random() < 0.45 or not (g.bindings or g.exchanges):
                op["x"] = ""
                consumed = sorted(set(q for q in g.consumed.values() if q in g.queues))
                if consumed and rng.random() < 0.5:  # most often to a queue with consumers
                    target = rng.choice(consumed)
                else:
                    target = queue_ref(False) if rng.random() < 0.95 else rng.choice(KEYS)
                op["key"] = "@" + target if target else "k0"
            elif g.bindings and rng.random() < 0.75:
                x, key, args = rng.choice(g.bindings)
                op.update(x=x, key=key if not key.startswith(("a.*", "#")) else "a.b")
            else:
                op.update(x=exchange_ref(False), key=rng.choice(KEYS + ["@q0", "@q1"]))
            op["props"] = gen_properties(rng, mistake=mistake and "x" in op and op["x"] != "missing")
            op["mandatory"] = rng.random() < 0.3
            op["body"] = "m%d" % i
        elif kind == "get":
            op.update(q=queue_ref(mistake), no_ack=rng.random() < 0.3)
            g.unacked[ch] = g.unacked.get(ch) or not op["no_ack"]
        elif kind == "consume":
            # Often a second consumer of the queue this channel consumes already: round-robin, and prefetch
            # limits shared by consumers (a global qos shared by consumers of two queues is not built: see
            # Runner.global_qos_would_race).
            q = g.consumed.get(ch) if rng.random() < 0.5 and not mistake else None
            op.update(q=q if q is not None else queue_ref(mistake), tag="c%d" % i, no_ack=rng.random() < 0.3,
                      exclusive=rng.random() < 0.05)
            if rng.random() < 0.1:
                op["args"] = {"x-priority": rng.randint(-1, 3)}
            g.consumed[ch] = op["q"]
            g.consumers[ch] = g.consumers.get(ch, 0) + 1
            g.unacked[ch] = g.unacked.get(ch) or not op["no_ack"]
        elif kind == "cancel":
            op["pick"] = round(rng.random(), 3)
        elif kind in ("ack", "nack", "reject"):
            op["pick"] = "unknown" if mistake else round(rng.random(), 3)
            if kind != "reject":
                op["multiple"] = rng.random() < 0.3
                if op["multiple"] and rng.random() < 0.15 and not mistake:
                    op["pick"] = "zero"  # delivery tag 0 with multiple: everything unacknowledged
            if kind != "ack":
                op["requeue"] = rng.random() < 0.5
            if op.get("multiple") and not g.consumers.get(ch):
                g.unacked[ch] = False
        elif kind == "recover":
            op["requeue"] = not mistake  # requeue=false is 540 NOT_IMPLEMENTED: the connection closes
        elif kind == "qos":
            consuming = [c for c in sorted(g.consumers) if g.consumers[c]]
            if consuming and rng.random() < 0.6:  # a limit for consumers that exist (a global one holds them)
                op["ch"] = ch = rng.choice(consuming)
            op.update(count=rng.choice([0, 1, 1, 2, 3]), **{"global": rng.random() < 0.5})
        elif kind == "declare_queue":
            fresh = [q for q in QUEUES if q not in g.queues]
            if rng.random() < 0.06:
                q = "gen"
            elif fresh and (rng.random() < 0.6 or not g.queues):
                q = rng.choice(fresh)
            else:
                q = rng.choice(sorted(g.queues))
            op["q"] = q
            config = queue_config(q, mistake and q in g.queues)
            if config.get("args"):
                op["args"] = config["args"]
            op.update({k: v for k, v in config.items() if k != "args" and v})
            if q in g.queues and rng.random() < 0.15:
                op["passive"] = True
            if q == "gen":
                g.gen = True
            else:
                g.queue_configs.setdefault(q, config)
                g.queues[q] = config
        elif kind in ("delete_queue", "purge"):
            op["q"] = queue_ref(mistake)
            if kind == "delete_queue":
                op.update(if_unused=rng.random() < 0.2, if_empty=rng.random() < 0.2)
                if not op["if_unused"] and not op["if_empty"]:
                    g.queues.pop(op["q"], None)
        elif kind in ("bind_queue", "unbind_queue"):
            if kind == "unbind_queue" and g.bindings and not mistake:
                x, key, args = rng.choice(g.bindings)
                op.update(q=queue_ref(False), x=x, key=key)
                if args:
                    op["args"] = args
            else:
                op.update(q=queue_ref(mistake), x=exchange_ref(mistake and rng.random() < 0.5))
                op["key"] = rng.choice(KEYS + ["a.*", "#", "@q0", "@q1"])
                if rng.random() < 0.05:
                    op.update(q="", key="")
                if rng.random() < 0.3:
                    op["args"] = {"x-match": rng.choice(["all", "any"])}
                    for h, values in (("h1", [["S", "a"], ["S", "b"]]), ("h2", [["I", 1], ["I", 2], ["b", 1]])):
                        if rng.random() < 0.6:
                            op["args"][h] = rng.choice(values)
                if kind == "bind_queue":
                    g.bindings.append((op["x"], op["key"], op.get("args")))
        elif kind == "declare_exchange":
            x = rng.choice(EXCHANGES)
            config = copy.deepcopy(g.exchange_configs.get(x)) or {
                "type": rng.choice(["direct", "fanout", "topic", "headers"])}
            if x not in g.exchange_configs:
                for flag, p in (("auto_delete", 0.08), ("internal", 0.03), ("durable", 0.1)):
                    if rng.random() < p:
                        config[flag] = True
                g.exchange_configs[x] = config
            if mistake:
                config["type"] = rng.choice([t for t in ("direct", "fanout", "topic", "headers")
                                             if t != config["type"]])
            op.update(x=x, **config)
            if x in g.exchanges and rng.random() < 0.1:
                op["passive"] = True
            g.exchanges[x] = config
        elif kind == "delete_exchange":
            if not mistake and not g.exchanges:
                continue
            op.update(x="amq.direct" if mistake else rng.choice(sorted(g.exchanges)), if_unused=rng.random() < 0.3)
            if not op["if_unused"]:
                g.exchanges.pop(op["x"], None)
        elif kind in ("bind_exchange", "unbind_exchange"):
            if not g.exchanges and not mistake:
                continue
            op.update(dst=exchange_ref(mistake), src=exchange_ref(False), key=rng.choice(KEYS + ["#", "a.*"]))
            if op["dst"] not in EXCHANGES + ["missing"] and op["src"] not in EXCHANGES + ["missing"]:
                # a binding between two built-in exchanges would outlive the run
                op["src"] = rng.choice(sorted(g.exchanges) or EXCHANGES)
        elif kind == "confirm":
            if ch in g.tx and not mistake:
                continue  # 406: a channel in tx mode cannot take confirms
            g.confirm.add(ch)
        elif kind == "tx_select":
            if ch in g.confirm and not mistake:
                continue
            g.tx.add(ch)
        elif kind in ("tx_commit", "tx_rollback"):
            if ch not in g.tx and not mistake:
                continue  # 406: not transactional
        elif kind == "close_channel":
            if rng.random() < 0.3:
                op["crossing"] = True
            g.channel_closed(ch)
        if mistake and kind != "bad_vhost":
            g.channel_closed(ch)  # most mistakes close the channel
        ops.append(op)
    return ops


def describe(i, op):
    """One line of a replayable listing."""
    fields = " ".join("%s=%s" % (k, json.dumps(v)) for k, v in op.items() if k not in ("op", "ch"))
    where = " ch%d" % op["ch"] if "ch" in op else ""
    return "%3d%s %s %s" % (i, where, op["op"], fields)


# ---------------------------------------------------------------------------------------------------------------
# Open bugs of the reference broker that the differential test found (amqp_differential_open_bugs.json: what,
# where, the shortest sequence), and how to steer around each. TEMPORARY: a run avoids one only when its caller
# names it (--avoid-bug ID, as reference-broker/CMakeLists.txt does), so that the rest of the sequence space stays
# tested while the bug is open; delete the entry, its AVOIDANCE and its --avoid-bug with the fix.
# "skip" gets the runner and the operation about to run and says whether to skip it (both brokers skip it alike:
# the runner's state comes from observations that were equal so far); "mask" takes out of an observation what
# the bug changes.

AVOIDANCE = {  # how to steer around each open bug of amqp_differential_open_bugs.json
}


def load_open_bugs():
    with open(OPEN_BUGS_FILE) as f:
        bugs = {b["id"]: b for b in json.load(f)["bugs"]}
    if set(bugs) != set(AVOIDANCE):
        raise SystemExit("%s and AVOIDANCE name different bugs: %s" % (
            OPEN_BUGS_FILE, sorted(set(bugs) ^ set(AVOIDANCE))))
    return bugs


# ---------------------------------------------------------------------------------------------------------------
# Running a sequence against one broker.

class OpTimeout(Exception):
    pass


def _alarm(_signum, _frame):
    raise OpTimeout()


class Chan:
    def __init__(self, number, ch):
        self.number, self.ch = number, ch
        self.mode = "none"          # none, confirm or tx
        self.consumers = {}         # tag -> {"queue": actual name, "no_ack": bool}, in the order they were made
        self.unacked = []           # [{"tag": n, "batch": op index}], deliveries that wait for an ack
        self.tx_taken = []          # entries acked, nacked or rejected inside the open transaction
        self.max_tag = 0
        self.global_qos = 0
        self.last_declared = ""     # the queue "" stands for on this channel


class Runner:
    """One execution of a sequence against one broker, with its own object names (prefix)."""

    def __init__(self, port, prefix, avoid=()):
        self.port, self.prefix = port, prefix
        self.avoid = list(avoid)
        self.queue_flags = {}        # queue name -> (durable, auto_delete, exclusive) of its successful declare
        self.queue_args = {}         # queue name -> the arguments of its successful declare
        self.conn = None
        self.chans = {}
        self.observer = None
        self.generated = []          # server-named queues, in the order declared
        self.absent = set()          # ("queue" or "exchange", label) that the last snapshot did not find
        self.events = []
        self.op_index = -1

    # -- names
    def name(self, ref):
        if ref == "gen":
            return self.generated[-1] if self.generated else self.prefix + "gen-none"
        if ref in QUEUES or ref in EXCHANGES or ref == "missing":
            return self.prefix + ref
        return ref

    def model_queue(self, op):
        """The queue an operation names, as far as the runner knows: "" is its channel's last declared one."""
        if op.get("q") == "":
            chan = self.chans.get(op.get("ch"))
            return chan.last_declared if chan is not None else ""
        return self.name(op["q"])

    def value(self, v):
        """Strings "@slot" in keys and arguments are the slot's object name."""
        if isinstance(v, str) and v.startswith("@"):
            return self.name(v[1:])
        return v

    def normalise(self, v):
        if isinstance(v, str):
            for i, g in enumerate(self.generated):
                v = v.replace(g, "<gen#%d>" % (i + 1))
            return v.replace(self.prefix, "")
        if isinstance(v, list):
            return [self.normalise(x) for x in v]
        if isinstance(v, dict):
            return {self.normalise(k): self.normalise(x) for k, x in v.items()}
        return v

    # -- connection and channels
    def params(self, vhost="/"):
        return pika.ConnectionParameters("127.0.0.1", self.port, vhost, pika.PlainCredentials("guest", "guest"),
                                         heartbeat=0, connection_attempts=1, socket_timeout=10,
                                         blocked_connection_timeout=None)

    def connection(self, obs):
        if self.conn is None or not self.conn.is_open:
            if self.conn is not None:
                obs["reconnected"] = True
            self.conn = pika.BlockingConnection(self.params())
            self.chans, self.observer = {}, None
        return self.conn

    def channel(self, number, obs):
        conn = self.connection(obs)
        chan = self.chans.get(number)
        if chan is None or not chan.ch.is_open:
            if chan is not None:
                obs.setdefault("reopened", []).append(number)
            ch = conn.channel(channel_number=number)
            ch.add_on_return_callback(lambda c, m, p, b: self.events.append(("return", c.channel_number, m, p, b)))
            ch.add_on_cancel_callback(lambda frame, n=number: self.events.append(("cancelled", n, frame.method)))
            chan = self.chans[number] = Chan(number, ch)
        return chan

    def channel_lost(self, number):
        self.chans.pop(number, None)

    def connection_lost(self):
        self.chans, self.observer = {}, None
        try:
            if self.conn is not None and self.conn.is_open:
                self.conn.close()
        except Exception:
            pass

    # -- messages
    def message(self, method, props, body):
        m = {"body": body.decode("latin-1"), "exchange": method.exchange, "routing_key": method.routing_key,
             "props": {}}
        for field in ("content_type", "content_encoding", "headers", "delivery_mode", "priority", "correlation_id",
                      "reply_to", "expiration", "message_id", "timestamp", "type", "user_id", "app_id",
                      "cluster_id"):
            v = getattr(props, field)
            if v is not None:
                m["props"][field] = v
        headers = m["props"].get("headers")
        if headers and "x-death" in headers:  # a dead-lettering's time is the broker's clock
            for death in headers["x-death"][1]:
                if death[0] == "F" and "time" in death[1]:
                    death[1]["time"] = [death[1]["time"][0], "<time>"]
        if hasattr(method, "redelivered"):
            m["redelivered"] = method.redelivered
        return m

    def on_message(self, ch, method, props, body):
        self.events.append(("deliver", ch.channel_number, method, props, body))

    # -- settling: a bounded wait for quiescence, by round trips, never by a sleep
    def sync_channels(self, obs):
        for number in sorted(self.chans):
            chan = self.chans[number]
            if not chan.ch.is_open:  # closed by the broker while another channel waited
                reason = chan.ch._closing_reason
                if isinstance(reason, pika.exceptions.ChannelClosedByBroker):
                    obs.setdefault("closed", []).append({"ch": number, "code": reason.reply_code})
                self.forget_channel(number)
                continue
            try:
                chan.ch.exchange_declare("amq.direct", passive=True)  # a round trip that changes nothing
            except pika.exceptions.ChannelClosedByBroker as e:
                obs.setdefault("closed", []).append({"ch": number, "code": e.reply_code})
                obs.setdefault("_text", []).append(e.reply_text)
                self.forget_channel(number)

    def snapshot(self, obs, recheck):
        """Every queue's ready messages and consumers, and which exchanges exist, read on the observer channel:
        a passive declare is answered by the queue itself in RabbitMQ, after what it was sent before. Only a
        declare makes a queue or exchange exist, so one that was absent is asked again only after a declare
        (`recheck`); asking costs a channel, which the 404 closes."""
        conn = self.connection(obs)
        state = {"queues": {}, "exchanges": {}}
        names = [(q, self.prefix + q) for q in QUEUES] + [("<gen#%d>" % (i + 1), g) for i, g in
                                                          enumerate(self.generated)]
        for kind, label, name in [("queue", l, n) for l, n in names] + [("exchange", x, self.prefix + x)
                                                                        for x in EXCHANGES]:
            if (kind, label) in self.absent and not recheck:
                state[kind + "s"][label] = None if kind == "queue" else False
                continue
            if self.observer is None or not self.observer.is_open:
                self.observer = conn.channel(channel_number=OBSERVER_CHANNEL)
            try:
                if kind == "queue":
                    r = self.observer.queue_declare(name, passive=True)
                    state["queues"][label] = [r.method.message_count, r.method.consumer_count]
                else:
                    self.observer.exchange_declare(name, passive=True)
                    state["exchanges"][label] = True
                self.absent.discard((kind, label))
            except pika.exceptions.ChannelClosedByBroker as e:
                if e.reply_code == 404:
                    self.absent.add((kind, label))
                state[kind + "s"][label] = (None if kind == "queue" else False) if e.reply_code == 404 else \
                    e.reply_code
        return state

    def settle(self, obs, op):
        """Waits for quiescence, in a bounded way and by round trips only: the operation's channel and every
        other, then the queues (which answer after what they were sent), then the channels again (for what the
        queues sent them), until two rounds see the same; at most six rounds."""
        previous = None
        recheck = op["op"] in ("declare_queue", "declare_exchange")
        for _ in range(6):
            self.sync_channels(obs)
            state = self.snapshot(obs, recheck)
            recheck = False
            self.sync_channels(obs)
            self.conn.process_data_events(time_limit=0)
            key = (json.dumps(state, sort_keys=True), len(self.events))
            if key == previous:
                break
            previous = key
        obs.update(state)
        labels = {self.prefix + q: q for q in QUEUES}
        labels.update({g: "<gen#%d>" % (i + 1) for i, g in enumerate(self.generated)})
        for name in list(self.queue_flags):  # deleted, by us or by the broker (auto_delete, exclusive)
            if state["queues"].get(labels.get(name)) is None:
                self.queue_flags.pop(name, None)
                self.queue_args.pop(name, None)

    def forget_channel(self, number):
        self.chans.pop(number, None)

    def collect(self, obs):
        """The events of this operation, per channel, in an order the protocol fixes: per consumer (deliveries
        of different consumers on one channel interleave as their queues send them)."""
        events, self.events = self.events, []
        per_channel = {}
        for kind, number, method, props, body in [e if len(e) == 5 else e + (None, None) for e in events]:
            entry = per_channel.setdefault(str(number), {})
            chan = self.chans.get(number)
            if kind == "deliver":
                m = self.message(method, props, body)
                entry.setdefault("deliveries", {}).setdefault(method.consumer_tag, []).append(m)
                entry.setdefault("tags", []).append(method.delivery_tag)
                if chan is not None:
                    chan.max_tag = max(chan.max_tag, method.delivery_tag)
                    info = chan.consumers.get(method.consumer_tag)
                    if info is not None and not info["no_ack"]:
                        m["_tag"] = method.delivery_tag
            elif kind == "return":
                m = self.message(method, props, body)
                m["reply_code"] = method.reply_code
                entry.setdefault("returns", []).append(m)
            elif kind == "cancelled":
                entry.setdefault("cancelled", []).append(method.consumer_tag)
                if chan is not None:
                    chan.consumers.pop(method.consumer_tag, None)
        for number, entry in per_channel.items():
            if "tags" in entry:
                entry["tags"].sort()
            chan = self.chans.get(int(number))
            for tag in sorted(entry.get("deliveries", {})):
                for m in entry["deliveries"][tag]:
                    t = m.pop("_tag", None)
                    if t is not None and chan is not None:
                        chan.unacked.append({"tag": t, "batch": self.op_index})
        if per_channel:
            obs["events"] = per_channel

    # -- the operations
    def run(self, ops, verbose=None):
        observations = []
        old = signal.signal(signal.SIGALRM, _alarm)
        try:
            for i, op in enumerate(ops):
                self.op_index = i
                obs = {}
                signal.setitimer(signal.ITIMER_REAL, OP_TIMEOUT)
                try:
                    try:
                        self.execute(op, obs)
                    except pika.exceptions.ChannelClosedByBroker as e:
                        obs.setdefault("closed", []).append({"ch": op.get("ch"), "code": e.reply_code})
                        obs.setdefault("_text", []).append(e.reply_text)
                        self.forget_channel(op.get("ch"))
                    self.settle(obs, op)
                    self.collect(obs)
                except pika.exceptions.ConnectionClosedByBroker as e:
                    obs["connection_closed"] = e.reply_code
                    obs.setdefault("_text", []).append(e.reply_text)
                    self.events = []
                    self.connection_lost()
                except (pika.exceptions.AMQPConnectionError, OSError) as e:
                    obs["connection_lost"] = type(e).__name__
                    self.events = []
                    self.connection_lost()
                except OpTimeout:
                    obs["timeout"] = True
                    self.events = []
                    self.conn, self.chans, self.observer = None, {}, None  # abandoned
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                obs = self.normalise(obs)
                for name in self.avoid:
                    mask = AVOIDANCE[name].get("mask")
                    if mask:
                        mask(obs)
                observations.append(obs)
                if verbose:
                    verbose(i, op, obs)
        finally:
            signal.signal(signal.SIGALRM, old)
            self.cleanup()
        return observations

    def cleanup(self):
        try:
            signal.setitimer(signal.ITIMER_REAL, OP_TIMEOUT)
            if self.conn is None or not self.conn.is_open:
                self.conn = pika.BlockingConnection(self.params())
            ch = None
            for kind, name in ([("queue", self.prefix + q) for q in QUEUES] + [("queue", g) for g in self.generated]
                               + [("exchange", self.prefix + x) for x in EXCHANGES]):
                if ch is None or not ch.is_open:
                    ch = self.conn.channel()
                try:
                    (ch.queue_delete if kind == "queue" else ch.exchange_delete)(name)
                except pika.exceptions.ChannelClosedByBroker:
                    pass
            self.conn.close()
        except Exception:
            pass
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def execute(self, op, obs):
        kind = op["op"]
        if kind == "bad_vhost":
            try:
                pika.BlockingConnection(self.params(vhost=self.prefix + "no-such-vhost")).close()
                obs["bad_vhost"] = {"opened": True}
            except pika.exceptions.ConnectionClosedByBroker as e:
                obs["bad_vhost"] = {"code": e.reply_code}
            except pika.exceptions.AMQPConnectionError as e:
                # pika turns a connection.close before open-ok into ProbableAccessDeniedError, with the close's
                # repr ("ConnectionClosedByBroker: (530) '...'") as its text.
                code = re.search(r"\((\d+)\)", str(e.args[0]) if e.args else "")
                obs["bad_vhost"] = {"code": int(code.group(1)) if code else None, "refused": type(e).__name__}
            self.connection(obs)
            return
        for name in self.avoid:
            skip = AVOIDANCE[name].get("skip")
            if skip and skip(self, op):
                obs["skipped"] = "avoiding open bug " + name
                return
        chan = self.channel(op["ch"], obs)
        getattr(self, "op_" + kind)(op, chan, obs)

    def op_declare_queue(self, op, chan, obs):
        name = "" if op["q"] == "gen" and not op.get("passive") else self.name(op["q"])
        args = {k: self.value(v) for k, v in op.get("args", {}).items()} or None
        r = chan.ch.queue_declare(name, passive=op.get("passive", False), durable=op.get("durable", False),
                                  exclusive=op.get("exclusive", False), auto_delete=op.get("auto_delete", False),
                                  arguments=args)
        actual = r.method.queue
        chan.last_declared = actual
        if name == "" and not op.get("passive") and actual not in self.generated:
            self.generated.append(actual)
        if not op.get("passive"):
            self.queue_flags[actual] = (op.get("durable", False), op.get("auto_delete", False),
                                        op.get("exclusive", False))
            self.queue_args[actual] = args or {}
        obs["reply"] = {"queue": actual, "messages": r.method.message_count, "consumers": r.method.consumer_count}

    def op_delete_queue(self, op, chan, obs):
        r = chan.ch.queue_delete(self.name(op["q"]), if_unused=op["if_unused"], if_empty=op["if_empty"])
        obs["reply"] = {"messages": r.method.message_count}

    def op_purge(self, op, chan, obs):
        r = chan.ch.queue_purge(self.name(op["q"]))
        obs["reply"] = {"messages": r.method.message_count}

    def binding_args(self, op):
        if "args" not in op:
            return None
        return {k: (to_field(v) if isinstance(v, list) else v) for k, v in op["args"].items()}

    def op_bind_queue(self, op, chan, obs):
        chan.ch.queue_bind(self.name(op["q"]), self.name(op["x"]), self.value(op["key"]), self.binding_args(op))
        obs["reply"] = "ok"

    def op_unbind_queue(self, op, chan, obs):
        chan.ch.queue_unbind(self.name(op["q"]), self.name(op["x"]), self.value(op["key"]), self.binding_args(op))
        obs["reply"] = "ok"

    def op_declare_exchange(self, op, chan, obs):
        chan.ch.exchange_declare(self.name(op["x"]), op["type"], passive=op.get("passive", False),
                                 durable=op.get("durable", False), auto_delete=op.get("auto_delete", False),
                                 internal=op.get("internal", False))
        obs["reply"] = "ok"

    def op_delete_exchange(self, op, chan, obs):
        chan.ch.exchange_delete(self.name(op["x"]), if_unused=op["if_unused"])
        obs["reply"] = "ok"

    def op_bind_exchange(self, op, chan, obs):
        chan.ch.exchange_bind(self.name(op["dst"]), self.name(op["src"]), self.value(op["key"]))
        obs["reply"] = "ok"

    def op_unbind_exchange(self, op, chan, obs):
        chan.ch.exchange_unbind(self.name(op["dst"]), self.name(op["src"]), self.value(op["key"]))
        obs["reply"] = "ok"

    def op_publish(self, op, chan, obs):
        props = dict(op["props"])
        if "headers" in props:
            props["headers"] = {self.value(k): to_field([t, self.value(v) if t == "S" else v]) if t != "A" else
                                to_field([t, [[it, self.value(iv)] for it, iv in v]])
                                for k, (t, v) in props["headers"].items()}
        try:
            chan.ch.basic_publish(self.name(op["x"]), self.value(op["key"]), op["body"].encode(),
                                  pika.BasicProperties(**props), mandatory=op["mandatory"])
            if chan.mode == "confirm":
                obs["confirm"] = "ack"
        except pika.exceptions.UnroutableError as e:
            obs["confirm"] = "ack"
            obs["returned"] = [dict(self.message(m.method, m.properties, m.body), reply_code=m.method.reply_code)
                               for m in e.messages]
        except pika.exceptions.NackError as e:
            obs["confirm"] = "nack"
            if e.messages:
                obs["returned"] = [self.message(m.method, m.properties, m.body) for m in e.messages]

    def op_get(self, op, chan, obs):
        method, props, body = chan.ch.basic_get(self.name(op["q"]), auto_ack=op["no_ack"])
        if method is None:
            obs["reply"] = "empty"
            return
        m = self.message(method, props, body)
        m.update(tag=method.delivery_tag, remaining=method.message_count)
        obs["reply"] = m
        chan.max_tag = max(chan.max_tag, method.delivery_tag)
        if not op["no_ack"]:
            chan.unacked.append({"tag": method.delivery_tag, "batch": self.op_index})

    def global_qos_would_race(self, chan, queue=None, count=None):
        """A global prefetch shared by consumers of two queues (no-ack ones too: a used-up limit holds them): which
        queue's message takes a freed slot is a race between queue processes in RabbitMQ, so the test does not
        build it."""
        limit = chan.global_qos if count is None else count
        queues = {c["queue"] for c in chan.consumers.values()}
        if queue is not None:
            queues.add(queue)
        return limit > 0 and len(queues) > 1

    def op_consume(self, op, chan, obs):
        queue = self.model_queue(op)
        if self.global_qos_would_race(chan, queue=queue):
            obs["skipped"] = "global prefetch over two queues"
            return
        args = op.get("args")
        tag = chan.ch.basic_consume(self.name(op["q"]), self.on_message, auto_ack=op["no_ack"],
                                    exclusive=op["exclusive"],
                                    consumer_tag=op["tag"], arguments=args)
        chan.consumers[tag] = {"queue": queue, "no_ack": op["no_ack"]}
        obs["reply"] = {"consumer": tag}

    def op_cancel(self, op, chan, obs):
        tags = list(chan.consumers)
        if not tags:
            obs["skipped"] = "no consumer"
            return
        tag = tags[min(int(op["pick"] * len(tags)), len(tags) - 1)]
        chan.ch.basic_cancel(tag)
        chan.consumers.pop(tag, None)
        obs["reply"] = {"cancelled": tag}

    def resolve_tag(self, op, chan, obs, multiple):
        """The delivery tag an ack, nack or reject names, and the entries it settles. Deliveries of one operation
        to different consumers of a channel have tags in the order their queues sent them, so an entry is found
        by its place in a canonical order (consumer, then arrival), and a multiple one never splits such a batch."""
        if op["pick"] == "unknown":
            return chan.max_tag + 1000, []
        if op["pick"] == "zero":
            return 0, list(chan.unacked) if multiple else []
        if not chan.unacked:
            return None, []
        entry = chan.unacked[min(int(op["pick"] * len(chan.unacked)), len(chan.unacked) - 1)]
        if not multiple:
            return entry["tag"], [entry]
        tag = max(e["tag"] for e in chan.unacked if e["batch"] == entry["batch"])
        return tag, [e for e in chan.unacked if e["tag"] <= tag]

    def settle_entries(self, chan, entries):
        for e in entries:
            chan.unacked.remove(e)
        if chan.mode == "tx":
            chan.tx_taken.extend(entries)

    def op_ack(self, op, chan, obs):
        tag, entries = self.resolve_tag(op, chan, obs, op["multiple"])
        if tag is None:
            obs["skipped"] = "nothing to acknowledge"
            return
        chan.ch.basic_ack(tag, multiple=op["multiple"])
        obs["sent"] = {"tag": tag}
        self.settle_entries(chan, entries)

    def op_nack(self, op, chan, obs):
        tag, entries = self.resolve_tag(op, chan, obs, op["multiple"])
        if tag is None:
            obs["skipped"] = "nothing to acknowledge"
            return
        chan.ch.basic_nack(tag, multiple=op["multiple"], requeue=op["requeue"])
        obs["sent"] = {"tag": tag}
        self.settle_entries(chan, entries)

    def op_reject(self, op, chan, obs):
        tag, entries = self.resolve_tag(op, chan, obs, False)
        if tag is None:
            obs["skipped"] = "nothing to acknowledge"
            return
        chan.ch.basic_reject(tag, requeue=op["requeue"])
        obs["sent"] = {"tag": tag}
        self.settle_entries(chan, entries)

    def op_recover(self, op, chan, obs):
        chan.ch.basic_recover(requeue=op["requeue"])
        chan.unacked = []
        obs["reply"] = "ok"

    def op_qos(self, op, chan, obs):
        if op["global"] and self.global_qos_would_race(chan, count=op["count"]):
            obs["skipped"] = "global prefetch over two queues"
            return
        chan.ch.basic_qos(prefetch_count=op["count"], global_qos=op["global"])
        # A per-consumer qos lifts the global one (RabbitMQ 3.10's rabbit_limiter:unlimit_prefetch).
        chan.global_qos = op["count"] if op["global"] else 0
        obs["reply"] = "ok"

    def op_confirm(self, op, chan, obs):
        chan.ch.confirm_delivery()
        chan.mode = "confirm"
        obs["reply"] = "ok"

    def op_tx_select(self, op, chan, obs):
        chan.ch.tx_select()
        chan.mode = "tx"
        obs["reply"] = "ok"

    def op_tx_commit(self, op, chan, obs):
        chan.ch.tx_commit()
        chan.tx_taken = []
        obs["reply"] = "ok"

    def op_tx_rollback(self, op, chan, obs):
        chan.ch.tx_rollback()
        chan.unacked = sorted(chan.unacked + chan.tx_taken, key=lambda e: e["tag"])
        chan.tx_taken = []
        obs["reply"] = "ok"

    def op_close_channel(self, op, chan, obs):
        if op.get("crossing"):
            # A publish to a missing exchange, and at once our channel.close: the broker's channel.close (404)
            # crosses ours. pika's channel-level publish does not wait for a confirm, even in confirm mode.
            chan.ch._impl.basic_publish(self.name("missing"), "k0", b"crossing")
        chan.ch.close()
        self.forget_channel(chan.number)
        obs["reply"] = "ok"


# ---------------------------------------------------------------------------------------------------------------
# Comparing, excusing, shrinking.

def diff(a, b, path=()):
    """The paths where two observations differ, with both values; keys starting with "_" are not compared."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k.startswith("_"):
                continue
            out += diff(a.get(k, "<absent>"), b.get(k, "<absent>"), path + (k,))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, path + (str(i),))
        return out
    if a == b and type(a) == type(b):
        return []
    return [(".".join(path), a, b)]


class Known:
    """amqp_differential_known.json: the divergences the FireMQ spec decides differently."""

    def __init__(self, path):
        with open(path) as f:
            data = json.load(f)
        self.entries = data["known"]
        for e in self.entries:
            if "field" in e:
                e["_re"] = re.compile(e["field"]["path"])
            if "scenario" in e:
                e["_paths"] = [re.compile(p) for p in e["scenario"]["paths"]]
        self.excused = {e["id"]: 0 for e in self.entries}

    def field_excuse(self, path, rabbit, reference):
        for e in self.entries:
            f = e.get("field")
            if f and e["_re"].search(path) and rabbit == f["rabbitmq"] and self.matches(f["reference"], reference):
                return e["id"]
        return None

    @staticmethod
    def matches(expected, value):
        """A field entry's value: exactly this one, or "<present>" for any value but "<absent>"."""
        return value != "<absent>" if expected == "<present>" else value == expected

    @staticmethod
    def has_ops(scenario, ops):
        return all(any(all(op.get(k) == v for k, v in pattern.items()) for op in ops) for pattern in scenario["ops"])

    def scenario_candidate(self, ops):
        return any(self.has_ops(e["scenario"], ops) for e in self.entries if "scenario" in e)

    def scenario_excuse(self, ops, paths):
        """The entry whose scenario this shrunk divergence is: an operation of the sequence matches each of its
        patterns, and every path that differs matches one of its path regexes."""
        for e in self.entries:
            s = e.get("scenario")
            if s and self.has_ops(s, ops) and all(any(r.search(p) for r in e["_paths"]) for p in paths):
                return e["id"]
        return None


def compare(rabbit, reference, known, count=True):
    """The first operation whose observations differ beyond what a known field entry excuses: (index, diffs)."""
    for i, (a, b) in enumerate(zip(rabbit, reference)):
        differences = diff(a, b)
        left = []
        for path, x, y in differences:
            excuse = known.field_excuse(path, x, y) if known else None
            if excuse is None:
                left.append((path, x, y))
            elif count:
                known.excused[excuse] += 1
        if left:
            return i, left
    if len(rabbit) != len(reference):
        return min(len(rabbit), len(reference)), [("length", len(rabbit), len(reference))]
    return None


def signature(ops, divergence):
    index, differences = divergence
    return ops[index]["op"], frozenset(p.split(".")[0] for p, _, _ in differences)


class Session:
    """The two brokers, and a counter that gives every execution object names of its own."""

    def __init__(self, rabbit_port, reference_port, known, avoid=()):
        self.rabbit_port, self.reference_port, self.known = rabbit_port, reference_port, known
        self.avoid = avoid
        self.counter = 0
        self.compared = 0
        self.tag = "%04x" % random.randrange(1 << 16)

    def prefix(self):
        self.counter += 1
        return "t%s%05d_" % (self.tag, self.counter)

    def observe(self, port, ops, verbose=None):
        return Runner(port, self.prefix(), self.avoid).run(ops, verbose)

    def both(self, ops, verbose=None):
        rabbit = self.observe(self.rabbit_port, ops, verbose and (lambda i, op, o: verbose("rabbitmq", i, op, o)))
        reference = self.observe(self.reference_port, ops,
                                 verbose and (lambda i, op, o: verbose("reference", i, op, o)))
        return rabbit, reference

    def divergence(self, ops, count=False):
        rabbit, reference = self.both(ops)
        d = compare(rabbit, reference, self.known, count=count)
        return d, rabbit, reference


def shrink(session, ops, divergence, budget_seconds):
    """The shortest subsequence that still diverges the same way (same operation kind, same observation keys):
    the prefix up to the divergence, then chunks removed (delta debugging), then single operations, then the
    optional fields of what is left (properties, headers, arguments), until nothing more can go."""
    target = signature(ops, divergence)
    deadline = time.time() + budget_seconds
    ops = ops[:divergence[0] + 1]
    tried = {}

    def still(candidate):
        key = json.dumps(candidate, sort_keys=True)
        if key not in tried:
            if time.time() > deadline or not candidate:
                return False
            d, _, _ = session.divergence(candidate)
            tried[key] = d is not None and signature(candidate, d) == target
        return tried[key]

    n = 2
    while len(ops) >= 2 and time.time() < deadline:
        chunk = max(1, len(ops) // n)
        removed = False
        for start in range(0, len(ops), chunk):
            candidate = ops[:start] + ops[start + chunk:]
            if still(candidate):
                ops, n, removed = candidate, max(n - 1, 2), True
                break
        if not removed:
            if chunk == 1:
                break
            n = min(len(ops), n * 2)
    changed = True
    while changed and time.time() < deadline:
        changed = False
        for i in range(len(ops)):
            candidate = ops[:i] + ops[i + 1:]
            if still(candidate):
                ops, changed = candidate, True
                break
    for i in range(len(ops)):
        for path in optional_fields(ops[i]):
            candidate = copy.deepcopy(ops)
            target_dict = candidate[i]
            for k in path[:-1]:
                target_dict = target_dict.get(k, {})
            if path[-1] not in target_dict:
                continue
            del target_dict[path[-1]]
            if still(candidate):
                ops = candidate
    return ops, len(tried)


def optional_fields(op):
    paths = []
    for k, v in op.get("props", {}).items():
        if k == "headers":
            paths += [("props", "headers", h) for h in v]
        paths.append(("props", k))
    paths += [("args", k) for k in op.get("args", {})]
    paths += [("args",)] if "args" in op else []
    if op["op"] in ("declare_queue", "declare_exchange"):  # a consume's exclusive is not optional
        paths += [(flag,) for flag in ("auto_delete", "exclusive", "durable", "passive", "internal") if op.get(flag)]
    return paths


# ---------------------------------------------------------------------------------------------------------------
# The brokers.

class ReferenceBroker:
    def __init__(self, executable, extra_args, directory):
        self.directory = directory
        definitions = os.path.join(directory, "definitions.json")
        with open(definitions, "w") as f:
            json.dump({"users": [{"name": "guest", "password": "guest"}], "vhosts": [{"name": "/"}],
                       "permissions": [{"user": "guest", "vhost": "/"}]}, f)
        self.args = [executable, "--bind", "127.0.0.1", "--port", "0", "--tls-port", "off", "--ws-port", "off",
                     "--wss-port", "off", "--amqp-port", "0", "--definitions", definitions,
                     "--data-dir", os.path.join(directory, "data")] + list(extra_args)
        self.process = None
        self.start()

    def start(self):
        ports = os.path.join(self.directory, "ports.json")
        if os.path.exists(ports):
            os.remove(ports)
        self.log = open(os.path.join(self.directory, "broker.log"), "ab")
        self.process = subprocess.Popen(self.args + ["--port-file", ports], stdout=self.log, stderr=self.log)
        deadline = time.time() + 20
        while True:
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError("the broker did not start: " + open(self.log.name).read()[-2000:])
            try:
                self.port = json.load(open(ports))["amqp"]
                break
            except (OSError, ValueError, KeyError):  # not there yet, or not written whole yet
                time.sleep(0.02)

    def alive(self):
        return self.process.poll() is None

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


class RabbitNode:
    def __init__(self, port, running):
        self.port, self.running = port, running
        self.directory = None
        if not running:
            self.directory = tempfile.mkdtemp(prefix="firemq-rabbitmq-diff.")
            os.chmod(self.directory, 0o755)  # the node runs as the rabbitmq user when we are root
            started = time.time()
            subprocess.run(["bash", NODE_SCRIPT, "start", str(port), self.directory], check=True)
            print("RabbitMQ started on port %d in %.1f s" % (port, time.time() - started), flush=True)

    def stop(self):
        if not self.running:
            subprocess.run(["bash", NODE_SCRIPT, "stop", str(self.port), self.directory])
            shutil.rmtree(self.directory, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------------

def parse_seeds(args):
    if args.seed is not None:
        return [args.seed]
    a, _, b = args.seeds.partition("..")
    return list(range(int(a), int(b or a) + 1))


def print_listing(title, ops):
    print(title)
    for i, op in enumerate(ops):
        print("  " + describe(i, op))
    print("  replay: --replay-json '%s'" % json.dumps(ops, separators=(",", ":")))


def show_observation(label, obs):
    print("  %-9s %s" % (label + ":", json.dumps(obs, sort_keys=True)))


def examine(session, seed, ops, d, args, known):
    """A divergence: printed, shrunk, and matched against the known scenarios. True if it is excused."""
    index, differences = d
    print("\nseed %s: divergence at operation %d (%s)" % (seed, index, ops[index]["op"]))
    for path, x, y in differences[:12]:
        print("  %s: rabbitmq %s, reference %s" % (path, json.dumps(x), json.dumps(y)))
    shrunk = ops[:index + 1]
    # A scenario is matched on the shortest sequence only (a long one holds any operation by chance), so a
    # divergence that might be one is shrunk even with --no-shrink.
    if not args.no_shrink or known.scenario_candidate(shrunk):
        t0 = time.time()
        shrunk, tries = shrink(session, ops, d, args.shrink_seconds)
        print("  shrunk from %d to %d operations in %d runs, %.1f s" % (index + 1, len(shrunk), tries,
                                                                         time.time() - t0))
        scenario_ok = True
    else:
        scenario_ok = False
    again, rabbit_obs, reference_obs = session.divergence(shrunk)
    if again is None:
        print("  (the shrunk sequence no longer diverges: the divergence depends on timing)")
        again, rabbit_obs, reference_obs = session.divergence(ops)
        shrunk, scenario_ok = ops, False
    print_listing("  shortest sequence:" if scenario_ok else "  sequence:", shrunk)
    excuse = None
    if again is not None:
        j = again[0]
        print("  observations at operation %d:" % j)
        show_observation("rabbitmq", rabbit_obs[j])
        show_observation("reference", reference_obs[j])
        if scenario_ok:
            excuse = known.scenario_excuse(shrunk, [p for p, _, _ in again[1]])
    if excuse:
        known.excused[excuse] += 1
        print("  excused: known divergence '%s'" % excuse)
        return True
    if args.save_shrunk:
        with open("%s.%s.json" % (args.save_shrunk, seed), "w") as f:
            json.dump(shrunk, f, indent=1)
    return False


def run_sequences(session, sequences, args, known, broker, stop_at_first=False):
    """Runs and compares each (seed, ops); returns the seeds with an unexcused divergence."""
    failures = []
    verbose = None
    if args.verbose:
        def verbose(side, i, op, obs):
            print("%-9s %s\n          -> %s" % (side, describe(i, op), json.dumps(obs, sort_keys=True)))
    for seed, ops in sequences:
        if ops is None:
            ops = generate(seed, args.ops)
        rabbit_obs, reference_obs = session.both(ops, verbose)
        session.compared += 1
        d = compare(rabbit_obs, reference_obs, known)
        if broker is not None and not broker.alive():
            print("seed %s: the reference broker exited (status %s); restarted" % (seed, broker.process.returncode))
            broker.stop()
            broker.start()
            session.reference_port = broker.port
            d = d or (len(ops) - 1, [("broker", "running", "exited")])
        if d is None or examine(session, seed, ops, d, args, known):
            continue
        failures.append(seed)
        if stop_at_first or not args.keep_going:
            break
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--seeds", default="1..20", help="A..B, both included (default 1..20)")
    parser.add_argument("--ops", type=int, default=40, help="operations per sequence (default 40)")
    parser.add_argument("--broker", help="the firemq-broker executable")
    parser.add_argument("--broker-arg", action="append", default=[],
                        help="one more argument for the broker, e.g. --broker-arg=--amqp-fault=lossy-header-types")
    parser.add_argument("--rabbitmq-port", type=int, default=25690,
                        help="RabbitMQ's AMQP port (default 25690; also uses the next two for distribution and epmd)")
    parser.add_argument("--rabbitmq-running", action="store_true", help="use the node already on --rabbitmq-port")
    parser.add_argument("--self-check", nargs="?", const="rabbitmq", choices=["rabbitmq", "reference"],
                        help="compare a broker with itself (RabbitMQ by default; no --broker needed): the "
                             "determinism of the observation")
    parser.add_argument("--keep-going", action="store_true", help="go on with the next seeds after a divergence")
    parser.add_argument("--expect-divergence", action="store_true",
                        help="succeed only if an unexcused divergence is found (a deliberately broken broker)")
    parser.add_argument("--catch-faults", metavar="F1,F2,...",
                        help="for each --amqp-fault named, a broker with that fault: each must show an unexcused "
                             "divergence within the seeds")
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--shrink-seconds", type=float, default=300)
    parser.add_argument("--known", default=KNOWN_FILE)
    parser.add_argument("--replay", help="a JSON file with a list of operations, instead of generated ones")
    parser.add_argument("--replay-json", help="the same list given inline")
    parser.add_argument("--save-shrunk", metavar="FILE", help="write each shrunk sequence to FILE.<seed>.json")
    parser.add_argument("--avoid-bug", action="append", default=[], choices=sorted(AVOIDANCE), metavar="ID",
                        help="steer around an open bug of the reference broker (temporary; the ids are those of "
                             "amqp_differential_open_bugs.json)")
    parser.add_argument("--replay-bug", metavar="ID|all",
                        help="replay the shortest sequence of an open bug (or of each) and say whether it diverges")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every observation")
    args = parser.parse_args()
    if not args.broker and args.self_check != "rabbitmq":
        parser.error("--broker is required (or --self-check)")
    open_bugs = load_open_bugs()
    if args.replay_bug and args.replay_bug != "all" and args.replay_bug not in open_bugs:
        parser.error("--replay-bug: no open bug '%s' (%s)" % (args.replay_bug, ", ".join(sorted(open_bugs))))
    for name in args.avoid_bug:
        print("AVOIDING OPEN BUG %s (temporary): %s" % (name, open_bugs[name]["what"]))

    # A runner's SIGTERM (CTest's timeout, a Ctrl-C'd make) still stops the RabbitMQ node and the broker.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    known = Known(args.known)
    started = time.time()
    if args.replay or args.replay_json:
        sequences = [("replay", json.load(open(args.replay)) if args.replay else json.loads(args.replay_json))]
    elif args.replay_bug:
        sequences = [("bug " + b, open_bugs[b]["replay"]) for b in sorted(open_bugs)
                     if args.replay_bug in ("all", b)]
        args.avoid_bug, args.keep_going, args.no_shrink = [], True, True
    else:
        sequences = [(seed, None) for seed in parse_seeds(args)]
    rabbit = RabbitNode(args.rabbitmq_port, args.rabbitmq_running)
    workdir = tempfile.mkdtemp(prefix="firemq-diff.")
    broker, failures, uncaught = None, [], []
    session = Session(args.rabbitmq_port, None, known, args.avoid_bug)
    try:
        if args.catch_faults:
            for fault in args.catch_faults.split(","):
                print("\n== --amqp-fault %s" % fault, flush=True)
                directory = tempfile.mkdtemp(dir=workdir)
                broker = ReferenceBroker(args.broker, args.broker_arg + ["--amqp-fault=" + fault], directory)
                session.reference_port = broker.port
                try:
                    caught = run_sequences(session, sequences, args, known, broker, stop_at_first=True)
                finally:
                    broker.stop()
                    broker = None
                print("== --amqp-fault %s: %s" % (fault, "caught at seed %s" % caught[0] if caught else "NOT CAUGHT"))
                if not caught:
                    uncaught.append(fault)
        else:
            if args.self_check == "rabbitmq":
                session.reference_port = args.rabbitmq_port
            else:
                broker = ReferenceBroker(args.broker, args.broker_arg, workdir)
                session.reference_port = broker.port
                if args.self_check == "reference":
                    session.rabbit_port = broker.port
            failures = run_sequences(session, sequences, args, known, broker)
    finally:
        if broker is not None:
            broker.stop()
        rabbit.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    used = {k: v for k, v in known.excused.items() if v}
    excused = "known divergences excused: %d (%s)" % (sum(used.values()), ", ".join(
        "%s x%d" % kv for kv in sorted(used.items())) or "none")
    if args.catch_faults:
        print("\n%d sequence(s) run in %.1f s; faults not caught: %s; %s" % (
            session.compared, time.time() - started, ", ".join(uncaught) or "none", excused))
        return 1 if uncaught else 0
    if args.replay_bug:
        fixed = [seed[4:] for seed, _ in sequences if seed not in failures]
        print("\nopen bugs replayed: %d; no longer diverging (remove from amqp_differential_open_bugs.json): %s" % (
            len(sequences), ", ".join(fixed) or "none"))
        return 1 if fixed else 0
    print("\n%d sequence(s) of %d operations compared in %.1f s; %d unexcused divergence(s)%s" % (
        session.compared, args.ops, time.time() - started, len(failures),
        (": seeds " + ", ".join(map(str, failures))) if failures else ""))
    print(excused)
    if args.expect_divergence:
        print("expected a divergence: %s" % ("found" if failures else "NOT found"))
        return 0 if failures else 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
