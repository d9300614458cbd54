// A small FireMQ client for Node over fire://, fires://, ws:// and wss://, written for the example driver
// (driver.ts): enough of the protocol to pass every client case, short enough to read in one sitting. The rules
// a client owes the server are quoted from the spec beside the code that keeps them.
//
// Everything is event-driven: socket data is cut into frames as it comes, pings are answered at once, replies
// settle the promise of their request, and what is not a reply (deliveries, returns, a server's close, ...)
// goes to the onEvent callback.
import * as fs from "node:fs";
import * as net from "node:net";
import * as tls from "node:tls";

import { WebSocket } from "ws";

import {
  DEFAULT_MAX_FRAME, Frame, FrameError, FrameReader, Header, MAX_FRAME_BEFORE_WELCOME, Op,
  boolField, encodeFrame, mapField, strField, strListField, uintField,
} from "./codec.js";
import { FireUrl } from "./url.js";

export interface Welcome {
  server: { name: string; version: string };
  heartbeat: number;
  maxFrame: number;
  caps: string[];
}

export interface Message {
  exchange: string;
  key: string;
  body: Buffer;
  props: Header;    // spec "Message properties": content_type, message_id, ...
  headers: Header;  // application headers, any MessagePack values
}

export interface Delivery extends Message {
  deliveryTag: number;
  redelivered: boolean;
}

// What the server sends that is not the reply to a request.
export type ClientEvent =
  | { event: "delivered"; subscription: number; delivery: Delivery }
  | { event: "returned"; code: number; msg: string; message: Message }
  | { event: "closed"; by: "server" | "socket" | "heartbeat"; code: number; msg: string }
  | { event: "error"; code: number; msg: string; fatal: boolean }
  | { event: "flow"; pause: boolean }
  | { event: "cancelled"; subscription: number; code: number; msg: string };

// An error reply of the server: the request failed with this code (spec "Replies / error").
export class ServerError extends Error {
  constructor(readonly code: number, msg: string) {
    super(msg);
  }
}

// A promise with its resolve and reject at hand, for a reply that a later frame brings.
interface Pending<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (error: Error) => void;
}

function pending<T>(): Pending<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  promise.catch(() => {});  // a rejection nobody awaits (a reply after the driver gave up) is not a crash
  return { promise, resolve, reject };
}

interface Subscription {
  credit: number;     // the credit granted at subscribe: the client's buffer size
  processed: number;  // deliveries handed to the application since credit was last topped up
}

export class FireClient {
  private link: Link | null = null;
  private ended = false;  // this side ended the connection (its close was answered, or it answered the server's)
  private reader = new FrameReader(MAX_FRAME_BEFORE_WELCOME);
  private maxFrame = MAX_FRAME_BEFORE_WELCOME;  // the largest frame the server accepts
  private handshake: Pending<Frame> | null = null;  // hello's reply: welcome or error
  private replies = new Map<number, Pending<Frame>>();  // rid to the request's reply
  private confirms = new Map<number, Pending<boolean>>();  // seq to confirmed (true) or nacked (false)
  private closeReply: Pending<void> | null = null;
  private nextRid = 1;
  private nextSeq = 1;
  private nextSub = 1;
  private subscriptions = new Map<number, Subscription>();
  private flowResumed: Pending<void> | null = null;  // set while the server has paused publishing
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private lastSent = 0;
  private lastReceived = 0;
  private endReason = "the connection ended without close";
  private serverDead = false;  // the heartbeat ended the connection: nothing from the server for 2 × h

  constructor(private readonly onEvent: (event: ClientEvent) => void) {}

  get connected(): boolean {
    return this.link !== null && !this.ended;
  }

  // The transport (openLink, below), hello, then welcome. `caFile`: the CAs a TLS server's certificate must
  // chain to (PEM; none: Node's own list).
  async connect(url: FireUrl, heartbeat = 0, caFile?: string): Promise<Welcome> {
    this.link = await openLink(url, caFile, { bytes: (bytes) => this.receive(bytes), closed: () => this.socketClosed() });
    this.handshake = pending<Frame>();
    this.sendFrame(Op.hello, {
      ver: 1,  // "Protocol major version. Must be `1`."
      vhost: url.vhost,
      auth: { mech: "plain", user: url.user, pass: url.password },
      heartbeat,
      client: { name: "firemq-example-ts", version: "0.1.0", lang: "typescript" },
      caps: ["confirms", "credit", "mandatory"],
    });
    const reply = await this.handshake.promise;
    this.handshake = null;
    if (reply.op === Op.error) throw serverError(reply.header);  // 403 with fatal: the server closes the socket
    if (reply.op !== Op.welcome) throw new Error(`the server answered hello with op 0x${reply.op.toString(16)}`);
    const h = reply.header;
    const server = mapField(h, "server");
    const welcome = {
      server: { name: strField(server, "name"), version: strField(server, "version") },
      heartbeat: uintField(h, "heartbeat"),
      maxFrame: uintField(h, "max_frame") || DEFAULT_MAX_FRAME,
      caps: strListField(h, "caps"),
    };
    // "After welcome, the limit is welcome.max_frame": ours to respect when sending. What we accept from the
    // server is our own choice; the default limit is generous enough.
    this.maxFrame = welcome.maxFrame;
    this.reader.setMaxFrame(DEFAULT_MAX_FRAME);
    this.startHeartbeats(welcome.heartbeat);
    return welcome;
  }

  async declareQueue(name: string, options: { durable?: boolean; exclusive?: boolean; autoDelete?: boolean;
                                              passive?: boolean; args?: Header } = {}) {
    const ok = await this.request(Op.declare_queue, {
      name, durable: options.durable, exclusive: options.exclusive, auto_delete: options.autoDelete,
      passive: options.passive, args: options.args,
    });
    return { name: strField(ok.header, "name"), messages: uintField(ok.header, "messages"),
             consumers: uintField(ok.header, "consumers") };
  }

  async bind(exchange: string, queue: string, key: string, args: Header = {}): Promise<void> {
    await this.request(Op.bind, { exchange, queue, key, args });
  }

  // With confirm, resolves once the server confirmed (true) or nacked (false) the message.
  async publish(message: Omit<Message, "body"> & { body: Uint8Array; mandatory?: boolean; persistent?: boolean },
                confirm: boolean): Promise<boolean | undefined> {
    // flow: "Clients stop publishing until pause: false." A loop, not an if: the publish goes on a microtask
    // after the resume, once the rest of that read is handled, and a pause in the same read holds it again.
    while (this.flowResumed) await this.flowResumed.promise;
    // "Client-assigned sequence number, starting at 1 and increasing by 1. `0` means no confirm is wanted."
    const seq = confirm ? this.nextSeq : 0;
    const frame = encodeFrame(Op.publish, {
      seq, exchange: message.exchange, key: message.key, mandatory: message.mandatory,
      persistent: message.persistent, props: message.props, headers: message.headers,
    }, message.body);
    // "A message body must fit in one frame.": refused here, before it takes a sequence number.
    this.checkSize(frame);
    if (!confirm) return void this.write(frame);
    this.nextSeq++;
    const outcome = pending<boolean>();
    this.confirms.set(seq, outcome);
    this.write(frame);
    return outcome.promise;
  }

  // Returns the subscription id: "Client-chosen subscription id, unique on the connection."
  async subscribe(queue: string, credit: number, noAck = false): Promise<number> {
    const sub = this.nextSub++;
    // Known before the request goes out: deliveries may come in the same read as the ok.
    this.subscriptions.set(sub, { credit, processed: 0 });
    try {
      await this.request(Op.subscribe, { sub, queue, credit, no_ack: noAck });
    } catch (e) {
      this.subscriptions.delete(sub);
      throw e;
    }
    return sub;
  }

  ack(deliveryTag: number, multiple = false): void {
    this.sendFrame(Op.ack, { tag: deliveryTag, multiple });
  }

  nack(deliveryTag: number, multiple = false, requeue = true): void {
    this.sendFrame(Op.nack, { tag: deliveryTag, multiple, requeue });
  }

  // A message, or null when the queue is empty ("the reply is ok with empty: true").
  async get(queue: string, noAck = false): Promise<(Delivery & { remaining: number }) | null> {
    const reply = await this.request(Op.get, { queue, no_ack: noAck });
    if (reply.op === Op.ok) return null;
    return { ...this.delivery(reply), remaining: uintField(reply.header, "remaining") };
  }

  // close 200, then the server's close in reply; then the socket is ours to close.
  async close(): Promise<void> {
    if (!this.connected) return;
    this.closeReply = pending<void>();
    this.sendFrame(Op.close, { code: 200, msg: "bye" });
    await this.closeReply.promise;
    this.end();
  }

  // Ends the connection now, without close (for a driver that must exit).
  destroy(): void {
    this.end();
  }

  // Design rules: "Requests carry a request id (rid) and get exactly one reply: ok, error, or an op-specific
  // reply." Each request gets a new rid, so no two awaited replies share one.
  private async request(op: number, header: Header): Promise<Frame> {
    const rid = this.nextRid++;
    const reply = pending<Frame>();
    this.replies.set(rid, reply);
    try {
      this.sendFrame(op, { ...header, rid });
    } catch (e) {
      this.replies.delete(rid);
      throw e;
    }
    const frame = await reply.promise;
    if (frame.op === Op.error) throw serverError(frame.header);
    return frame;
  }

  private sendFrame(op: number, header: Header, payload?: Uint8Array): void {
    const frame = encodeFrame(op, header, payload);
    this.checkSize(frame);
    this.write(frame);
  }

  // "Before welcome, a frame may be at most 65 536 bytes. After welcome, the limit is welcome.max_frame."
  private checkSize(frame: Buffer): void {
    if (frame.length > this.maxFrame) {
      throw new Error(`the frame does not fit: ${frame.length} bytes, the server's max_frame is ${this.maxFrame}`);
    }
  }

  private write(bytes: Buffer): void {
    if (!this.connected) throw new Error("not connected");
    this.link!.send(bytes);
    this.lastSent = Date.now();
  }

  private receive(bytes: Buffer): void {
    if (this.ended) return;  // after the close exchange, nothing more is read
    this.lastReceived = Date.now();
    try {
      for (const frame of this.reader.feed(bytes)) {
        if (this.ended) break;  // a close in this chunk ended the connection: the frames after it are not read
        this.handle(frame);
      }
    } catch (e) {
      if (!(e instanceof FrameError)) throw e;
      // The server broke the framing: the connection cannot go on. Say why in our close, then end it.
      this.endReason = `the server sent a bad frame: ${e.message}`;
      this.write(encodeFrame(Op.close, { code: e.code, msg: e.message }));
      this.link!.end();
    }
  }

  // One frame from the server. Header fields are read by name: "Implementations ignore header keys they do
  // not know."
  private handle(frame: Frame): void {
    const h = frame.header;
    switch (frame.op) {
      case Op.ping:
        return this.sendFrame(Op.pong, {});  // "A peer that receives ping replies pong."
      case Op.pong:
        return;  // it counted as received; nothing else to do
      case Op.welcome:
        return this.handshake?.resolve(frame);
      case Op.ok:
      case Op.get_ok:
        return this.settleReply(frame);
      case Op.error:
        return this.handleError(frame);
      case Op.close:
        return this.handleClose(h);
      case Op.confirm:
        return this.handleConfirm(h);
      case Op.return:
        return this.onEvent({ event: "returned", code: uintField(h, "code"), msg: strField(h, "msg"), message: this.message(frame) });
      case Op.deliver:
        return this.handleDeliver(frame);
      case Op.flow:
        return this.handleFlow(boolField(h, "pause"));
      case Op.cancelled:
        this.subscriptions.delete(uintField(h, "sub"));
        return this.onEvent({ event: "cancelled", subscription: uintField(h, "sub"), code: uintField(h, "code"), msg: strField(h, "msg") });
      default:
        process.stderr.write(`ignored op 0x${frame.op.toString(16)} from the server\n`);
    }
  }

  private settleReply(frame: Frame): void {
    const rid = uintField(frame.header, "rid");
    const reply = this.replies.get(rid);
    if (!reply) return void process.stderr.write(`a reply for rid ${rid}, which no request awaits\n`);
    this.replies.delete(rid);
    reply.resolve(frame);
  }

  // error: "`rid` The failed request, or absent for errors not tied to a request." hello has no rid: an error
  // during the handshake is its reply.
  private handleError(frame: Frame): void {
    const h = frame.header;
    if (this.replies.has(uintField(h, "rid"))) return this.settleReply(frame);
    if (this.handshake) return this.handshake.resolve(frame);
    this.onEvent({ event: "error", code: uintField(h, "code"), msg: strField(h, "msg"), fatal: boolField(h, "fatal") });
    // "`fatal` true when the server closes the connection after this frame": the connection is over now, not
    // when the socket ends, and nothing more is sent on it.
    if (boolField(h, "fatal")) this.endAfterFatal(h);
  }

  private endAfterFatal(h: Header): void {
    this.onEvent({ event: "closed", by: "server", code: uintField(h, "code"), msg: strField(h, "msg") });
    this.end();
  }

  // close: "The receiver replies with its own close and closes the socket."
  private handleClose(h: Header): void {
    if (this.closeReply) return this.closeReply.resolve();  // the answer to our close
    this.onEvent({ event: "closed", by: "server", code: uintField(h, "code"), msg: strField(h, "msg") });
    this.sendFrame(Op.close, { code: 200, msg: "closing as asked" });
    this.end();
  }

  // confirm: {"upto": n} confirms every outstanding publish with seq <= n; {"seq": n, "nack": true} rejects one.
  // "A nack for a sequence number is always sent before any upto that covers it."
  private handleConfirm(h: Header): void {
    if (boolField(h, "nack")) {
      const seq = uintField(h, "seq");
      this.confirms.get(seq)?.resolve(false);
      this.confirms.delete(seq);
      return;
    }
    const upto = uintField(h, "upto");
    for (const [seq, outcome] of this.confirms) {
      if (seq > upto) continue;
      outcome.resolve(true);
      this.confirms.delete(seq);
    }
  }

  // credit: "Clients usually grant their buffer size at subscribe, then top up by half that size each time
  // they have processed half of it." The delivery is processed once onEvent has returned.
  private handleDeliver(frame: Frame): void {
    const sub = uintField(frame.header, "sub");
    this.onEvent({ event: "delivered", subscription: sub, delivery: this.delivery(frame) });
    const subscription = this.subscriptions.get(sub);
    if (!subscription || !this.connected) return;
    const half = Math.max(1, Math.floor(subscription.credit / 2));
    if (++subscription.processed < half) return;
    subscription.processed = 0;
    this.sendFrame(Op.credit, { sub, credit: half });
  }

  // flow: "Clients stop publishing until pause: false."
  private handleFlow(pause: boolean): void {
    if (pause && !this.flowResumed) this.flowResumed = pending<void>();
    if (!pause && this.flowResumed) {
      this.flowResumed.resolve();
      this.flowResumed = null;
    }
    this.onEvent({ event: "flow", pause });
  }

  private message(frame: Frame): Message {
    const h = frame.header;
    return { exchange: strField(h, "exchange"), key: strField(h, "key"), body: frame.payload,
             props: mapField(h, "props"), headers: mapField(h, "headers") };
  }

  private delivery(frame: Frame): Delivery {
    return { ...this.message(frame), deliveryTag: uintField(frame.header, "tag"), redelivered: boolField(frame.header, "redelivered") };
  }

  // Heartbeats: "each side sends ping when it has sent nothing for h / 2 seconds. Each side considers the
  // peer dead when it has received nothing for 2 × h seconds."
  private startHeartbeats(h: number): void {
    if (h === 0) return;
    this.lastReceived = Date.now();
    this.heartbeatTimer = setInterval(() => {
      if (!this.connected) return;
      const now = Date.now();
      if (now - this.lastReceived >= 2 * h * 1000) {
        this.endReason = `nothing from the server for ${now - this.lastReceived} ms: it is dead`;
        this.serverDead = true;
        this.link?.destroy();  // without close: a dead server would not read it. Reported as closed by heartbeat
      } else if (this.closeReply === null && now - this.lastSent >= (h * 1000) / 2) {
        // No pings once our close is sent: close is the last frame a peer sends.
        this.sendFrame(Op.ping, {});
      }
    }, (h * 1000) / 8);
    this.heartbeatTimer.unref();
  }

  // Ends our side; the socket is gone for good a moment later even if the server does not end its side.
  private end(): void {
    this.ended = true;
    const link = this.link;
    link?.end();
    setTimeout(() => link?.destroy(), 1000).unref();
  }

  // The socket is gone: every awaited reply fails, and an end the client did not ask for is an event.
  private socketClosed(): void {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    const wasEnded = this.ended;
    this.ended = true;
    const gone = new Error("the connection is closed");
    for (const p of [this.handshake, this.closeReply, this.flowResumed, ...this.replies.values(), ...this.confirms.values()]) p?.reject(gone);
    this.replies.clear();
    this.confirms.clear();
    if (!wasEnded) this.onEvent({ event: "closed", by: this.serverDead ? "heartbeat" : "socket", code: 0, msg: this.endReason });
  }
}

function serverError(h: Header): ServerError {
  return new ServerError(uintField(h, "code"), strField(h, "msg"));
}

// How frames travel (spec "Transports"). TCP and TLS: "Client first sends the 4 ASCII bytes `FMQ1`, then
// length-prefixed frames." WebSocket: "One binary WebSocket message per frame, without the length prefix and
// without `FMQ1`." The client above sees one shape whatever the transport: it sends frames in their TCP form
// (len first) and is given bytes in the TCP framing; over WebSocket the link takes the len off each frame it
// sends and puts it back on each message it receives.
interface Link {
  send(frame: Buffer): void;
  end(): void;      // ends our side: TLS close_notify and FIN, or a WebSocket close
  destroy(): void;  // at once
}

interface LinkEvents {
  bytes: (bytes: Buffer) => void;  // in the TCP framing
  closed: () => void;              // once, when the connection is gone
}

function openLink(url: FireUrl, caFile: string | undefined, events: LinkEvents): Promise<Link> {
  const ca = caFile === undefined ? undefined : fs.readFileSync(caFile);  // trusted instead of Node's CA list
  return url.websocket ? openWebSocket(url, ca, events) : openStream(url, ca, events);
}

// fire and fires. Node checks a TLS server's certificate against `ca` and the host name or IP address.
function openStream(url: FireUrl, ca: Buffer | undefined, events: LinkEvents): Promise<Link> {
  return new Promise((resolve, reject) => {
    const socket = url.tls ? tls.connect({ host: url.host, port: url.port, ca }) : net.connect({ host: url.host, port: url.port });
    const fail = (e: Error) => reject(new Error(`cannot connect to ${url.host}:${url.port}: ${e.message}`));
    socket.once("error", fail);
    socket.once(url.tls ? "secureConnect" : "connect", () => {
      socket.off("error", fail);
      socket.setNoDelay(true);
      socket.on("data", events.bytes);
      socket.on("close", events.closed);
      socket.on("error", (e) => process.stderr.write(`socket: ${e.message}\n`));  // "close" follows
      socket.write("FMQ1");
      resolve({ send: (frame) => void socket.write(frame), end: () => void socket.end(), destroy: () => socket.destroy() });
    });
  });
}

// ws and wss, with the `ws` package: the upgrade on the URL's path, the vhost in the query as the URL rule
// says (and in hello too), one binary message a frame.
function openWebSocket(url: FireUrl, ca: Buffer | undefined, events: LinkEvents): Promise<Link> {
  return new Promise((resolve, reject) => {
    const host = url.host.includes(":") ? `[${url.host}]` : url.host;
    const target = `${url.scheme}://${host}:${url.port}${url.path || "/fire"}?vhost=${encodeURIComponent(url.vhost)}`;
    const ws = new WebSocket(target, { ca, perMessageDeflate: false });
    const fail = (e: Error) => reject(new Error(`cannot open ${target}: ${e.message}`));
    ws.once("error", fail);
    ws.once("open", () => {
      ws.off("error", fail);
      ws.on("error", (e) => process.stderr.write(`websocket: ${e.message}\n`));  // "close" follows
      ws.on("close", events.closed);
      ws.on("message", (data: Buffer, isBinary: boolean) => {
        if (!isBinary) return void process.stderr.write("a text message from the server, ignored\n");
        const len = Buffer.alloc(4);
        len.writeUInt32BE(data.length);
        events.bytes(Buffer.concat([len, data]));
      });
      resolve({
        send: (frame) => ws.send(frame.subarray(4), { binary: true }),  // "without the length prefix"
        end: () => ws.close(1000),
        destroy: () => ws.terminate(),
      });
    });
  });
}
