import { statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { OptionError } from "../../../../lib/option-error.js";
import {
  OptionFiles,
  optionFileText,
  optionFileValue,
  parseAdminUrl,
  tlsMode,
} from "./mysql-connection-options.js";

describe("parseAdminUrl", () => {
  it("reads user, percent-encoded password, host and port (3306 by default)", () => {
    expect(parseAdminUrl("mysql://admin:p%40ss%2Fw@db.internal:3307/", "adminUrl")).toEqual({
      host: "db.internal",
      port: 3307,
      user: "admin",
      password: "p@ss/w",
      tls: undefined,
    });
    expect(parseAdminUrl("mariadb://root@[::1]", "adminUrl")).toMatchObject({ host: "::1", port: 3306 });
  });

  it("refuses what it cannot use, naming the option and never the password", () => {
    for (const url of [
      "postgres://admin:s3cret@db/",
      "mysql://:s3cret@db/",
      "mysql://admin:s3cret@db/shop",
      "mysql://admin:s3cret@db:99999/",
    ]) {
      let error: unknown;
      try {
        parseAdminUrl(url, "adminUrl");
      } catch (err) {
        error = err;
      }
      expect(error, url).toBeInstanceOf(OptionError);
      expect((error as OptionError).option).toBe("adminUrl");
      expect((error as Error).message).not.toContain("s3cret");
    }
  });
});

describe("tlsMode", () => {
  it("reads the common spellings of drivers and frameworks", () => {
    expect(tlsMode({ "ssl-mode": "REQUIRED" }, "src")).toBe("required");
    expect(tlsMode({ sslMode: "VERIFY_IDENTITY" }, "src")).toBe("verify");
    expect(tlsMode({ sslmode: "disable" }, "src")).toBe("disabled");
    expect(tlsMode({ ssl_mode: "preferred" }, "src")).toBeUndefined();
    expect(tlsMode({ tls: "skip-verify" }, "src")).toBe("required");
    expect(tlsMode({ useSSL: "false" }, "src")).toBe("disabled");
    expect(tlsMode({ charset: "utf8mb4" }, "src")).toBeUndefined();
  });

  it("refuses a value it does not know, naming the parameter", () => {
    expect(() => tlsMode({ sslmode: "sometimes" }, "the source")).toThrow(/the source parameter sslmode/);
  });
});

describe("option files", () => {
  it("quote values so # ; spaces quotes and backslashes stay literal", () => {
    expect(optionFileValue(`a#b c"d\\e'f;g`)).toBe(`"a#b c\\"d\\\\e'f;g"`);
    expect(optionFileValue("line\nbreak\ttab")).toBe(`"line\\nbreak\\ttab"`);
  });

  it("give the tools TCP, the user and the password, and TLS as asked", () => {
    const text = optionFileText({ host: "db", port: 3306, user: "app", password: "pw", tls: "verify" });
    expect(text.split("\n")).toEqual([
      "[client]",
      `host="db"`,
      "port=3306",
      `user="app"`,
      "protocol=tcp",
      `password="pw"`,
      "ssl",
      "ssl-verify-server-cert",
      "",
    ]);
    expect(optionFileText({ host: "db", port: 1, user: "app", password: undefined })).not.toContain(
      "password",
    );
  });

  it("are written mode 0600 in a private directory that dispose removes", async () => {
    const files = await OptionFiles.create();
    const arg = await files.defaultsFileArg({ host: "db", port: 3306, user: "app", password: "s3cret" });
    const file = arg.replace(/^--defaults-file=/, "");
    expect(statSync(files.dir).mode & 0o777).toBe(0o700);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(await readFile(file, "utf8")).toContain(`password="s3cret"`);
    await files.dispose();
    expect(() => statSync(files.dir)).toThrow();
  });
});
