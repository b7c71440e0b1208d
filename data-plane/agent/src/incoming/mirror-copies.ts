// Mirror sessions' copies of what a client sends, for every way a port proxy serves a
// connection (raw to the app, stolen whole, HTTP mode). A mirror gets a connection of its
// own that the app answers (its controls do nothing) and is fed without ever slowing the
// app path: a copy a mirror cannot take now is dropped and counted, never waited for.
import type { Subscription } from "./port-subscriptions.js";
import {
  newConnectionId,
  type ConnectionControl,
  type ConnectionOrigin,
  type ConnectionSink,
  type TrafficSession,
} from "./session-handoff.js";

/** Bytes copied to mirrors, and bytes a mirror could not take. */
export interface MirrorCounts {
  mirrorBytes: number;
  mirrorDroppedBytes: number;
}

/** A mirror's controls: the app answers, so nothing the session says reaches the client. */
function mirrorControl(): ConnectionControl {
  return {
    write: () => true,
    end: () => {},
    pause: () => {},
    resume: () => {},
    drained: (cb) => cb(),
  };
}

/** One mirror connection per live (not held) mirror subscription in `subs`. */
export function openMirrors(
  subs: readonly Subscription[],
  origin: ConnectionOrigin,
  sessions: (sessionId: string) => TrafficSession | undefined,
): ConnectionSink[] {
  const sinks: ConnectionSink[] = [];
  for (const s of subs) {
    if (s.mode !== "mirror" || s.held) continue;
    const session = sessions(s.sessionId);
    if (!session) continue;
    sinks.push(session.connection({ ...origin, id: newConnectionId(), mode: "mirror" }, mirrorControl()));
  }
  return sinks;
}

export function copyToMirrors(sinks: readonly ConnectionSink[], chunk: Buffer, counts: MirrorCounts): void {
  for (const m of sinks) {
    if (m.data(chunk)) counts.mirrorBytes += chunk.length;
    else counts.mirrorDroppedBytes += chunk.length;
  }
}
