// proto/gen is committed so that a fresh `npm ci` leaves the project runnable without a
// generation step. This regenerates it into a scratch directory with the pinned generators
// and fails when the committed files differ (run `npm run gen`): protoc-gen-es (through
// buf) writes proto/gen/*.ts, and proto-loader-gen-types writes the RouteDiscovery wire
// types to proto/gen/grpc/ with exactly the command of `npm run gen:grpc`.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = new URL("../..", import.meta.url).pathname;
const scratch = mkdtempSync(join(tmpdir(), "switchyard-gen-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Files under `dir`, relative to it, sorted; `recursive: false` lists only its own files. */
function files(dir: string, recursive: boolean): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) {
        if (recursive) walk(path);
      } else out.push(relative(dir, path));
    }
  };
  walk(dir);
  return out.sort();
}

function expectSameFiles(fresh: string, committed: string, recursive: boolean): void {
  const names = files(fresh, recursive);
  expect(files(committed, recursive)).toEqual(names);
  for (const n of names) {
    const where = relative(root, join(committed, n));
    expect(readFileSync(join(committed, n), "utf8"), `${where} is stale: run npm run gen`).toBe(
      readFileSync(join(fresh, n), "utf8"),
    );
  }
}

describe("generated code", () => {
  it("proto/gen is what `npm run gen` writes with buf and protoc-gen-es", () => {
    execFileSync(
      join(root, "node_modules/.bin/buf"),
      ["generate", "proto", "--template", "proto/buf.gen.yaml", "-o", scratch],
      {
        cwd: root,
        stdio: "pipe",
      },
    );
    expectSameFiles(join(scratch, "gen"), join(root, "proto/gen"), false);
  }, 60_000);

  it("proto/gen/grpc is what `npm run gen:grpc` writes with proto-loader-gen-types", () => {
    const script = (
      JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
        scripts: Record<string, string>;
      }
    ).scripts["gen:grpc"]!;
    const [command, ...args] = script.split(/\s+/);
    const out = args.indexOf("-O");
    expect(command, "gen:grpc runs proto-loader-gen-types").toBe("proto-loader-gen-types");
    expect(args[out + 1], "gen:grpc writes proto/gen/grpc").toBe("proto/gen/grpc");
    const fresh = join(scratch, "grpc");
    args[out + 1] = fresh;
    execFileSync(join(root, "node_modules/.bin/proto-loader-gen-types"), args, { cwd: root, stdio: "pipe" });
    expectSameFiles(fresh, join(root, "proto/gen/grpc"), true);
  }, 60_000);
});
