// A connection served as raw bytes, either way a port proxy does it: piped both ways to the
// app (nothing stolen, or an upgrade no steal matched), or stolen whole by one session, whose
// flow control pauses and resumes the client. Either way mirrors get a copy of what the
// client sends (mirror-copies.ts), and `initial` — bytes already read, such as an upgrade's
// head — goes first.
import { createConnection } from "node:net";
import type { Duplex } from "node:stream";
import { copyToMirrors, type MirrorCounts } from "./mirror-copies.js";
import {
  newConnectionId,
  type ConnectionControl,
  type ConnectionOrigin,
  type ConnectionSink,
  type TrafficSession,
} from "./session-handoff.js";

/** Where the app behind a port listens. */
export interface AppAddress {
  readonly host: string;
  readonly port: number;
}

/** Raw bytes both ways between a client socket and the app, with mirror copies. */
export function pipeToApp(
  client: Duplex,
  app: AppAddress,
  mirrors: ConnectionSink[],
  initial: Buffer,
  counts: MirrorCounts,
): void {
  const upstream = createConnection({ host: app.host, port: app.port });
  upstream.setNoDelay(true);
  const done = () => {
    client.destroy();
    upstream.destroy();
    mirrors.forEach((m) => m.end());
  };
  upstream.on("error", done);
  client.on("error", done);
  client.on("close", () => upstream.end());
  upstream.on("close", () => client.end());
  if (initial.length > 0) upstream.write(initial);
  if (mirrors.length > 0) client.on("data", (chunk: Buffer) => copyToMirrors(mirrors, chunk, counts));
  client.pipe(upstream);
  upstream.pipe(client);
  client.on("end", () => mirrors.forEach((m) => m.end()));
}

/** The whole connection belongs to one session. */
export function stealRaw(
  client: Duplex,
  session: TrafficSession,
  origin: ConnectionOrigin,
  mirrors: ConnectionSink[],
  initial: Buffer,
  counts: MirrorCounts,
): void {
  let ended = false;
  const sink = session.connection({ ...origin, id: newConnectionId(), mode: "steal" }, clientControl(client));
  const finish = () => {
    if (ended) return;
    ended = true;
    sink.end();
    mirrors.forEach((m) => m.end());
  };
  if (initial.length > 0) {
    copyToMirrors(mirrors, initial, counts);
    if (!sink.data(initial)) client.pause();
  }
  client.on("data", (chunk: Buffer) => {
    copyToMirrors(mirrors, chunk, counts);
    if (!sink.data(chunk)) client.pause();
  });
  client.on("end", finish);
  client.on("close", finish);
  client.on("error", () => client.destroy());
}

/** The stealing session's controls of its client. */
function clientControl(client: Duplex): ConnectionControl {
  return {
    write: (data) => (client.destroyed ? false : client.write(data)),
    end: () => client.end(),
    pause: () => client.pause(),
    resume: () => client.resume(),
    drained: (cb) => {
      if (client.destroyed || !client.writableNeedDrain) return cb();
      let called = false;
      const once = () => {
        if (called) return;
        called = true;
        client.off("drain", once);
        client.off("close", once);
        cb();
      };
      client.on("drain", once);
      client.on("close", once);
    },
  };
}
