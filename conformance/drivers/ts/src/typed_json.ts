// Typed JSON (vectors/README.md): how the driver protocol writes MessagePack values that plain JSON cannot
// tell apart ({"$bin": "00ff"}, {"$int": "18446744073709551615"}, {"$float64": 2.0}, {"$float32": 0.5}, ...),
// to and from the values of msgpack.ts, which keep those types too.
import { Ext, Float32, Float64, MsgMap, Value } from "./msgpack.js";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");

// A decoded MessagePack value as typed JSON.
export function toTypedJson(value: Value | undefined): Json {
  if (value === null || value === undefined) return null;
  if (typeof value === "boolean" || typeof value === "string") return value;
  if (typeof value === "number") return value;  // an int: msgpack.ts keeps floats as Float32 and Float64
  if (typeof value === "bigint") return Number.isSafeInteger(Number(value)) ? Number(value) : { $int: value.toString() };
  if (value instanceof Float32) return { $float32: floatJson(value.value) };
  if (value instanceof Float64) return { $float64: floatJson(value.value) };
  if (value instanceof Uint8Array) return { $bin: hex(value) };
  if (value instanceof Ext) return { $ext: [value.type, hex(value.data)] };
  if (value instanceof MsgMap) return { $map: value.entries.map(([k, v]) => [toTypedJson(k), toTypedJson(v)]) };
  if (Array.isArray(value)) return value.map(toTypedJson);
  const entries = Object.entries(value).filter(([, v]) => v !== undefined);
  // "map whose keys are all str and none starts with `$`": a JSON object; any other map is {"$map": [...]}.
  if (entries.some(([key]) => key.startsWith("$"))) return { $map: entries.map(([k, v]) => [k, toTypedJson(v)]) };
  return Object.fromEntries(entries.map(([k, v]) => [k, toTypedJson(v)]));
}

function floatJson(value: number): number | string {
  if (Number.isNaN(value)) return "NaN";
  if (!Number.isFinite(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

// Typed JSON as a value for the MessagePack encoder. Throws on what is not typed JSON.
export function fromTypedJson(json: unknown): Value {
  if (json === null || typeof json === "boolean" || typeof json === "string") return json;
  if (typeof json === "number") return json;  // "A bare JSON number with a fraction or exponent never appears"
  if (Array.isArray(json)) return json.map(fromTypedJson);
  if (typeof json !== "object") throw new Error(`not typed JSON: ${String(json)}`);
  const entries = Object.entries(json as Record<string, unknown>);
  if (entries.length === 1 && entries[0][0].startsWith("$")) return fromTag(entries[0][0], entries[0][1]);
  return Object.fromEntries(entries.map(([k, v]) => [k, fromTypedJson(v)]));
}

function fromTag(tag: string, arg: unknown): Value {
  switch (tag) {
    case "$int":
      return BigInt(String(arg));
    case "$float32":
      return new Float32(floatArg(arg));
    case "$float64":
      return new Float64(floatArg(arg));
    case "$bin":
      return Buffer.from(String(arg), "hex");
    case "$ext": {
      const [type, data] = arg as [number, string];
      return new Ext(type, Buffer.from(data, "hex"));
    }
    case "$map": {
      const pairs = (arg as [unknown, unknown][]).map(([k, v]): [Value, Value] => [fromTypedJson(k), fromTypedJson(v)]);
      // str keys only: the plain object it would have been without a "$" key; any other key: a MsgMap
      return pairs.every(([k]) => typeof k === "string") ? Object.fromEntries(pairs) : new MsgMap(pairs);
    }
    default:
      throw new Error(`${tag} is not a typed-JSON tag`);
  }
}

// "NaN", "Infinity", "-Infinity" are written as strings.
function floatArg(arg: unknown): number {
  return typeof arg === "string" ? Number(arg) : Number(arg as number);
}
