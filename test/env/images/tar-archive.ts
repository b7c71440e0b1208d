// A minimal ustar writer for image layers and image archives: regular files (from memory or
// copied from a host file in chunks, so a 100 MB runtime never sits in memory), directories and
// symlinks, with fixed owner and mtime so the same input gives the same bytes (and digest).
// It hashes what it writes, because an OCI blob is named by its sha256.
import { createHash, type Hash } from "node:crypto";
import { closeSync, openSync, readSync, statSync, writeSync } from "node:fs";

const BLOCK = 512;

export interface WrittenArchive {
  /** Hex sha256 of the whole archive. */
  sha256: string;
  size: number;
}

export class TarArchiveError extends Error {
  readonly code = "SWITCHYARD_TEST_TAR_FAILED";
}

/** Splits a path into ustar's prefix (≤155 bytes) and name (≤100 bytes). */
function splitName(path: string): { name: string; prefix: string } {
  if (Buffer.byteLength(path) <= 100) return { name: path, prefix: "" };
  for (let i = path.lastIndexOf("/"); i > 0; i = path.lastIndexOf("/", i - 1)) {
    const prefix = path.slice(0, i);
    const name = path.slice(i + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100 && name.length > 0)
      return { name, prefix };
  }
  throw new TarArchiveError(`path too long for a ustar archive: ${path}`);
}

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, "0") + "\0";
}

function header(path: string, type: "0" | "2" | "5", size: number, mode: number, link = ""): Buffer {
  const h = Buffer.alloc(BLOCK);
  const { name, prefix } = splitName(path);
  h.write(name, 0, 100);
  h.write(octal(mode & 0o7777, 8), 100);
  h.write(octal(0, 8), 108);
  h.write(octal(0, 8), 116);
  h.write(octal(size, 12), 124);
  h.write(octal(0, 12), 136);
  h.write("        ", 148);
  h.write(type, 156);
  if (Buffer.byteLength(link) > 100) throw new TarArchiveError(`symlink target too long: ${link}`);
  h.write(link, 157, 100);
  h.write("ustar\0", 257);
  h.write("00", 263);
  h.write("root", 265, 32);
  h.write("root", 297, 32);
  h.write(prefix, 345, 155);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(octal(sum, 7) + " ", 148);
  return h;
}

/** Writes a tar archive to a file, synchronously, hashing as it goes. */
export class TarWriter {
  private readonly fd: number;
  private readonly hash: Hash = createHash("sha256");
  private size = 0;
  private readonly seen = new Set<string>();

  constructor(readonly path: string) {
    this.fd = openSync(path, "w", 0o644);
  }

  private write(buf: Buffer): void {
    for (let off = 0; off < buf.length;) off += writeSync(this.fd, buf, off);
    this.hash.update(buf);
    this.size += buf.length;
  }

  private pad(size: number): void {
    const rest = size % BLOCK;
    if (rest !== 0) this.write(Buffer.alloc(BLOCK - rest));
  }

  /** True if that path was already written (an image lists each path once). */
  has(path: string): boolean {
    return this.seen.has(path.replace(/\/$/, ""));
  }

  private claim(path: string): void {
    const key = path.replace(/\/$/, "");
    if (this.seen.has(key)) throw new TarArchiveError(`${key} is in the archive twice`);
    this.seen.add(key);
  }

  directory(path: string, mode = 0o755): void {
    this.claim(path);
    this.write(header(path.endsWith("/") ? path : `${path}/`, "5", 0, mode));
  }

  symlink(path: string, target: string): void {
    this.claim(path);
    this.write(header(path, "2", 0, 0o777, target));
  }

  file(path: string, content: Buffer, mode = 0o644): void {
    this.claim(path);
    this.write(header(path, "0", content.length, mode));
    this.write(content);
    this.pad(content.length);
  }

  /** Copies a host file into the archive in 1 MiB chunks. */
  copy(path: string, hostPath: string, mode?: number): void {
    this.claim(path);
    const st = statSync(hostPath);
    this.write(header(path, "0", st.size, mode ?? st.mode));
    const src = openSync(hostPath, "r");
    try {
      const chunk = Buffer.alloc(1 << 20);
      let left = st.size;
      while (left > 0) {
        const n = readSync(src, chunk, 0, Math.min(chunk.length, left), null);
        if (n === 0) throw new TarArchiveError(`${hostPath} shrank while it was copied`);
        this.write(chunk.subarray(0, n));
        left -= n;
      }
    } finally {
      closeSync(src);
    }
    this.pad(st.size);
  }

  /** Writes the end-of-archive blocks and closes the file. */
  close(): WrittenArchive {
    this.write(Buffer.alloc(BLOCK * 2));
    closeSync(this.fd);
    return { sha256: this.hash.digest("hex"), size: this.size };
  }
}
