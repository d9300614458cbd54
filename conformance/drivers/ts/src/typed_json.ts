// Typed JSON (vectors/README.md): how the driver protocol writes MessagePack values that plain JSON cannot
// tell apart ({"$bin": "00ff"}, {"$int": "18446744073709551615"}, {"$float64": 2.5}, ...).
//
// A limit of @msgpack/msgpack, worth knowing before copying this into an SDK: it decodes every int and float
// to a JS number (bigint for the 64-bit int formats), so a float that holds a whole number (2.0) comes out as
// the int 2, and it cannot encode such a float or a float32 at all; it also turns a map's int keys into
// strings. This driver reports what it was given and refuses to send what it cannot send as asked.
import { ExtData } from "@msgpack/msgpack";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");

// A decoded MessagePack value as typed JSON.
export function toTypedJson(value: unknown): Json {
  if (value === null || value === undefined) return null;
  if (typeof value === "boolean" || typeof value === "string") return value;
  if (typeof value === "number") return Number.isInteger(value) ? value : { $float64: floatJson(value) };
  if (typeof value === "bigint") return Number.isSafeInteger(Number(value)) ? Number(value) : { $int: value.toString() };
  if (value instanceof Uint8Array) return { $bin: hex(value) };
  if (value instanceof ExtData) return { $ext: [value.type, hex(value.data as Uint8Array)] };
  if (Array.isArray(value)) return value.map(toTypedJson);
  const entries = Object.entries(value as Record<string, unknown>);
  // "map whose keys are all str and none starts with `$`": a JSON object; any other map is {"$map": [...]}.
  if (entries.some(([key]) => key.startsWith("$"))) return { $map: entries.map(([k, v]) => [k, toTypedJson(v)]) };
  return Object.fromEntries(entries.map(([k, v]) => [k, toTypedJson(v)]));
}

function floatJson(value: number): number | string {
  if (Number.isNaN(value)) return "NaN";
  if (!Number.isFinite(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

// Typed JSON as a value for the MessagePack encoder. Throws on what is not typed JSON or cannot be sent.
export function fromTypedJson(json: unknown): unknown {
  if (json === null || typeof json === "boolean" || typeof json === "string") return json;
  if (typeof json === "number") return json;
  if (Array.isArray(json)) return json.map(fromTypedJson);
  if (typeof json !== "object") throw new Error(`not typed JSON: ${String(json)}`);
  const entries = Object.entries(json as Record<string, unknown>);
  if (entries.length === 1 && entries[0][0].startsWith("$")) return fromTag(entries[0][0], entries[0][1]);
  return Object.fromEntries(entries.map(([k, v]) => [k, fromTypedJson(v)]));
}

function fromTag(tag: string, arg: unknown): unknown {
  switch (tag) {
    case "$int":
      return BigInt(String(arg));
    case "$float64": {
      const value = typeof arg === "string" ? Number(arg) : (arg as number);  // "NaN", "Infinity", "-Infinity"
      if (Number.isInteger(value)) throw new Error(`@msgpack/msgpack would send the float ${value} as an int`);
      return value;
    }
    case "$bin":
      return Buffer.from(String(arg), "hex");
    case "$ext": {
      const [type, data] = arg as [number, string];
      return new ExtData(type, Buffer.from(data, "hex"));
    }
    case "$map": {
      const pairs = arg as [unknown, unknown][];
      if (pairs.some(([k]) => typeof k !== "string")) throw new Error("@msgpack/msgpack encodes maps with string keys only");
      return Object.fromEntries(pairs.map(([k, v]) => [k, fromTypedJson(v)]));
    }
    default:
      throw new Error(`${tag} cannot be sent by this driver`);  // $float32: @msgpack/msgpack writes float64
  }
}
