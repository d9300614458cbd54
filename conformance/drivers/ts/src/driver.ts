// The TypeScript example driver for client certification (docs/client-certification.md): it reads the
// harness's commands as JSON lines on stdin, performs each through a client library (here the small FireClient
// of client.ts; in your SDK, your public API), and writes replies and events as JSON lines on stdout. Copy it,
// replace FireClient with your SDK, keep the JSON.
//
//   node dist/driver.js
import * as readline from "node:readline";

import { ClientEvent, Delivery, FireClient, ServerError } from "./client.js";
import {
  DEFAULT_MAX_FRAME, Frame, FrameError, FrameReader, Header, checkHeader, decodeMessageFrame, encodeFrame,
} from "./codec.js";
import { Ext, Float32, Float64, MsgMap } from "./msgpack.js";
import { fromTypedJson, toTypedJson } from "./typed_json.js";
import { parseUrl } from "./url.js";

const PROTOCOL_VERSION = 2;  // the driver protocol this driver speaks (2: publish_batch)
// How long one command may take: the harness has its own deadline per case; this only stops a driver
// waiting forever.
const COMMAND_MS = 20_000;
// When stdin ends the driver closes its connection and exits; the harness allows 3 s for all of it.
const CLOSE_AT_END_MS = 2_000;

type Command = Record<string, unknown> & { id?: number; cmd?: string };
type Reply = Record<string, unknown>;

function writeLine(line: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(line) + "\n");
}

let client: FireClient | null = null;

// Events: what the SDK reports to the application, in the driver protocol's words.
function reportEvent(e: ClientEvent): void {
  switch (e.event) {
    case "delivered":
      return writeLine({ event: "delivered", subscription: e.subscription, ...deliveryJson(e.delivery) });
    case "returned":
      return writeLine({ event: "returned", code: e.code, msg: e.msg, exchange: e.message.exchange,
                         key: e.message.key, body: e.message.body.toString("utf8") });
    default:
      return writeLine(e);  // closed, error, flow and cancelled have the driver protocol's fields already
  }
}

function deliveryJson(d: Delivery): Reply {
  return { delivery_tag: d.deliveryTag, redelivered: d.redelivered, exchange: d.exchange, key: d.key,
           props: toTypedJson(d.props), headers: toTypedJson(d.headers), body: d.body.toString("utf8") };
}

// A typed-JSON map of the command (props, headers, args) as MessagePack values; a map with non-str keys is
// a MsgMap, which the encoder takes where a Header goes.
// The message of a publish command (or of one of publish_batch's messages).
function publishingOf(c: Command) {
  return {
    exchange: String(c.exchange ?? ""), key: String(c.key ?? ""), body: Buffer.from(String(c.body ?? ""), "utf8"),
    props: mapArg(c, "props"), headers: mapArg(c, "headers"), mandatory: c.mandatory === true,
    persistent: c.persistent === true,
  };
}

function mapArg(c: Command, key: string): Header {
  const value = c[key] === undefined ? {} : fromTypedJson(c[key]);
  const isObject = typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
  if (!isObject || value instanceof Float32 || value instanceof Float64 || value instanceof Ext) {
    throw new Error(`${key} must be a typed-JSON map`);
  }
  return value as Header;
}

// decode_frame: the bytes through the codec, as the client reads a server's frames: cut into frames (stream)
// or taken as one WebSocket message (message), each header held to its op. A refusal is the FrameError's code.
function decodeFrames(c: Command): Reply {
  const bytes = Buffer.from(String(c.bytes ?? ""), "hex");
  const maxFrame = Number(c.max_frame ?? DEFAULT_MAX_FRAME);
  let frames: Frame[];
  if (c.framing === "message") {
    frames = [decodeMessageFrame(bytes, maxFrame)];
  } else {
    const reader = new FrameReader(maxFrame);
    frames = reader.feed(bytes);
    if (c.end_of_stream === true) reader.finish();
  }
  for (const frame of frames) checkHeader(frame.op, frame.header);
  return { frames: frames.map((f) => ({ op: f.op, header: toTypedJson(f.header), payload: f.payload.toString("hex") })) };
}

// encode_frame: a header given in typed JSON, held to its op as the decoder would hold it, then encoded.
function encodeFrameCommand(c: Command): Reply {
  const op = Number(c.op);
  const header = mapArg(c, "header");
  if (header instanceof MsgMap) throw new FrameError(502, "a header's keys must all be str");
  checkHeader(op, header);
  const frame = encodeFrame(op, header, Buffer.from(String(c.payload ?? ""), "hex"));
  return { bytes: (c.framing === "message" ? frame.subarray(4) : frame).toString("hex") };
}

function connected(): FireClient {
  if (!client?.connected) throw new Error("not connected");
  return client;
}

async function perform(c: Command): Promise<Reply> {
  switch (c.cmd) {
    case "parse_url":
      return { url: parseUrl(String(c.url)) };
    case "decode_frame":
      return decodeFrames(c);
    case "encode_frame":
      return encodeFrameCommand(c);
    case "connect": {
      client?.destroy();
      client = new FireClient(reportEvent);
      const welcome = await client.connect(parseUrl(String(c.url)), Number(c.heartbeat ?? 0),
                                           c.ca_file === undefined ? undefined : String(c.ca_file));
      return { server: welcome.server, heartbeat: welcome.heartbeat, max_frame: welcome.maxFrame, caps: welcome.caps };
    }
    case "declare_queue":
      return connected().declareQueue(String(c.name ?? ""), {
        durable: c.durable === true, exclusive: c.exclusive === true, autoDelete: c.auto_delete === true,
        passive: c.passive === true, args: mapArg(c, "args"),
      });
    case "bind":
      return connected().bind(String(c.exchange ?? ""), String(c.queue), String(c.key ?? ""), mapArg(c, "args")).then(() => ({}));
    case "publish": {
      const confirm = c.confirm === true;
      const confirmed = await connected().publish(publishingOf(c), confirm);
      return confirm ? { confirmed } : {};
    }
    case "publish_batch": {
      // Driver protocol 2: every message published with a confirm before any outcome is awaited, so that
      // several are in flight and one upto, or a nack among them, settles them. The outcomes in order.
      const messages = Array.isArray(c.messages) ? (c.messages as Record<string, unknown>[]) : [];
      const outcomes = messages.map((m) => connected().publish(publishingOf(m), true));
      return { confirmed: await Promise.all(outcomes) };
    }
    case "subscribe":
      return { subscription: await connected().subscribe(String(c.queue), Number(c.credit ?? 100), c.no_ack === true) };
    case "ack":
      connected().ack(Number(c.delivery_tag), c.multiple === true);
      return {};
    case "nack":
      connected().nack(Number(c.delivery_tag), c.multiple === true, c.requeue !== false);
      return {};
    case "get": {
      const got = await connected().get(String(c.queue), c.no_ack === true);
      return got ? { empty: false, remaining: got.remaining, ...deliveryJson(got) } : { empty: true };
    }
    case "close":
      await connected().close();
      return {};
    default:
      throw new Error(`unknown command ${String(c.cmd)}`);
  }
}

function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("timed out")), ms)));
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

// One command line to its reply line: {"id", "ok": true, ...results} or {"id", "ok": false, "error"}.
async function replyTo(line: string): Promise<Reply> {
  let command: Command;
  try {
    command = JSON.parse(line);
  } catch {
    return { id: 0, ok: false, error: { msg: `not JSON: ${line}` } };
  }
  try {
    return { id: command.id, ok: true, ...(await withDeadline(perform(command), COMMAND_MS)) };
  } catch (e) {
    const error = e instanceof ServerError ? { code: e.code, msg: e.message }
      : e instanceof FrameError ? { code: e.code, msg: e.message, fatal: e.fatal } : { msg: (e as Error).message };
    return { id: command.id, ok: false, error };
  }
}

// One command at a time, in order; events are written whenever they happen, between and during commands.
function main(): void {
  // "transports": what the harness runs the client cases over (fire alone when a driver names none).
  writeLine({ event: "ready", protocol: PROTOCOL_VERSION, client: { name: "firemq-example-ts", version: "0.1.0" },
              transports: ["fire", "fires", "ws", "wss"] });
  let queue = Promise.resolve();
  const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  input.on("line", (line) => (queue = queue.then(async () => writeLine(await replyTo(line)))));
  // stdin closed: the case is over. Close the connection if there still is one, then exit with 0.
  input.on("close", () => queue.then(async () => {
    if (client?.connected) {
      await withDeadline(client.close(), CLOSE_AT_END_MS).catch((e) => process.stderr.write(`close at the end: ${e.message}\n`));
    }
    process.exit(0);
  }));
}

main();
