// Views, triggers, routines and events of a dump carry `DEFINER=`user`@`host``: the
// source's user. In a branch they must run as the branch's own user instead — loading a
// foreign definer needs SUPER (or SET USER), and an object running with the source user's
// rights could write to the source database. The dump is loaded by the branch user, and
// this stream rewrites every definer clause to `DEFINER=CURRENT_USER` on the way, line by
// line, without staging the dump. Row lines (`INSERT INTO …`, one per line in a dump:
// mariadb-dump escapes newlines in values) pass through untouched and unscanned, so data
// that happens to contain the text is never changed.
import { Transform, type TransformCallback } from "node:stream";

const NEWLINE = 0x0a;
const INSERT = Buffer.from("INSERT INTO ");
const DEFINER = Buffer.from("DEFINER=");
// `user`@`host`, or a role (no host); a backtick inside a name is doubled.
const DEFINER_CLAUSE = /DEFINER=`(?:[^`]|``)*`(?:@`(?:[^`]|``)*`)?/g;

const EMPTY = Buffer.alloc(0);

function startsWith(line: Buffer, prefix: Buffer): boolean {
  return line.length >= prefix.length && line.subarray(0, prefix.length).equals(prefix);
}

/** One line of a dump with its definer clauses replaced (latin1 keeps every byte as it was). */
export function rewriteDefinerLine(line: Buffer): Buffer {
  if (startsWith(line, INSERT) || line.indexOf(DEFINER) < 0) return line;
  return Buffer.from(line.toString("latin1").replace(DEFINER_CLAUSE, "DEFINER=CURRENT_USER"), "latin1");
}

/** A Transform from a mariadb-dump stream to the same dump with `DEFINER=CURRENT_USER`. */
export class DefinerRewrite extends Transform {
  /** The start of a line whose end has not arrived yet. */
  #carry: Buffer = EMPTY;
  /** Inside a row line: bytes pass through until its newline. */
  #passing = false;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    const out: Buffer[] = [];
    let at = 0;
    while (at < chunk.length) {
      const newline = chunk.indexOf(NEWLINE, at);
      const end = newline < 0 ? chunk.length : newline + 1;
      if (this.#passing) {
        out.push(chunk.subarray(at, end));
        this.#passing = newline < 0;
      } else {
        const piece = chunk.subarray(at, end);
        const line = this.#carry.length > 0 ? Buffer.concat([this.#carry, piece]) : piece;
        this.#carry = EMPTY;
        if (newline >= 0) out.push(rewriteDefinerLine(line));
        else if (startsWith(line, INSERT)) {
          out.push(line);
          this.#passing = true;
        } else this.#carry = Buffer.from(line);
      }
      at = end;
    }
    if (out.length === 0) callback();
    else callback(null, out.length === 1 ? out[0] : Buffer.concat(out));
  }

  override _flush(callback: TransformCallback): void {
    callback(null, this.#carry.length > 0 ? rewriteDefinerLine(this.#carry) : undefined);
  }
}
