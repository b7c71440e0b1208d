// Write coalescing for the data path: every frame written to a socket within one turn of
// the event loop leaves in one write (one syscall) once the I/O phase is over, instead of
// one write per frame. With many connections active at once (a router forwarding for
// many streams, an agent mirroring busy connections) this removes most of the per-frame
// syscall cost; a lone frame waits only for the rest of the current I/O phase.
// Frames nobody waits for (mirror copies) may ask to wait longer (`lazyMs`), so that many
// turns' worth leave together; any ordinary frame, or enough queued bytes, flushes them
// with it at the end of the turn. Order is never changed: everything goes through the
// socket's own queue.
import type { Socket } from "node:net";

/** Queued bytes above which a lazy flush is not worth waiting for. */
const LAZY_LIMIT_BYTES = 64 * 1024;

interface Pending {
  immediate?: NodeJS.Immediate;
  timer?: NodeJS.Timeout;
}

const pending = new WeakMap<Socket, Pending>();

function flush(socket: Socket): void {
  const p = pending.get(socket);
  if (!p) return;
  pending.delete(socket);
  if (p.immediate) clearImmediate(p.immediate);
  if (p.timer) clearTimeout(p.timer);
  socket.uncork();
}

/**
 * Call before writing to `socket`: it stays corked until the current I/O phase ends, or
 * with `lazyMs`, for up to that long (unless an ordinary write or 64 KiB come first).
 */
export function coalesceWrites(socket: Socket | undefined, lazyMs?: number): void {
  if (!socket || socket.destroyed) return;
  let p = pending.get(socket);
  if (!p) {
    p = {};
    pending.set(socket, p);
    socket.cork();
  }
  if (lazyMs === undefined || socket.writableLength >= LAZY_LIMIT_BYTES) {
    p.immediate ??= setImmediate(() => flush(socket));
  } else if (!p.immediate && !p.timer) {
    p.timer = setTimeout(() => flush(socket), lazyMs);
    p.timer.unref();
  }
}
