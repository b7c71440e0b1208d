import { describe, expect, it } from "vitest";
import { scramVerifier } from "./pg-branch-roles.js";
import { conninfo, errorLines, majorOfVersionNum, majorOfVersionText, showMajor } from "./pg-client-tools.js";
import { redact } from "./pg-session.js";

describe("conninfo", () => {
  it("quotes every value, escapes quotes and backslashes, keeps source parameters, never a password", () => {
    const text = conninfo({
      host: "db",
      port: 5432,
      database: "shop",
      user: "o'brien\\x",
      password: "secret-password",
      params: { sslmode: "require" },
    });
    expect(text).toBe(
      "host='db' port='5432' dbname='shop' user='o\\'brien\\\\x' application_name='switchyard-branching' sslmode='require'",
    );
    expect(text).not.toContain("secret-password");
  });
});

describe("versions", () => {
  it("reads majors from pg_dump --version and server_version_num, 9.x included", () => {
    expect(majorOfVersionText("pg_dump (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n")).toBe(15);
    expect(majorOfVersionText("psql (PostgreSQL) 18.4")).toBe(18);
    expect(majorOfVersionText("pg_dump (PostgreSQL) 9.6.24")).toBe(906);
    expect(majorOfVersionText("something else")).toBeUndefined();
    expect(majorOfVersionNum(180004)).toBe(18);
    expect(majorOfVersionNum(90624)).toBe(906);
    expect(showMajor(906)).toBe("9.6");
    expect(showMajor(15)).toBe("15");
  });
});

describe("errorLines", () => {
  it("keeps the lines that say what failed", () => {
    const stderr = [
      "psql:<stdin>:12: NOTICE:  something harmless",
      'psql:<stdin>:40: ERROR:  insert or update on table "orders" violates foreign key constraint "orders_user_id_fkey"',
      'DETAIL:  Key (user_id)=(7) is not present in table "users".',
    ].join("\n");
    expect(errorLines(stderr)).toBe(
      'psql:<stdin>:40: ERROR:  insert or update on table "orders" violates foreign key constraint "orders_user_id_fkey" ' +
        'DETAIL:  Key (user_id)=(7) is not present in table "users".',
    );
    expect(errorLines("pg_dump: error: aborting because of server version mismatch\n")).toBe(
      "pg_dump: error: aborting because of server version mismatch",
    );
    expect(errorLines("")).toBe("no error output");
  });
});

describe("secrets", () => {
  it("redact replaces every occurrence", () => {
    expect(redact("a pw123456 b pw123456", ["pw123456", undefined])).toBe("a *** b ***");
  });

  it("a SCRAM verifier has Postgres's shape, carries no password and differs per salt", () => {
    const password = "Abcdefghij0123456789Abcdefghij0123456789";
    const v = scramVerifier(password, Buffer.alloc(16, 1));
    expect(v).toMatch(/^SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}$/);
    expect(v).not.toContain(password);
    expect(scramVerifier(password, Buffer.alloc(16, 1))).toBe(v);
    expect(scramVerifier(password)).not.toBe(v);
  });
});
