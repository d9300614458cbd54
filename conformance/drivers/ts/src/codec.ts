// The FireMQ frame (spec "Frame format"): the bytes of one frame, and a reader that cuts a TCP byte stream
// into frames. Headers are MessagePack maps, read and written by msgpack.ts so that every value keeps its
// type; bodies stay raw bytes. checkHeader() holds a header to its op's field types: the codec cases
// (docs/client-certification.md) run every vector through it.
//
//   +-----------+--------+------------+---------------------+------------------+
//   | len : u32 | op : u8| hlen : u32 | header (hlen bytes) | payload          |
//   +-----------+--------+------------+---------------------+------------------+
import { Ext, Float32, Float64, MsgMap, MsgpackError, Value, decodeValue, encodeValue } from "./msgpack.js";

// Spec "Op codes", the ones this client sends or receives.
export const Op = {
  hello: 0x01, welcome: 0x02, ping: 0x03, pong: 0x04, close: 0x05, ok: 0x06, error: 0x07, flow: 0x08,
  declare_queue: 0x12, bind: 0x15,
  publish: 0x20, confirm: 0x21, return: 0x22,
  subscribe: 0x30, credit: 0x32, deliver: 0x33, cancelled: 0x34, ack: 0x35, nack: 0x36, get: 0x37, get_ok: 0x38,
} as const;

// "Only publish, return, deliver and get_ok carry a payload."
const OPS_WITH_PAYLOAD = new Set<number>([Op.publish, Op.return, Op.deliver, Op.get_ok]);

// "Before welcome, a frame may be at most 65 536 bytes. After welcome, the limit is welcome.max_frame (16 MiB by
// default)." A frame's size is 4 + len: the len field counts (vectors/README.md).
export const MAX_FRAME_BEFORE_WELCOME = 65536;
export const DEFAULT_MAX_FRAME = 16 * 1024 * 1024;

// A header: the MessagePack map, keys to decoded values (msgpack.ts: a float is a Float32 or Float64 object,
// an int a number or, beyond 2^53, a bigint; bin a Uint8Array).
export type Header = { [key: string]: Value | undefined };

export interface Frame {
  op: number;
  header: Header;
  payload: Buffer;
}

// Bytes the peer sent that are no frame. code is the spec's: 501 frame-error, 502 syntax-error, or 540
// not-implemented, the one that is not fatal ("Unknown op").
export class FrameError extends Error {
  constructor(readonly code: number, msg: string) {
    super(msg);
  }

  get fatal(): boolean {
    return this.code !== 540;
  }
}

export function encodeFrame(op: number, header: Header, payload: Uint8Array = new Uint8Array()): Buffer {
  const headerBytes = encodeValue(header);
  const prefix = Buffer.alloc(9);
  prefix.writeUInt32BE(1 + 4 + headerBytes.length + payload.length, 0);  // "len counts every byte after the len field"
  prefix.writeUInt8(op, 4);
  prefix.writeUInt32BE(headerBytes.length, 5);
  return Buffer.concat([prefix, headerBytes, payload]);
}

// Cuts a byte stream into frames. Bytes may come one at a time or many frames at once: feed() keeps what is
// not a whole frame yet.
export class FrameReader {
  private buffered: Buffer = Buffer.alloc(0);

  constructor(private maxFrame: number) {}

  setMaxFrame(maxFrame: number): void {
    this.maxFrame = maxFrame;
  }

  // The stream ended: bytes of a frame left over are a truncated frame ("Malformed frame").
  finish(): void {
    if (this.buffered.length > 0) throw new FrameError(501, `the stream ended ${this.buffered.length} byte(s) into a frame`);
  }

  // The whole frames in what has come so far; throws FrameError on bytes that are no frame.
  feed(bytes: Buffer): Frame[] {
    this.buffered = this.buffered.length === 0 ? bytes : Buffer.concat([this.buffered, bytes]);
    const frames: Frame[] = [];
    while (this.buffered.length >= 4) {
      const len = this.buffered.readUInt32BE(0);
      // Decided from the len field alone: a peer announcing a huge frame is refused before it is read.
      if (4 + len > this.maxFrame) throw new FrameError(501, `a frame of ${4 + len} bytes is over the limit of ${this.maxFrame}`);
      if (len < 5) throw new FrameError(501, `len ${len} is too short for op and hlen`);
      if (this.buffered.length < 4 + len) break;
      frames.push(parseFrame(this.buffered.subarray(4, 4 + len)));
      this.buffered = this.buffered.subarray(4 + len);
    }
    return frames;
  }
}

// One WebSocket binary message as one frame: "On WebSocket the frame is the same without len." Its size, as
// the limits count it, is the message's length + 4 (vectors/README.md).
export function decodeMessageFrame(message: Buffer, maxFrame: number): Frame {
  if (message.length + 4 > maxFrame) throw new FrameError(501, `a frame of ${message.length + 4} bytes is over the limit of ${maxFrame}`);
  if (message.length < 5) throw new FrameError(501, `a message of ${message.length} bytes is too short for op and hlen`);
  return parseFrame(message);
}

// op, hlen, header and payload: the frame after its len field (also a WebSocket message, which has no len).
function parseFrame(bytes: Buffer): Frame {
  const op = bytes.readUInt8(0);
  const hlen = bytes.readUInt32BE(1);
  if (hlen > bytes.length - 5) throw new FrameError(501, `hlen ${hlen} runs past the frame`);
  const payload = bytes.subarray(5 + hlen);
  if (payload.length > 0 && !OPS_WITH_PAYLOAD.has(op)) throw new FrameError(501, `op 0x${op.toString(16)} carries no payload`);
  return { op, header: decodeHeader(bytes.subarray(5, 5 + hlen)), payload };
}

// "header is a MessagePack map with string keys. hlen may be 0, meaning an empty map."
function decodeHeader(bytes: Buffer): Header {
  if (bytes.length === 0) return {};
  let value: Value;
  try {
    value = decodeValue(bytes);  // refuses trailing bytes too: the map must fill hlen exactly
  } catch (e) {
    if (!(e instanceof MsgpackError)) throw e;
    throw new FrameError(502, `the header is no MessagePack value: ${e.message}`);
  }
  if (value instanceof MsgMap) throw new FrameError(502, "the header is a map with a key that is not a str");
  if (!isMap(value)) throw new FrameError(502, "the header is not a MessagePack map");
  return value;
}

// A map whose keys are all str (a MsgMap, a map with other keys, is not one).
function isMap(value: unknown): value is Header {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array) &&
    !(value instanceof Float32) && !(value instanceof Float64) && !(value instanceof Ext) && !(value instanceof MsgMap);
}

// Reading a known field. "Omitted header fields take their zero value" (a nil reads as omitted,
// docs/spec-notes.md); a field of the wrong type is 502 syntax-error. Unknown keys are never looked at:
// "Implementations ignore header keys they do not know."
export function uintField(h: Header, key: string): number {
  const v = h[key] ?? 0;
  if (typeof v === "bigint" && v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(v);
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) throw wrongType(key, "an unsigned integer");
  return v;
}

export function strField(h: Header, key: string): string {
  const v = h[key] ?? "";
  if (typeof v !== "string") throw wrongType(key, "a string");
  return v;
}

export function boolField(h: Header, key: string): boolean {
  const v = h[key] ?? false;
  if (typeof v !== "boolean") throw wrongType(key, "a boolean");
  return v;
}

// A free-form map (props, headers, args). One with non-str keys comes back as the MsgMap it is: its entries
// pass through unread, to toTypedJson or the encoder, which take either (Header's type does not say so).
export function mapField(h: Header, key: string): Header {
  const v = h[key] ?? {};
  if (v instanceof MsgMap) return v as unknown as Header;
  if (!isMap(v)) throw wrongType(key, "a map");
  return v;
}

export function strListField(h: Header, key: string): string[] {
  const v = h[key] ?? [];
  if (!Array.isArray(v) || v.some((s) => typeof s !== "string")) throw wrongType(key, "an array of strings");
  return v as string[];
}

function wrongType(key: string, expected: string): FrameError {
  return new FrameError(502, `header field ${key} is not ${expected}`);
}

// Every op of version 1 with its fields' types (spec "Op codes" and each op's table): what checkHeader holds a
// header to. The client itself reads fields as it needs them (uintField, ...); this table is for decoding any
// frame, as the codec cases do.
type FieldType = "uint" | "str" | "bool" | "map" | "[str]" | "props" | FieldTypes;
interface FieldTypes { [field: string]: FieldType }

const BIND: FieldTypes = { rid: "uint", exchange: "str", queue: "str", to_exchange: "str", key: "str", args: "map" };
const MESSAGE: FieldTypes = { exchange: "str", key: "str", props: "props", headers: "map" };
const OPS: Record<number, FieldTypes> = {
  0x01: { ver: "uint", vhost: "str", auth: { mech: "str", user: "str", pass: "str" }, heartbeat: "uint",
          client: "map", caps: "[str]" },
  0x02: { ver: "uint", server: { name: "str", version: "str" }, conn_id: "str", heartbeat: "uint",
          max_frame: "uint", caps: "[str]" },
  0x03: {}, 0x04: {},
  0x05: { code: "uint", msg: "str" },
  0x06: { rid: "uint", name: "str", messages: "uint", consumers: "uint", empty: "bool" },
  0x07: { rid: "uint", code: "uint", msg: "str", fatal: "bool" },
  0x08: { pause: "bool" },
  0x10: { rid: "uint", name: "str", type: "str", durable: "bool", auto_delete: "bool", internal: "bool",
          passive: "bool", args: "map" },
  0x11: { rid: "uint", name: "str", if_unused: "bool" },
  0x12: { rid: "uint", name: "str", durable: "bool", exclusive: "bool", auto_delete: "bool", passive: "bool",
          args: "map" },
  0x13: { rid: "uint", name: "str", if_unused: "bool", if_empty: "bool" },
  0x14: { rid: "uint", name: "str" },
  0x15: BIND, 0x16: BIND,
  0x20: { seq: "uint", mandatory: "bool", persistent: "bool", ...MESSAGE },
  0x21: { upto: "uint", seq: "uint", nack: "bool", code: "uint", msg: "str" },
  0x22: { seq: "uint", code: "uint", msg: "str", ...MESSAGE },
  0x30: { rid: "uint", sub: "uint", queue: "str", credit: "uint", no_ack: "bool", exclusive: "bool", tag: "str",
          args: "map" },
  0x31: { rid: "uint", sub: "uint" },
  0x32: { sub: "uint", credit: "uint" },
  0x33: { sub: "uint", tag: "uint", redelivered: "bool", ...MESSAGE },
  0x34: { sub: "uint", code: "uint", msg: "str" },
  0x35: { tag: "uint", multiple: "bool" },
  0x36: { tag: "uint", multiple: "bool", requeue: "bool" },
  0x37: { rid: "uint", queue: "str", no_ack: "bool" },
  0x38: { rid: "uint", tag: "uint", redelivered: "bool", remaining: "uint", ...MESSAGE },
};

// Spec "Message properties": the keys it names, with their types; other keys pass through unchecked.
const PROPS: FieldTypes = {
  content_type: "str", content_encoding: "str", correlation_id: "str", reply_to: "str", expiration: "uint",
  message_id: "str", timestamp: "uint", type: "str", user_id: "str", app_id: "str", priority: "uint",
};

// Holds a frame's header to its op: 540 for an op version 1 does not define ("Unknown op", its header not
// looked at), 502 for a known field of the wrong type, named by its path ("props.expiration"). Unknown keys
// are not looked at; a nil reads as the field omitted (docs/spec-notes.md), as the reference codec reads it.
export function checkHeader(op: number, header: Header): void {
  const fields = OPS[op];
  if (fields === undefined) throw new FrameError(540, `op 0x${op.toString(16)} is not a version 1 op`);
  checkFields(header, fields, "");
}

function checkFields(map: Header, fields: FieldTypes, prefix: string): void {
  for (const [name, type] of Object.entries(fields)) {
    const v = map[name];
    if (v === undefined || v === null) continue;
    const path = prefix + name;
    if (typeof type === "object" || type === "props") {
      // props may have non-str keys besides the ones it names: only the str ones are checked
      const map = type === "props" && v instanceof MsgMap ? Object.fromEntries(v.entries.filter(([k]) => typeof k === "string")) : v;
      if (!isMap(map)) throw wrongType(path, "a map");
      checkFields(map, type === "props" ? PROPS : type, path + ".");
    } else if (!hasType(v, type)) {
      throw wrongType(path, { uint: "an unsigned integer", str: "a string", bool: "a boolean", map: "a map",
                              "[str]": "an array of strings" }[type]);
    }
  }
}

function hasType(v: Value, type: "uint" | "str" | "bool" | "map" | "[str]"): boolean {
  switch (type) {
    case "uint": return (typeof v === "number" || typeof v === "bigint") && v >= 0;  // never a float, never a bool
    case "str": return typeof v === "string";
    case "bool": return typeof v === "boolean";
    case "map": return isMap(v) || v instanceof MsgMap;  // free-form: any keys
    case "[str]": return Array.isArray(v) && v.every((s) => typeof s === "string");
  }
}
