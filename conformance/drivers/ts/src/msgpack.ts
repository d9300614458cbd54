// MessagePack values that keep their type, and a reader and writer for them: what FireMQ headers need and
// @msgpack/msgpack cannot give. A JS number cannot tell 2 from 2.0 nor a float32 from a float64, yet the spec
// says "Decoders must decode every vector to the listed header", and the vectors list those types
// (vectors/README.md: "a decoder must not turn [a float] into an int, and vice versa"). So here a float is
// always a Float32 or Float64 object, and a plain number is always an int.
//
// Values: null, boolean, number (an int within +-(2^53-1)), bigint (an int beyond it), string, Uint8Array
// (bin), Float32, Float64, Ext, arrays, plain objects (maps whose keys are all str) and MsgMap (any other map).
// The reader never trusts a declared length before checking it against the bytes left, and bounds nesting and
// the number of values.

export class Float32 {
  constructor(readonly value: number) {}
}
export class Float64 {
  constructor(readonly value: number) {}
}
export class Ext {
  constructor(readonly type: number, readonly data: Uint8Array) {}
}
// A map with a key that is not a str (an int key, say), in encoded order.
export class MsgMap {
  constructor(readonly entries: [Value, Value][]) {}
}
// In a plain object an undefined entry is left out when encoding (as if the key were absent).
export type Value = null | boolean | number | bigint | string | Uint8Array | Float32 | Float64 | Ext | MsgMap
  | Value[] | { [key: string]: Value | undefined };

// "Application headers nested deeper than 64 levels are 502" (vectors/README.md); the header map is level 1.
export const MAX_NESTING = 64;
// Values in one header, the reference decoder's bound (docs/spec-notes.md, "Nesting depth and item count"): a
// 16 MiB frame of one-byte items would otherwise become millions of JS values.
export const MAX_ITEMS = 65536;

export class MsgpackError extends Error {}

// One MessagePack value filling `bytes` exactly; throws MsgpackError on anything else.
export function decodeValue(bytes: Uint8Array): Value {
  const reader = new Reader(bytes);
  const value = reader.value(1);
  if (reader.pos !== bytes.length) throw new MsgpackError(`${bytes.length - reader.pos} byte(s) after the value`);
  return value;
}

const utf8 = new TextDecoder("utf-8");  // not fatal: the reference decoder does not refuse bad UTF-8 either

class Reader {
  pos = 0;
  private items = 0;
  private readonly view: DataView;

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  value(depth: number): Value {
    if (++this.items > MAX_ITEMS) throw new MsgpackError(`more than ${MAX_ITEMS} values`);
    const b = this.u8();
    if (b <= 0x7f) return b;
    if (b >= 0xe0) return b - 0x100;
    if ((b & 0xf0) === 0x80) return this.map(b & 0x0f, depth);
    if ((b & 0xf0) === 0x90) return this.array(b & 0x0f, depth);
    if ((b & 0xe0) === 0xa0) return this.str(b & 0x1f);
    switch (b) {
      case 0xc0: return null;
      case 0xc2: return false;
      case 0xc3: return true;
      case 0xc4: return this.take(this.u8()).slice();
      case 0xc5: return this.take(this.u16()).slice();
      case 0xc6: return this.take(this.u32()).slice();
      case 0xc7: return this.ext(this.u8());
      case 0xc8: return this.ext(this.u16());
      case 0xc9: return this.ext(this.u32());
      case 0xca: return new Float32(this.view.getFloat32(this.advance(4)));
      case 0xcb: return new Float64(this.view.getFloat64(this.advance(8)));
      case 0xcc: return this.u8();
      case 0xcd: return this.u16();
      case 0xce: return this.u32();
      case 0xcf: return int(this.view.getBigUint64(this.advance(8)));
      case 0xd0: return this.view.getInt8(this.advance(1));
      case 0xd1: return this.view.getInt16(this.advance(2));
      case 0xd2: return this.view.getInt32(this.advance(4));
      case 0xd3: return int(this.view.getBigInt64(this.advance(8)));
      case 0xd4: return this.ext(1);
      case 0xd5: return this.ext(2);
      case 0xd6: return this.ext(4);
      case 0xd7: return this.ext(8);
      case 0xd8: return this.ext(16);
      case 0xd9: return this.str(this.u8());
      case 0xda: return this.str(this.u16());
      case 0xdb: return this.str(this.u32());
      case 0xdc: return this.array(this.u16(), depth);
      case 0xdd: return this.array(this.u32(), depth);
      case 0xde: return this.map(this.u16(), depth);
      case 0xdf: return this.map(this.u32(), depth);
      default: throw new MsgpackError(`byte 0x${b.toString(16)} at ${this.pos - 1} starts no MessagePack value`);
    }
  }

  private array(count: number, depth: number): Value[] {
    this.nest(depth);
    const items: Value[] = [];
    for (let i = 0; i < count; i++) items.push(this.value(depth + 1));  // each item takes a byte: no huge alloc
    return items;
  }

  private map(count: number, depth: number): Value {
    this.nest(depth);
    const entries: [Value, Value][] = [];
    for (let i = 0; i < count; i++) entries.push([this.value(depth + 1), this.value(depth + 1)]);
    if (entries.some(([key]) => typeof key !== "string")) return new MsgMap(entries);
    return Object.fromEntries(entries);  // defines own properties: a "__proto__" key stays a key
  }

  private nest(depth: number): void {
    if (depth > MAX_NESTING) throw new MsgpackError(`nested deeper than ${MAX_NESTING} levels`);
  }

  private str(length: number): string {
    return utf8.decode(this.take(length));
  }

  private ext(length: number): Ext {
    const type = this.view.getInt8(this.advance(1));
    return new Ext(type, this.take(length).slice());
  }

  private u8(): number { return this.view.getUint8(this.advance(1)); }
  private u16(): number { return this.view.getUint16(this.advance(2)); }
  private u32(): number { return this.view.getUint32(this.advance(4)); }

  private take(length: number): Uint8Array {
    const at = this.advance(length);
    return this.bytes.subarray(at, at + length);
  }

  // The position of the next `length` bytes, checked against what is left before anything is read.
  private advance(length: number): number {
    if (length > this.bytes.length - this.pos) {
      throw new MsgpackError(`${length} byte(s) needed at ${this.pos}, ${this.bytes.length - this.pos} left`);
    }
    const at = this.pos;
    this.pos += length;
    return at;
  }
}

function int(v: bigint): number | bigint {
  return v >= -BigInt(Number.MAX_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

// `value` as MessagePack, each int in its smallest format. A number that is not an integer is written as a
// float64 (a convenience for callers; decoded values never hold one).
export function encodeValue(value: Value): Buffer {
  const out: Buffer[] = [];
  write(value, out);
  return Buffer.concat(out);
}

function write(v: Value, out: Buffer[]): void {
  if (v === null) return void out.push(Buffer.of(0xc0));
  if (typeof v === "boolean") return void out.push(Buffer.of(v ? 0xc3 : 0xc2));
  if (typeof v === "number") return Number.isInteger(v) ? writeInt(BigInt(v), out) : writeFloat(new Float64(v), out);
  if (typeof v === "bigint") return writeInt(v, out);
  if (typeof v === "string") return writeStr(Buffer.from(v, "utf8"), out);
  if (v instanceof Uint8Array) return writeSized(v, [0xc4, 0xc5, 0xc6], out);
  if (v instanceof Float32 || v instanceof Float64) return writeFloat(v, out);
  if (v instanceof Ext) return writeExt(v, out);
  if (Array.isArray(v)) {
    out.push(head(v.length, 0x90, 0xdc, 0xdd));
    return v.forEach((item) => write(item, out));
  }
  const entries = v instanceof MsgMap ? v.entries
    : Object.entries(v).filter((e): e is [string, Value] => e[1] !== undefined);
  out.push(head(entries.length, 0x80, 0xde, 0xdf));
  for (const [key, item] of entries) {
    write(key, out);
    write(item, out);
  }
}

// fix (up to 15), 16-bit or 32-bit count: maps and arrays.
function head(count: number, fix: number, b16: number, b32: number): Buffer {
  if (count < 16) return Buffer.of(fix | count);
  if (count < 0x10000) return Buffer.of(b16, count >> 8, count & 0xff);
  const b = Buffer.alloc(5);
  b[0] = b32;
  b.writeUInt32BE(count, 1);
  return b;
}

function writeInt(v: bigint, out: Buffer[]): void {
  if (v >= 0n && v < 0x80n) return void out.push(Buffer.of(Number(v)));
  if (v < 0n && v >= -32n) return void out.push(Buffer.of(Number(v) & 0xff));
  const formats: [bigint, bigint, number, number][] = [  // min, max, format byte, size
    [0n, 0xffn, 0xcc, 1], [0n, 0xffffn, 0xcd, 2], [0n, 0xffffffffn, 0xce, 4], [0n, 0xffffffffffffffffn, 0xcf, 8],
    [-0x80n, 0x7fn, 0xd0, 1], [-0x8000n, 0x7fffn, 0xd1, 2], [-0x80000000n, 0x7fffffffn, 0xd2, 4],
    [-0x8000000000000000n, 0x7fffffffffffffffn, 0xd3, 8],
  ];
  const format = formats.find(([min, max]) => v >= min && v <= max);
  if (format === undefined) throw new RangeError(`${v} does not fit in 64 bits`);
  const [, , byte, size] = format;
  const b = Buffer.alloc(1 + size);
  b[0] = byte;
  if (size === 8) v < 0n ? b.writeBigInt64BE(v, 1) : b.writeBigUInt64BE(v, 1);
  else if (v < 0n) b.writeIntBE(Number(v), 1, size);
  else b.writeUIntBE(Number(v), 1, size);
  out.push(b);
}

function writeFloat(v: Float32 | Float64, out: Buffer[]): void {
  const b = Buffer.alloc(v instanceof Float32 ? 5 : 9);
  if (v instanceof Float32) {
    b[0] = 0xca;
    b.writeFloatBE(v.value, 1);
  } else {
    b[0] = 0xcb;
    b.writeDoubleBE(v.value, 1);
  }
  out.push(b);
}

function writeStr(bytes: Buffer, out: Buffer[]): void {
  if (bytes.length < 32) return void out.push(Buffer.of(0xa0 | bytes.length), bytes);
  writeSized(bytes, [0xd9, 0xda, 0xdb], out);
}

// str8/16/32 or bin8/16/32: the format byte by length, the length, the bytes.
function writeSized(bytes: Uint8Array, [b8, b16, b32]: number[], out: Buffer[]): void {
  const n = bytes.length;
  const prefix = n < 0x100 ? Buffer.of(b8, n) : n < 0x10000 ? Buffer.of(b16, n >> 8, n & 0xff) : Buffer.alloc(5);
  if (n >= 0x10000) {
    prefix[0] = b32;
    prefix.writeUInt32BE(n, 1);
  }
  out.push(prefix, Buffer.from(bytes));
}

function writeExt(v: Ext, out: Buffer[]): void {
  const fixed = [1, 2, 4, 8, 16].indexOf(v.data.length);
  const type = v.type & 0xff;
  if (fixed >= 0) return void out.push(Buffer.of(0xd4 + fixed, type), Buffer.from(v.data));
  const n = v.data.length;
  const prefix = n < 0x100 ? Buffer.of(0xc7, n) : n < 0x10000 ? Buffer.of(0xc8, n >> 8, n & 0xff) : Buffer.alloc(5);
  if (n >= 0x10000) {
    prefix[0] = 0xc9;
    prefix.writeUInt32BE(n, 1);
  }
  out.push(prefix, Buffer.of(type), Buffer.from(v.data));
}
