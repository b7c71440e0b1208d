import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { INVALID_OPTION } from "../../../../lib/option-error.js";
import { PgServerBranches } from "./pg-server-branches.js";

const logger = pino({ level: "silent" });

describe("PgServerBranches options", () => {
  it("refuses an admin URL it cannot use, naming the option but not the password", () => {
    expect(() => new PgServerBranches({ adminUrl: "mysql://root:hunter22@db/x", logger })).toThrow(
      expect.objectContaining({ code: INVALID_OPTION, option: "adminUrl" }),
    );
    try {
      new PgServerBranches({ adminUrl: "postgres://admin:hunter22@db:5432", logger });
      expect.unreachable();
    } catch (err) {
      expect(err).toMatchObject({ option: "adminUrl" });
      expect((err as Error).message).not.toContain("hunter22");
    }
  });

  it("refuses a pgBinDir without pg_dump and psql, and a bad advertised port", () => {
    expect(
      () =>
        new PgServerBranches({ adminUrl: "postgres://a:b@db/postgres", pgBinDir: "/nonexistent", logger }),
    ).toThrow(/pgBinDir: \/nonexistent has no pg_dump or psql/);
    expect(
      () =>
        new PgServerBranches({
          adminUrl: "postgres://a:b@db/postgres",
          advertise: { host: "x", port: 0 },
          logger,
        }),
    ).toThrow(/advertise/);
  });

  it("describes where branches are made and reached, without the password", () => {
    const text = new PgServerBranches({
      adminUrl: "postgres://admin:hunter22@10.0.0.5:5433/postgres",
      advertise: { host: "pg.db.svc", port: 5432 },
      logger,
    }).describe();
    expect(text).toBe(
      "server provisioner (PostgreSQL): branches on 10.0.0.5:5433/postgres as admin, reached by clients at pg.db.svc:5432; pg_dump and psql on PATH",
    );
  });
});
