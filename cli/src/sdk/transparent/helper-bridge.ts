// The helper's end of the bridge (bridge-protocol.ts): TCP connections and UDP flows of the
// namespace, each one Unix-socket connection to the CLI.
import { connect, type Socket } from "node:net";
import type { UdpFlow, UdpRelay } from "../local/local-proxy.js";
import {
  DatagramReader,
  encodeDatagram,
  readLine,
  writeLine,
  type BridgeAnswer,
  type BridgeRequest,
} from "./bridge-protocol.js";

export async function bridgeRequest(
  path: string,
  req: BridgeRequest,
): Promise<{ socket: Socket; answer: BridgeAnswer }> {
  const socket = connect({ path });
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  socket.setNoDelay?.(true);
  writeLine(socket, req);
  const answer = await readLine<BridgeAnswer>(socket).catch((err: Error) => {
    socket.destroy();
    throw err;
  });
  return { socket, answer };
}

/** A TCP connection to host:port through the CLI; rejects with the CLI's reason. */
export async function bridgeTcp(path: string, host: string, port: number, local = false): Promise<Socket> {
  const { socket, answer } = await bridgeRequest(path, {
    op: "tcp",
    host,
    port,
    ...(local ? { local } : {}),
  });
  if (!answer.ok) {
    socket.destroy();
    throw new Error(answer.error);
  }
  socket.resume();
  return socket;
}

/** UDP flows through the CLI: each flow one bridge connection, opened at once. */
export function bridgeUdpRelay(path: string): UdpRelay {
  return {
    open(): UdpFlow {
      const messages: Array<(from: { host: string; port: number }, data: Buffer) => void> = [];
      const closes: Array<(error: string) => void> = [];
      const queued: Buffer[] = [];
      let socket: Socket | undefined;
      let closed = false;
      const end = (error: string) => {
        if (closed) return;
        closed = true;
        socket?.destroy();
        for (const c of closes) c(error);
      };
      bridgeRequest(path, { op: "udp" }).then(
        ({ socket: s, answer }) => {
          if (closed || !answer.ok) {
            s.destroy();
            return end(answer.ok ? "" : answer.error);
          }
          socket = s;
          const reader = new DatagramReader();
          s.on("data", (chunk: Buffer) => {
            try {
              for (const d of reader.push(chunk)) for (const m of messages) m(d, d.data);
            } catch (err) {
              end((err as Error).message);
            }
          });
          s.on("close", () => end(""));
          s.on("error", (err) => end(err.message));
          s.resume();
          for (const q of queued.splice(0)) s.write(q);
        },
        (err: Error) => end(err.message),
      );
      return {
        send(host, port, data) {
          if (closed) return;
          const frame = encodeDatagram(host, port, data);
          if (socket) socket.write(frame);
          else if (queued.length < 64) queued.push(frame);
        },
        onMessage: (l) => void messages.push(l),
        onClose: (l) => void closes.push(l),
        close: () => end(""),
      };
    },
  };
}
