// The process provisioner's state directory is private: created 0700 (every level of the
// default), and refused — naming --agent-state-dir — when it is open to others, belongs to
// another user, is a symbolic link or is not a directory. The default is per user.
import { chmodSync, chownSync, mkdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { testScratchDir } from "../../../test/support/scratch-dir.js";
import { defaultAgentStateDir, preparePrivateDirs } from "./agent-state-dir.js";

const mode = (p: string) => statSync(p).mode & 0o777;
const isRoot = process.getuid?.() === 0;

describe("agent state directory", () => {
  it("defaults to a per-user directory: under $XDG_RUNTIME_DIR when set, else the temp dir with the uid", () => {
    expect(defaultAgentStateDir({ XDG_RUNTIME_DIR: "/run/user/1000" })).toBe(
      "/run/user/1000/switchyard-agents",
    );
    const inTmp = join(tmpdir(), `switchyard-agents-${process.getuid?.() ?? "user"}`);
    expect(defaultAgentStateDir({})).toBe(inTmp);
    expect(defaultAgentStateDir({ XDG_RUNTIME_DIR: "relative/dir" })).toBe(inTmp);
  });

  it("creates every missing level with mode 0700, whatever the umask", () => {
    const base = testScratchDir("sy-state-dir-");
    const root = join(base, "switchyard-agents");
    const dir = join(root, "east");
    const old = process.umask(0o022);
    try {
      expect(preparePrivateDirs(root, dir)).toBe(dir);
    } finally {
      process.umask(old);
    }
    expect(mode(root)).toBe(0o700);
    expect(mode(dir)).toBe(0o700);
    // Again, existing and private: accepted as is.
    expect(preparePrivateDirs(root, dir)).toBe(dir);
    const deep = join(base, "a", "b", "c");
    preparePrivateDirs(deep);
    expect([join(base, "a"), join(base, "a", "b"), deep].map(mode)).toEqual([0o700, 0o700, 0o700]);
  });

  it.each([0o755, 0o750, 0o701, 0o777, 0o1777].map((m) => [m.toString(8), m] as const))(
    "refuses an existing directory with mode %s, naming --agent-state-dir",
    (_octal, m) => {
      const dir = join(testScratchDir("sy-state-dir-"), "agents");
      mkdirSync(dir);
      chmodSync(dir, m);
      const shown = (m & 0o777).toString(8).padStart(4, "0");
      expect(() => preparePrivateDirs(dir)).toThrow(
        expect.objectContaining({ code: "SWITCHYARD_INVALID_OPTION", option: "--agent-state-dir" }),
      );
      expect(() => preparePrivateDirs(dir)).toThrow(`has mode ${shown}, open to group or others`);
      expect(() => preparePrivateDirs(dir)).toThrow(/chmod 700.*--agent-state-dir a private directory/);
    },
  );

  it("refuses a private directory of another user, also as the outer level of the default", () => {
    const base = testScratchDir("sy-state-dir-");
    const root = join(base, "switchyard-agents-taken");
    mkdirSync(root, { mode: 0o700 });
    if (isRoot) chownSync(root, 65534, 65534);
    const owner = isRoot ? 65534 : statSync("/").uid; // unprivileged: "/" is root's, which is not us
    const target = isRoot ? root : "/";
    expect(() => preparePrivateDirs(target)).toThrow(`belongs to uid ${owner}, not to this user`);
    if (isRoot) expect(() => preparePrivateDirs(root, join(root, "east"))).toThrow(/^--agent-state-dir: /);
  });

  it("refuses a symbolic link and a file", () => {
    const base = testScratchDir("sy-state-dir-");
    const real = join(base, "real");
    mkdirSync(real, { mode: 0o700 });
    symlinkSync(real, join(base, "link"));
    expect(() => preparePrivateDirs(join(base, "link"))).toThrow("is a symbolic link");
    writeFileSync(join(base, "file"), "");
    expect(() => preparePrivateDirs(join(base, "file"))).toThrow("is not a directory");
  });
});
