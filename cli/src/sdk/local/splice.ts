// Two byte streams joined both ways: an error on either destroys the other; `a` closing
// destroys `b`, and `b` closing ends `a` once its written data is flushed.
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";

export function splice(a: Socket, b: Duplex): void {
  b.on("error", () => a.destroy());
  a.on("error", () => b.destroy());
  a.on("close", () => b.destroy());
  b.on("close", () => a.destroySoon());
  a.pipe(b);
  b.pipe(a);
}
