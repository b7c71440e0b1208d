// End to end on the embedded stack, as a developer uses it: `switchyard exec --steal` with
// an HTTP filter, so every matching request travels caller → east's agent → east's router
// → a Primary router → the CLI → the local app as a stolen HTTP request, and its answer all
// the way back. Bodies stream both ways: an event stream's events reach the caller one by
// one while the answer never ends (and the caller leaving ends it at the local app), a
// 100 MiB download arrives intact to a caller that stalls, the stall holding the local app's
// writes and the CLI's memory not following the body, a 20 MiB
// upload reaches the local app intact, and a request over the one remaining limit (a head
// over 16 KiB) gets its status at once.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { request, type IncomingMessage } from "node:http";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startEmbeddedStack, type EmbeddedStack } from "../env/stack/embedded-stack.js";
import { freePorts } from "../env/ports.js";
import { launch, repoRoot, tsx, type LaunchedProcess } from "../support/launch.js";
import { eventually, type PollOptions } from "../support/poll.js";

const POLL: PollOptions = { timeoutMs: 60_000, intervalMs: 250 };
/** The filter of the steal: only requests carrying it are the local app's. */
const STREAM = { "x-stream": "yes" };
const MiB = 1024 * 1024;

let stack: EmbeddedStack;
let cli: LaunchedProcess;
let localPort = 0;
let east = "";

/** Block `i` of the local app's download (test/e2e/fixtures/local-app.mjs). */
function downloadBlock(i: number): Buffer {
  const b = Buffer.alloc(64 * 1024, i & 0xff);
  b.writeUInt32BE(i, 0);
  return b;
}

/** Resident memory of a process, bytes. */
function rssOf(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]!;
  return Number(kb) * 1024;
}

function send(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: Buffer; timeoutMs?: number } = {},
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: opts.method ?? "GET", headers: opts.headers, agent: false }, resolve);
    req.setTimeout(opts.timeoutMs ?? 30_000, () => req.destroy(new Error(`no answer from ${url} in time`)));
    req.on("error", reject);
    req.end(opts.body);
  });
}

async function text(res: IncomingMessage): Promise<string> {
  let s = "";
  for await (const c of res) s += (c as Buffer).toString();
  return s;
}

/** Runs `fn`; on failure, adds what the CLI printed to the error. */
async function showingOutput<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    (err as Error).message += `\nCLI output:\n${cli.output()}`;
    throw err;
  }
}

/** How many of the latest download's bytes the local app has handed to its socket. */
async function downloadWritten(): Promise<number> {
  return Number(await text(await send(`http://127.0.0.1:${localPort}/download-written`)));
}

/**
 * Downloads `bytes` through the steal, the caller reading nothing for its first `stallMs`;
 * checks the body, samples the CLI's resident memory all along, and reads how far the local
 * app got with its writes 500 ms before the caller starts to read and when it does.
 */
async function download(bytes: number, stallMs: number) {
  const expected = createHash("sha256");
  for (let i = 0; i * 64 * 1024 < bytes; i++) expected.update(downloadBlock(i));
  const rssBefore = rssOf(cli.pid);
  let rssMax = rssBefore;
  const sampler = setInterval(() => (rssMax = Math.max(rssMax, rssOf(cli.pid))), 50);
  const t0 = Date.now();
  const written = { before: 0, atEnd: 0 };
  try {
    const res = await send(`${east}/download?bytes=${bytes}`, { headers: STREAM, timeoutMs: 120_000 });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-length"]).toBe(String(bytes));
    res.pause();
    await new Promise((r) => setTimeout(r, stallMs - 500));
    written.before = await downloadWritten();
    await new Promise((r) => setTimeout(r, 500));
    written.atEnd = await downloadWritten();
    const got = createHash("sha256");
    let n = 0;
    for await (const c of res) {
      got.update(c as Buffer);
      n += (c as Buffer).length;
    }
    expect(n).toBe(bytes);
    expect(got.digest("hex")).toBe(expected.digest("hex"));
  } finally {
    clearInterval(sampler);
  }
  return { ms: Date.now() - t0, rssBefore, rssMax, written };
}

beforeAll(async () => {
  stack = await startEmbeddedStack(
    process.env.SWITCHYARD_E2E_LOG_DIR ? { logDir: process.env.SWITCHYARD_E2E_LOG_DIR } : {},
  );
  east = stack.workloads.east!.trafficUrl;
  localPort = (await freePorts(1))[0]!;
  cli = await launch({
    name: "switchyard-exec",
    ...tsx("cli/src/main.ts", [
      "exec",
      ...stack.developerCliArgs,
      "--steal",
      "--http-header",
      "X-Stream: yes",
      "--port",
      `8080:${localPort}`,
      "--",
      process.execPath,
      join(repoRoot, "test/e2e/fixtures/local-app.mjs"),
    ]),
    env: { LOCAL_PORT: String(localPort) },
    ready: (p) => p.output().includes("local app ready"),
    readyTimeoutMs: 120_000,
    readyIntervalMs: 250,
  });
  await showingOutput(() =>
    eventually(
      "a stolen request through east",
      async () =>
        (await send(`${east}/hello`, { headers: STREAM })).headers["x-served-by"] === "local"
          ? true
          : undefined,
      POLL,
    ),
  );
}, 300_000);

afterEach(() => {
  expect(cli.hasExited(), `the CLI ended:\n${cli.output()}`).toBe(false);
});

afterAll(async () => {
  await cli?.stop(0, "SIGKILL");
  await stack?.stop();
});

describe("stolen HTTP bodies stream through a filtered steal", () => {
  it("delivers an event stream's events one by one while it never ends, and ends it when the caller leaves", async () => {
    const closedBefore = Number(await text(await send(`http://127.0.0.1:${localPort}/sse-closed`)));
    const res = await send(`${east}/sse?everyMs=300`, { headers: STREAM });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("text/event-stream");
    const arrivals: Array<{ event: string; at: number }> = [];
    let buffered = "";
    const three = new Promise<void>((resolve) => {
      res.on("data", (c: Buffer) => {
        buffered += c.toString();
        let cut: number;
        while ((cut = buffered.indexOf("\n\n")) >= 0) {
          arrivals.push({ event: buffered.slice(0, cut), at: Date.now() });
          buffered = buffered.slice(cut + 2);
        }
        if (arrivals.length >= 3) resolve();
      });
    });
    await showingOutput(() => three);
    expect(arrivals.slice(0, 3).map((a) => a.event)).toEqual(["data: 1", "data: 2", "data: 3"]);
    // Each event came as it was written, not held until some later point.
    expect(arrivals[2]!.at - arrivals[0]!.at).toBeGreaterThanOrEqual(400);
    expect(res.complete).toBe(false);
    res.destroy();
    await showingOutput(() =>
      eventually(
        "the local app to see its event stream closed",
        async () =>
          Number(await text(await send(`http://127.0.0.1:${localPort}/sse-closed`))) > closedBefore
            ? true
            : undefined,
        { timeoutMs: 10_000, intervalMs: 100 },
      ),
    );
  });

  it("downloads 100 MiB intact to a caller that stalls, the local app held by the path and the CLI's memory not following the body", async () => {
    // The first large transfer grows the CLI's heap to its working size once; the measured
    // download comes after a smaller one.
    const warm = await download(32 * MiB, 500);
    const bytes = 100 * MiB;
    const d = await download(bytes, 2000);
    const growth = d.rssMax - d.rssBefore;
    console.log(
      `100 MiB download through the filtered steal, the caller stalled 2 s first: ${d.ms} ms; the local app ` +
        `had written ${(d.written.before / MiB).toFixed(1)} MiB 0.5 s before the caller read, ` +
        `${(d.written.atEnd / MiB).toFixed(1)} MiB when it did; CLI RSS ` +
        `${(d.rssBefore / MiB).toFixed(1)} MiB before, ${(d.rssMax / MiB).toFixed(1)} MiB at most ` +
        `(+${(growth / MiB).toFixed(1)} MiB; the 32 MiB warm-up before it: ` +
        `+${((warm.rssMax - warm.rssBefore) / MiB).toFixed(1)} MiB)`,
    );
    // Backpressure reaches the local app: while the caller reads nothing, the app's writes
    // stop once every hop's buffers (user space and the kernel's socket buffers of each TCP
    // connection on the way) are full. A hop that buffered without bound would let the app
    // write the whole body, or keep writing through the stall.
    expect(d.written.atEnd).toBeLessThan(bytes);
    expect(d.written.atEnd - d.written.before).toBeLessThan(2 * MiB);
    // The CLI's resident memory does not follow the body. RSS counts garbage too, and V8
    // collects Buffers' external memory only after some 64 MiB of it accrue, so the bound
    // is what a CLI that held the body would exceed, not the CLI's working size.
    expect(growth).toBeLessThan(bytes * 0.8);
  });

  it("uploads 20 MiB intact to the local app", async () => {
    const body = Buffer.alloc(20 * MiB);
    for (let i = 0; i < body.length; i += 4) body.writeUInt32BE(i, i);
    const t0 = Date.now();
    const res = await send(`${east}/upload`, {
      method: "POST",
      headers: {
        ...STREAM,
        "content-length": String(body.length),
        "content-type": "application/octet-stream",
      },
      body,
      timeoutMs: 120_000,
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers["x-served-by"]).toBe("local");
    expect(JSON.parse(await text(res))).toEqual({
      bytes: body.length,
      sha256: createHash("sha256").update(body).digest("hex"),
    });
    console.log(`20 MiB upload through the filtered steal: ${Date.now() - t0} ms`);
  });

  it("answers a request head over 16 KiB with 431 at once, not after a deadline", async () => {
    const res = await send(`${east}/big-head`, {
      headers: { ...STREAM, "x-padding": "p".repeat(20 * 1024) },
      timeoutMs: 10_000,
    });
    expect(res.statusCode).toBe(431);
    res.resume();
  });
});
