// Setup file of both integration projects: a test file must stop what it started. Before the
// file runs, its path is put in SWITCHYARD_TEST_FILE, which every owned directory it creates
// records (test/env/processes.ts), so a sweep can name the file even after its worker is gone.
// After the file's own afterAll hooks (vitest runs after-hooks in reverse order, and this one
// is registered first), anything this worker started that still runs, or any owned directory
// it created that still exists, fails the file, named, and is then killed and removed.
import { relative } from "node:path";
import { afterAll, beforeAll, expect } from "vitest";
import { cleanUpLeftBehind, leftBehind } from "./env/processes.js";

const root = new URL("..", import.meta.url).pathname;

beforeAll(() => {
  const path = expect.getState().testPath;
  if (path) process.env.SWITCHYARD_TEST_FILE = relative(root, path);
});

afterAll(async () => {
  const left = await leftBehind();
  if (left.processes.length === 0 && left.directories.length === 0) return;
  await cleanUpLeftBehind(left);
  const what = [
    ...(left.processes.length > 0 ? [`processes still running: ${left.processes.join(", ")}`] : []),
    ...(left.directories.length > 0 ? [`directories not removed: ${left.directories.join(", ")}`] : []),
  ];
  throw new Error(
    `${process.env.SWITCHYARD_TEST_FILE ?? "this file"} left behind after its last hook — ${what.join("; ")}. ` +
      "Stop every cluster set, stack and launched process in afterAll (they are killed now).",
  );
});
