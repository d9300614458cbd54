// Connection URLs (spec "Transports"; every rule below is one of vectors/README.md's "urls.json in detail"):
//
//   fire://user:password@host:5673/vhost        ws://user:password@host:15672/fire?vhost=dev

export interface FireUrl {
  scheme: "fire" | "fires" | "ws" | "wss";
  tls: boolean;
  websocket: boolean;
  host: string;
  port: number;
  user: string;
  password: string;
  vhost: string;
  path: string;  // the WebSocket endpoint; "" for fire and fires
}

// "The default ports are 5673 (fire), 5674 (fires), 15672 (ws) and 15671 (wss)."
const DEFAULT_PORTS = { fire: 5673, fires: 5674, ws: 15672, wss: 15671 } as const;

export class UrlError extends Error {}

export function parseUrl(text: string): FireUrl {
  if (text === "") throw new UrlError("empty URL");
  if (text.includes("#")) throw new UrlError("fragments are not allowed");
  if (/[\x00-\x20\x7f]/.test(text)) throw new UrlError("space or control character in the URL");
  const colon = text.indexOf(":");
  const scheme = colon > 0 ? text.slice(0, colon).toLowerCase() : "";
  if (!/^[a-z][a-z0-9+.-]*$/.test(scheme)) throw new UrlError("missing scheme");
  if (!(scheme in DEFAULT_PORTS)) throw new UrlError(`unsupported scheme '${scheme}'`);
  const known = scheme as FireUrl["scheme"];
  const rest = text.slice(colon + 1);
  if (!rest.startsWith("//")) throw new UrlError("'//' and an authority are required");

  // The authority runs up to the path or the query; the userinfo ends at its last '@'.
  const afterSlashes = rest.slice(2);
  const authorityEnd = afterSlashes.search(/[/?]/);
  const authority = authorityEnd < 0 ? afterSlashes : afterSlashes.slice(0, authorityEnd);
  const pathAndQuery = authorityEnd < 0 ? "" : afterSlashes.slice(authorityEnd);
  const at = authority.lastIndexOf("@");
  const credentials = parseUserinfo(at < 0 ? null : authority.slice(0, at));
  const { host, port } = parseHostPort(at < 0 ? authority : authority.slice(at + 1), DEFAULT_PORTS[known]);

  const queryStart = pathAndQuery.indexOf("?");
  const path = queryStart < 0 ? pathAndQuery : pathAndQuery.slice(0, queryStart);
  const query = queryStart < 0 ? "" : pathAndQuery.slice(queryStart + 1);
  const websocket = known === "ws" || known === "wss";
  return {
    scheme: known,
    tls: known === "fires" || known === "wss",
    websocket,
    host,
    port,
    ...credentials,
    // "For fire and fires, the vhost is the URL path with the leading / removed and percent-decoded; an empty
    // path means vhost /. For ws and wss, the path is the WebSocket endpoint (/fire when empty) and the vhost is
    // the vhost query parameter."
    vhost: websocket ? vhostParameter(query) : path === "" || path === "/" ? "/" : percentDecode(path.slice(1)),
    path: websocket ? (path === "" || path === "/" ? "/fire" : path) : "",
  };
}

// "The default user and password are guest and guest": absent means guest, present but empty stays "".
function parseUserinfo(userinfo: string | null): { user: string; password: string } {
  if (userinfo === null) return { user: "guest", password: "guest" };
  const colon = userinfo.indexOf(":");
  if (colon < 0) return { user: percentDecode(userinfo), password: "guest" };
  return { user: percentDecode(userinfo.slice(0, colon)), password: percentDecode(userinfo.slice(colon + 1)) };
}

// host, [IPv6] or host:port; "host:" with no digits takes the default port.
function parseHostPort(hostPort: string, defaultPort: number): { host: string; port: number } {
  let host: string;
  let portText: string;
  if (hostPort.startsWith("[")) {
    const close = hostPort.indexOf("]");
    if (close < 0) throw new UrlError("unterminated IPv6 literal");
    host = hostPort.slice(1, close);
    const after = hostPort.slice(close + 1);
    if (after !== "" && !after.startsWith(":")) throw new UrlError(`unexpected '${after[0]}' after the IPv6 literal`);
    portText = after.slice(1);
  } else {
    const colon = hostPort.lastIndexOf(":");
    host = colon < 0 ? hostPort : hostPort.slice(0, colon);
    portText = colon < 0 ? "" : hostPort.slice(colon + 1);
  }
  if (host === "") throw new UrlError("host is required");
  if (portText === "") return { host, port: defaultPort };
  if (!/^[0-9]+$/.test(portText)) throw new UrlError(`port '${portText}' is not decimal digits`);
  const port = Number(portText);
  if (port < 1 || port > 65535) throw new UrlError(`port ${portText} is outside 1..65535`);
  return { host, port };
}

// The first vhost query parameter, percent-decoded; "/" when absent or empty. '+' is not a space.
function vhostParameter(query: string): string {
  for (const pair of query.split("&")) {
    const [name, value = ""] = pair.split("=", 2);
    if (name === "vhost") return value === "" ? "/" : percentDecode(value);
  }
  return "/";
}

// '%' must be followed by two hex digits, and the bytes must be UTF-8.
function percentDecode(text: string): string {
  if (/%(?![0-9a-fA-F]{2})/.test(text)) throw new UrlError(`'%' not followed by two hex digits in '${text}'`);
  // Escapes become their byte, everything else its UTF-8 bytes ("non-ASCII passes through as UTF-8").
  const pieces = text.split(/(%[0-9a-fA-F]{2})/).filter((piece) => piece !== "");
  const bytes = Buffer.concat(pieces.map((p) => (p.startsWith("%") ? Buffer.from([parseInt(p.slice(1), 16)]) : Buffer.from(p, "utf8"))));
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new UrlError(`'${text}' does not decode to UTF-8`);
  }
}
