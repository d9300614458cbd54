// The FireMQ frame (spec "Frame format"): the bytes of one frame, and a reader that cuts a TCP byte stream
// into frames. Headers are MessagePack maps, encoded and decoded by @msgpack/msgpack; bodies stay raw bytes.
//
//   +-----------+--------+------------+---------------------+------------------+
//   | len : u32 | op : u8| hlen : u32 | header (hlen bytes) | payload          |
//   +-----------+--------+------------+---------------------+------------------+
import { ExtData, ExtensionCodec, decode, encode } from "@msgpack/msgpack";

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

// A header: the MessagePack map, keys to decoded values (bigint for int64/uint64 formats, Uint8Array for bin).
export type Header = Record<string, unknown>;

export interface Frame {
  op: number;
  header: Header;
  payload: Buffer;
}

// Bytes the peer sent that are no frame. code is the spec's: 501 frame-error or 502 syntax-error.
export class FrameError extends Error {
  constructor(readonly code: number, msg: string) {
    super(msg);
  }
}

// Ext type -1 (the MessagePack timestamp) stays an ext as it came: @msgpack/msgpack would turn it into a Date,
// which cannot be handed back as the bytes the server sent.
const extensionCodec = new ExtensionCodec();
extensionCodec.register({ type: -1, encode: () => null, decode: (data, type) => new ExtData(type, data) });
// useBigInt64: int64 and uint64 values keep all their bits (a JS number has 53).
const MSGPACK_OPTIONS = { useBigInt64: true, extensionCodec } as const;

export function encodeFrame(op: number, header: Header, payload: Uint8Array = new Uint8Array()): Buffer {
  const headerBytes = encode(header, { ...MSGPACK_OPTIONS, ignoreUndefined: true });
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
  let value: unknown;
  try {
    value = decode(bytes, MSGPACK_OPTIONS);  // throws on trailing bytes too: the map must fill hlen exactly
  } catch (e) {
    throw new FrameError(502, `the header is no MessagePack value: ${(e as Error).message}`);
  }
  if (!isMap(value)) throw new FrameError(502, "the header is not a MessagePack map");
  return value;
}

function isMap(value: unknown): value is Header {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
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

export function mapField(h: Header, key: string): Header {
  const v = h[key] ?? {};
  if (!isMap(v)) throw wrongType(key, "a map");
  return v;
}

export function strListField(h: Header, key: string): string[] {
  const v = h[key] ?? [];
  if (!Array.isArray(v) || v.some((s) => typeof s !== "string")) throw wrongType(key, "an array of strings");
  return v;
}

function wrongType(key: string, expected: string): FrameError {
  return new FrameError(502, `header field ${key} is not ${expected}`);
}
