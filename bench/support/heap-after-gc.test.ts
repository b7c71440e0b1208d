import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import { heapAfterGc } from "./heap-after-gc.js";

let child: ChildProcess | undefined;

afterEach(async () => {
  if (child && child.exitCode === null) {
    child.kill("SIGKILL");
    await once(child, "exit");
  }
  child = undefined;
});

/** A Node process that, once it reads "grow" on stdin, holds 64 arrays of 131 072 doubles (1 MiB each). */
async function holder(): Promise<ChildProcess> {
  const c = spawn(
    process.execPath,
    [
      "-e",
      `const kept=[];process.stdin.on("data",d=>{if(String(d).includes("grow")){for(let i=0;i<64;i++)kept.push(new Array(131072).fill(i+0.5));process.stdout.write("grown\\n")}});console.log("up")`,
    ],
    { stdio: ["pipe", "pipe", "pipe"] },
  );
  await new Promise<void>((resolve) => c.stdout!.once("data", () => resolve()));
  return c;
}

describe("heapAfterGc", () => {
  it("reads another process's heap after a GC, twice (the inspector is closed between), and sees it grow", async () => {
    child = await holder();
    const before = await heapAfterGc(child.pid!);
    child.stdin!.write("grow\n");
    await new Promise<void>((resolve) => child!.stdout!.once("data", () => resolve()));
    const after = await heapAfterGc(child.pid!);
    expect(before).toBeGreaterThan(0);
    // 64 MiB of doubles held: at least 60 MiB more.
    expect(after - before).toBeGreaterThan(60 * 1024 * 1024);
  });
});
