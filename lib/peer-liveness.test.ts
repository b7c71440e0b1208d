import { describe, expect, it } from "vitest";
import { PAUSED_SILENCE_FACTOR, PeerLiveness } from "./peer-liveness.js";

describe("PeerLiveness", () => {
  it("expires a peer silent for longer than the timeout; anything heard restarts it", () => {
    const l = new PeerLiveness(100, 0);
    expect(l.expired(80)).toBe(false);
    l.heard(); // dated by the next look at the clock
    expect(l.expired(90)).toBe(false);
    expect(l.expired(190)).toBe(false);
    expect(l.expired(191)).toBe(true);
    l.heard();
    expect(l.expired(50)).toBe(false); // a clock read out of order never moves it back
    expect(l.expired(191)).toBe(true);
  });

  it("does not count silence while we do not read, up to the ceiling", () => {
    const l = new PeerLiveness(100, 0);
    l.heard();
    l.pause(50); // what came before the pause is dated then
    l.pause(90); // nested pauses keep the first
    expect(l.paused).toBe(true);
    expect(l.allowedSilenceMs).toBe(100 * PAUSED_SILENCE_FACTOR);
    expect(l.expired(5 * 100)).toBe(false);
    expect(l.expired(50 + 100 * PAUSED_SILENCE_FACTOR)).toBe(false);
    expect(l.expired(51 + 100 * PAUSED_SILENCE_FACTOR)).toBe(true);
  });

  it("describes the allowed silence for messages", () => {
    const l = new PeerLiveness(300, 0);
    expect(l.describeAllowedSilence()).toBe("300 ms");
    l.pause(1);
    expect(l.describeAllowedSilence()).toBe("3000 ms");
    expect(new PeerLiveness(60_000).describeAllowedSilence()).toBe("60 s");
  });

  it("restarts the deadline when reading resumes: a dead peer is found one timeout later", () => {
    const l = new PeerLiveness(100, 0);
    l.pause(10);
    l.resume(600);
    expect(l.paused).toBe(false);
    expect(l.expired(700)).toBe(false);
    expect(l.expired(701)).toBe(true);
    l.resume(800); // not paused: no effect
    expect(l.expired(701)).toBe(true);
  });
});
