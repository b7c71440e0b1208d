// HTTP mode's plumbing for a port proxy: a parsed request's head as filters match it
// (RequestHead) and as mirrors receive it (re-serialized bytes), a request no steal took
// forwarded to the app over a keep-alive agent with its raw headers and framing kept (a 502
// when the app does not answer), and the answer to a request Node's parser refused.
import { request as httpRequest, type Agent, type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { RequestHead } from "./http-filter.js";
import type { AppAddress } from "./raw-forwarding.js";

/** A request's head as the client sent it (raw header names, order and repeats), as bytes. */
export function serializeHead(req: IncomingMessage): Buffer {
  const lines = [`${req.method} ${req.url} HTTP/${req.httpVersion}`];
  for (let i = 0; i < req.rawHeaders.length; i += 2)
    lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
  return Buffer.from(lines.join("\r\n") + "\r\n\r\n", "latin1");
}

/** A request's head as steal filters match it. */
export function headOf(req: IncomingMessage): RequestHead {
  const headers: Array<[string, string]> = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2)
    headers.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
  return { method: req.method ?? "GET", path: req.url ?? "/", headers };
}

/** Forwards one request to the app and its answer back; `onFailed` counts an app that did not answer. */
export function forwardToApp(
  req: IncomingMessage,
  res: ServerResponse,
  app: AppAddress,
  agent: Agent,
  onFailed: () => void,
): void {
  // Raw header pairs keep names, order and repeats; Content-Length / Transfer-Encoding
  // stay, so Node frames the body for the app exactly as the client did.
  const headers: string[] = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const lower = req.rawHeaders[i]!.toLowerCase();
    if (lower !== "connection" && lower !== "keep-alive")
      headers.push(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
  }
  const upstream = httpRequest(
    {
      host: app.host,
      port: app.port,
      method: req.method,
      path: req.url,
      headers: headers as unknown as Record<string, string>, // raw array form, see http.request docs
      agent,
      setHost: false,
    },
    (upRes) => {
      const out: string[] = [];
      for (let i = 0; i < upRes.rawHeaders.length; i += 2) {
        const name = upRes.rawHeaders[i]!;
        const lower = name.toLowerCase();
        if (lower === "connection" || lower === "keep-alive" || lower === "transfer-encoding") continue;
        out.push(name, upRes.rawHeaders[i + 1]!);
      }
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, out);
      upRes.pipe(res);
      upRes.on("error", () => res.destroy());
    },
  );
  upstream.on("error", () => {
    onFailed();
    if (!res.headersSent) {
      res.writeHead(502, { "content-type": "text/plain" });
      res.end("switchyard agent: the application did not answer\n");
    } else res.destroy();
  });
  req.pipe(upstream);
}

/**
 * A request Node's parser refused in HTTP mode gets the status Node itself would answer
 * (431 for a head over its 16 KiB limit, else 400), then the connection closes.
 */
export function refuseUnparsable(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable) return void socket.destroy();
  const status =
    err.code === "HPE_HEADER_OVERFLOW" ? "431 Request Header Fields Too Large" : "400 Bad Request";
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`, () => socket.destroy());
}
