// The local end of a database branch: a loopback listener per branch whose connections are
// dialled through the session (here a dialer to a local echo server standing in for the
// Default cluster's agent), the rewrite the agent is asked for, and close() ending it all.
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { BranchForwards, directBranchRewrites, type ForwardedBranch } from "./branch-forward.js";

const PASSWORD = "Br4nchPassw0rdXYZ";
const branch = (envVar: string, port: string): ForwardedBranch => ({
  envVar,
  name: `mc-0123456789abcdef-${envVar.toLowerCase()}`,
  credentials: {
    host: "pg.branches.svc",
    port,
    database: "sy_db",
    user: "sy_u",
    password: PASSWORD,
    url: "x",
  },
});

let echo: Server | undefined;
let forwards: BranchForwards | undefined;
afterEach(async () => {
  await forwards?.close();
  await new Promise<void>((r) => (echo ? echo.close(() => r()) : r()));
  echo = forwards = undefined;
});

async function startEcho(): Promise<number> {
  echo = createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo!.listen(0, "127.0.0.1", () => r()));
  return (echo.address() as AddressInfo).port;
}

const roundTrip = (port: number, text: string) =>
  new Promise<string>((resolve, reject) => {
    const s: Socket = connect(port, "127.0.0.1", () => s.write(text));
    s.once("data", (d) => {
      resolve(d.toString());
      s.destroy();
    });
    s.once("error", reject);
  });

describe("BranchForwards", () => {
  it("forwards each branch's local port to the Secret's host:port through the dialer", async () => {
    const echoPort = await startEcho();
    const dialled: string[] = [];
    forwards = new BranchForwards([branch("DATABASE_URL", "5432"), branch("ORDERS_DB", "3306")], {
      dialer: {
        dial: async (host, port) => {
          dialled.push(`${host}:${port}`);
          return connect(echoPort, "127.0.0.1");
        },
      },
    });
    await forwards.listen();
    const [a, b] = forwards.rewrites();
    expect(a).toEqual({
      variable: "DATABASE_URL",
      database: "sy_db",
      user: "sy_u",
      password: PASSWORD,
      host: "127.0.0.1",
      port: expect.any(Number),
    });
    expect(b!.port).not.toBe(a!.port);
    expect(await roundTrip(a!.port, "hello")).toBe("hello");
    expect(await roundTrip(b!.port, "again")).toBe("again");
    expect(dialled).toEqual(["pg.branches.svc:5432", "pg.branches.svc:3306"]);
    expect(forwards.connections).toBe(2);
    expect(JSON.stringify(forwards.forwards())).not.toContain(PASSWORD);
  });

  it("closes the local connection when the dial fails and reports it", async () => {
    const errors: string[] = [];
    forwards = new BranchForwards([branch("DATABASE_URL", "5432")], {
      dialer: { dial: () => Promise.reject(new Error("SWITCHYARD_CONNECT_FAILED: connection refused")) },
      onError: (name, err) => errors.push(`${name}: ${err.message}`),
    });
    await forwards.listen();
    const port = forwards.rewrites()[0]!.port;
    const closed = await new Promise<boolean>((resolve) => {
      const s = connect(port, "127.0.0.1");
      s.on("error", () => {});
      s.once("close", () => resolve(true));
    });
    expect(closed).toBe(true);
    expect(errors).toEqual([
      "mc-0123456789abcdef-database_url: SWITCHYARD_CONNECT_FAILED: connection refused",
    ]);
  });

  it("stops listening and ends open connections on close", async () => {
    const echoPort = await startEcho();
    forwards = new BranchForwards([branch("DATABASE_URL", "5432")], {
      dialer: { dial: async () => connect(echoPort, "127.0.0.1") },
    });
    await forwards.listen();
    const port = forwards.rewrites()[0]!.port;
    const open = connect(port, "127.0.0.1");
    open.on("error", () => {});
    await new Promise((r) => open.once("connect", r));
    const ended = new Promise((r) => open.once("close", r));
    await forwards.close();
    await ended;
    const refused = await new Promise<string>((resolve) => {
      const s = connect(port, "127.0.0.1");
      s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? ""));
      s.once("connect", () => resolve("connected"));
    });
    expect(refused).toBe("ECONNREFUSED");
  });
});

describe("directBranchRewrites", () => {
  it("points each variable at the branch's own host and port, with its database and account", () => {
    expect(directBranchRewrites([branch("DATABASE_URL", "5432"), branch("REPORTS_URL", "6432")])).toEqual([
      {
        variable: "DATABASE_URL",
        database: "sy_db",
        user: "sy_u",
        password: PASSWORD,
        host: "pg.branches.svc",
        port: 5432,
      },
      {
        variable: "REPORTS_URL",
        database: "sy_db",
        user: "sy_u",
        password: PASSWORD,
        host: "pg.branches.svc",
        port: 6432,
      },
    ]);
  });
});
