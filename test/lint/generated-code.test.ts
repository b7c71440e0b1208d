// proto/gen is committed so that a fresh `npm ci` leaves the project runnable without a
// generation step. This regenerates it into a scratch directory with the pinned buf and
// protoc-gen-es and fails when the committed files differ (run `npm run gen`).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = new URL("../..", import.meta.url).pathname;
const scratch = mkdtempSync(join(tmpdir(), "switchyard-gen-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("generated code", () => {
  it("proto/gen is what `npm run gen` writes", () => {
    execFileSync(
      join(root, "node_modules/.bin/buf"),
      ["generate", "proto", "--template", "proto/buf.gen.yaml", "-o", scratch],
      {
        cwd: root,
        stdio: "pipe",
      },
    );
    const fresh = join(scratch, "gen");
    const committed = join(root, "proto/gen");
    const names = readdirSync(fresh).sort();
    expect(readdirSync(committed).sort()).toEqual(names);
    for (const n of names)
      expect(readFileSync(join(committed, n), "utf8"), `proto/gen/${n} is stale: run npm run gen`).toBe(
        readFileSync(join(fresh, n), "utf8"),
      );
  }, 60_000);
});
