// How the router dials an upstream WebSocket, per session (upstream-link.ts) or shared by
// every session to one gateway (mux-pool.ts): the secret as bearer, no compression, the
// route's CA and server name, and the message limit of what it carries.
import WebSocket from "ws";
import { bearerHeader } from "../../../proto/session-auth.js";

export interface UpstreamDial {
  url: string;
  secret: string;
  caPem: string;
  /** Name the certificate is verified against (SNI and hostname check); "" = the URL's host. */
  serverName: string;
  /** Largest message accepted, bytes. */
  maxPayload: number;
  /** Handshake timeout, ms. */
  connectTimeoutMs: number;
  /** Send unmasked frames (a zero mask; trusted paths only). */
  unmasked: boolean;
}

const zeroMask = (mask: Buffer): void => {
  mask.fill(0);
};

/** Opens the WebSocket (binary messages as Buffers). */
export function dialUpstream(d: UpstreamDial): WebSocket {
  // ws hands its options to tls.connect, which sends `servername` as SNI and checks the
  // certificate against it instead of the URL's host (@types/ws does not declare it).
  const options: WebSocket.ClientOptions & { servername?: string } = {
    headers: bearerHeader(d.secret),
    perMessageDeflate: false,
    skipUTF8Validation: true,
    maxPayload: d.maxPayload,
    handshakeTimeout: d.connectTimeoutMs,
    ...(d.caPem ? { ca: d.caPem } : {}),
    ...(d.serverName ? { servername: d.serverName } : {}),
    ...(d.unmasked ? { generateMask: zeroMask } : {}),
  };
  const ws = new WebSocket(d.url, options);
  ws.binaryType = "nodebuffer";
  return ws;
}
