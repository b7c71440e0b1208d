// Write coalescing for the data path: every frame written to a socket within one turn of
// the event loop leaves in one write (one syscall) once the I/O phase is over, instead of
// one write per frame. With many connections active at once (a router forwarding for
// many streams, an agent mirroring busy connections) this removes most of the per-frame
// syscall cost; a lone frame waits only for the rest of the current I/O phase.
import type { Socket } from "node:net";

const corked = new WeakSet<Socket>();

/** Call before writing to `socket`: it stays corked until the current I/O phase ends. */
export function coalesceWrites(socket: Socket | undefined): void {
  if (!socket || corked.has(socket) || socket.destroyed) return;
  corked.add(socket);
  socket.cork();
  setImmediate(() => {
    corked.delete(socket);
    socket.uncork();
  });
}
