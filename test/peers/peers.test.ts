// The peers speak the session protocol to each other: a raw session client says Hello to a
// scripted agent and pings it, and a wrong secret is refused at the upgrade.
import { afterEach, describe, expect, it } from "vitest";
import * as pb from "../../proto/gen/session_pb.js";
import { RawSessionClient, UpgradeRefusedError } from "./raw-session-client.js";
import { ScriptedAgent } from "./scripted-agent.js";

let agent: ScriptedAgent | undefined;
let client: RawSessionClient | undefined;

afterEach(async () => {
  client?.close();
  await agent?.stop();
  client = agent = undefined;
});

describe("peers", () => {
  it("a raw session client talks to a scripted agent", async () => {
    agent = new ScriptedAgent({ name: "east", secret: "agent-secret" });
    await agent.start();
    client = await RawSessionClient.connect(agent.url("s1"), "agent-secret");
    expect(agent.hellos).toBe(1);
    const pong = await client.ping();
    expect(pong.family).toBe(pb.FrameFamily.PING);
    expect(pong.kind).toBe(pb.PingKind.PONG);
    await expect(RawSessionClient.connect(agent.url("s1"), "wrong")).rejects.toBeInstanceOf(
      UpgradeRefusedError,
    );
  });
});
