// Filtered steals whose regexes would stall a backtracking engine: the real agent process
// matches every request on the port — the app's own traffic included — against the
// session's filter, so a pattern like `(a+)+$` must not keep the app from its requests.
// Requests built to be the worst case for those patterns still reach the app at once,
// matching ones still reach the session, and regexes RE2 cannot compile are refused with
// the field named and the syntax to use.
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashSecret } from "../../../proto/session-auth.js";
import { AgentClient } from "../../peers/agent-client.js";
import { AgentProcess } from "./agent-process.js";

const SECRET = "filter-regex-agent-secret-3b7c";
let app: Server;
let appPort = 0;
let agent: AgentProcess;
let trafficPort = 0;
const clients: AgentClient[] = [];

async function connect(session: string): Promise<AgentClient> {
  const c = await AgentClient.connect(agent.url(session), SECRET);
  clients.push(c);
  return c;
}

/** One request on the agent's traffic port: status and body (no answer within 10 s fails it). */
function get(path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port: trafficPort, path, headers, agent: false }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${path.slice(0, 40)} within 10 s`)));
    req.on("error", reject).end();
  });
}

beforeAll(async () => {
  app = createServer((_req, res) => res.end("app"));
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", () => r()));
  appPort = (app.address() as AddressInfo).port;
  agent = await AgentProcess.start([`--app-port`, `${appPort}:0`, "--secret-hash", hashSecret(SECRET)]);
  trafficPort = agent.trafficPorts[String(appPort)]!;
  expect(trafficPort).toBeGreaterThan(0);
});

afterAll(async () => {
  for (const c of clients) c.close();
  await agent?.stop();
  await new Promise((r) => app?.close(r));
});

describe("agent HTTP filters on RE2", () => {
  it("keeps serving the app's own traffic with catastrophic patterns in the filter", async () => {
    const c = await connect("regex-session-1");
    c.httpHandler = (req) => ({ status: 200, body: `session saw ${req.path.slice(0, 8)}` });
    const sub = await c.subscribe(1, appPort, "steal", {
      filter: {
        case: "anyOf",
        value: {
          filters: [
            { filter: { case: "header", value: { name: "x-user", valueRegex: "^(a+)+$" } } },
            { filter: { case: "header", value: { name: "x-team", valueRegex: "(a|a)*b" } } },
            { filter: { case: "pathRegex", value: "(.*a){20}" } },
            {
              filter: {
                case: "header",
                value: { name: "x-name", valueRegex: "^(([a-z])+.)+[A-Z]([a-z])+$" },
              },
            },
          ],
        },
      },
    });
    expect(sub).toMatchObject({ ok: true, error: "" });

    // Worst cases for a backtracking engine, inside Node's 16 KiB request-head limit: a
    // long run that almost matches, then fails at its last character.
    const nineteenAs = "/" + ("x".repeat(250) + "a").repeat(19);
    const evil = {
      "x-user": "a".repeat(9_000) + "!",
      "x-team": "a".repeat(1_000),
      "x-name": "a".repeat(1_000) + "!",
    };
    for (let i = 0; i < 10; i++) {
      const r = await get(nineteenAs, evil);
      expect(r).toMatchObject({ status: 200, body: "app" });
    }
    // Several at once, as an app's clients would send them.
    const many = await Promise.all(Array.from({ length: 20 }, () => get(nineteenAs, evil)));
    for (const r of many) expect(r).toMatchObject({ status: 200, body: "app" });
    // How long a hostile match takes is `npm run bench -- hostile-regex`, not this test's.

    // Plain traffic to the app, and matching requests to the session, as before.
    expect(await get("/plain")).toMatchObject({ status: 200, body: "app" });
    expect(await get("/u", { "x-user": "a".repeat(9_000) })).toMatchObject({ body: "session saw /u" });
    expect(await get("/t", { "x-team": "aab" })).toMatchObject({ body: "session saw /t" });
    expect(await get(nineteenAs + "a")).toMatchObject({ body: `session saw ${nineteenAs.slice(0, 8)}` });
    expect(await get("/n", { "x-name": "ab.Cd" })).toMatchObject({ body: "session saw /n" });
    await c.ping(); // the session side answers too
  });

  it.each([
    ["(a)\\1", "backreference"],
    ["^(?=admin)", "lookahead"],
    ["(?<!x)y", "lookbehind"],
  ])("refuses %s (a %s) with the field and RE2 syntax named", async (valueRegex) => {
    const c = await connect(`regex-session-refused-${clients.length}`);
    const sub = await c.subscribe(2, appPort, "steal", {
      filter: { case: "header", value: { name: "x-user", valueRegex } },
    });
    expect(sub.ok).toBe(false);
    expect(sub.error).toMatch(/^SWITCHYARD_HTTP_FILTER_INVALID: http_filter\.header\.value_regex: /);
    expect(sub.error).toContain("(RE2 syntax: no backreferences or lookaround)");
    expect(await get("/still-app")).toMatchObject({ status: 200, body: "app" });
  });
});
