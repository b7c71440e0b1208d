import { utimesSync, writeFileSync } from "node:fs";
import { testScratchDir } from "../../../test/support/scratch-dir.js";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { INVALID_OPTION } from "../../../lib/option-error.js";
import { hashSecret as sha256Hex } from "../../../proto/session-auth.js";
import {
  parseSecretsFile,
  SECRETS_FILE_INVALID,
  SecretsFileError,
  SessionSecrets,
} from "./session-secrets.js";

describe("SessionSecrets", () => {
  it("needs at least one source of accepted secrets", () => {
    expect(() => new SessionSecrets({})).toThrow(/give --secret-hash <sha256 hex> or --secrets-file/);
    expect(() => new SessionSecrets({})).toThrow(expect.objectContaining({ code: INVALID_OPTION }));
    expect(() => new SessionSecrets({ secretHashes: ["abc"] })).toThrow(
      /--secret-hash\[0\]: must be a sha256 in hex/,
    );
  });

  it("accepts flag hashes for every session and file entries only for their session", async () => {
    const dir = testScratchDir("secrets-");
    const file = join(dir, "s.yaml");
    writeFileSync(
      file,
      `secretSha256: [${sha256Hex("all")}]\nsessions:\n  a:\n    secretSha256: ${sha256Hex("only-a")}\n    branch: { variable: DATABASE_URL, branch: b1 }\n`,
    );
    const s = new SessionSecrets({ secretHashes: [sha256Hex("flag")], secretsFile: file });
    await s.load();
    expect(await s.authorize("x", "flag")).toEqual({});
    expect(await s.authorize("x", "all")).toEqual({});
    expect(await s.authorize("a", "only-a")).toEqual({ branch: { variable: "DATABASE_URL", branch: "b1" } });
    expect(await s.authorize("a", "flag")).toEqual({ branch: { variable: "DATABASE_URL", branch: "b1" } });
    expect(await s.authorize("b", "only-a")).toBeUndefined();
    expect(await s.authorize("a", "wrong")).toBeUndefined();
  });

  it("re-reads the file when it changes and keeps the last good content when it breaks", async () => {
    const dir = testScratchDir("secrets-");
    const file = join(dir, "s.json");
    writeFileSync(file, JSON.stringify({ sessions: { a: { secretSha256: sha256Hex("one") } } }));
    const errors: string[] = [];
    const s = new SessionSecrets({ secretsFile: file, onFileError: (e) => errors.push(e.message) });
    await s.load();
    expect(await s.authorize("a", "one")).toEqual({});
    writeFileSync(file, JSON.stringify({ sessions: { a: { secretSha256: sha256Hex("two") } } }));
    utimesSync(file, new Date(), new Date(Date.now() + 5000));
    expect(await s.authorize("a", "two")).toEqual({});
    expect(await s.authorize("a", "one")).toBeUndefined();
    writeFileSync(file, "sessions: [not, a, map]");
    utimesSync(file, new Date(), new Date(Date.now() + 10_000));
    expect(await s.authorize("a", "two")).toEqual({});
    expect(errors).toEqual([expect.stringMatching(/sessions must map session ids to entries/)]);
  });

  it("names the bad field of a secrets file", () => {
    expect(() => parseSecretsFile("sessions:\n  a:\n    branch: { variable: X }\n", "f.yaml")).toThrow(
      new SecretsFileError("f.yaml: sessions.a.branch needs non-empty strings variable and branch"),
    );
    expect(() => parseSecretsFile("{", "f.json")).toThrow(
      expect.objectContaining({ code: SECRETS_FILE_INVALID }),
    );
    expect(() => parseSecretsFile("{", "f.json")).toThrow(/f.json is not JSON or YAML/);
  });
});
