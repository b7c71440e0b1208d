import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { ErrorCode, isErrorCode } from "./error-codes.js";
import { errorFrame } from "./error-frame.js";
import { decodeFrame } from "./frame-codec.js";
import { ControlKind, FrameFamily, type ProtocolError } from "./gen/session_pb.js";
import {
  bearerHeader,
  bearerSecret,
  hashSecret,
  isSecretHash,
  newSecret,
  secretMatches,
} from "./session-auth.js";
import {
  parseRefusal,
  parseSessionKey,
  parseSessionPath,
  SESSION_ID_MAX_LENGTH,
  sessionKey,
  sessionPath,
  sessionUrl,
  writeRefusal,
} from "./session-endpoint.js";

describe("session auth", () => {
  it("hashes to 64 lowercase hex and matches only the right secret", () => {
    const s = newSecret();
    const h = hashSecret(s);
    expect(isSecretHash(h)).toBe(true);
    expect(h).toBe(hashSecret(s));
    expect(secretMatches(s, h)).toBe(true);
    expect(secretMatches(s + "x", h)).toBe(false);
    expect(secretMatches(s, "abcd")).toBe(false);
    expect(hashSecret("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });

  it("reads back the bearer header it writes, and nothing malformed", () => {
    expect(bearerSecret(bearerHeader("s3cr3t"))).toBe("s3cr3t");
    expect(bearerSecret({ authorization: "bearer   tok  " })).toBe("tok");
    expect(bearerSecret({ authorization: "Basic abc" })).toBeUndefined();
    expect(bearerSecret({ authorization: "Bearer a b" })).toBeUndefined();
    expect(bearerSecret({})).toBeUndefined();
  });
});

describe("session endpoint", () => {
  it("parses session paths and nothing else", () => {
    expect(parseSessionPath("/v1/sessions/mc-0123456789abcdef-east")).toBe("mc-0123456789abcdef-east");
    expect(parseSessionPath("/v1/sessions/ns:name?x=1")).toBe("ns:name");
    expect(parseSessionPath(sessionPath("abc"))).toBe("abc");
    for (const bad of ["/v1/sessions/", "/v1/sessions/a/b", "/v2/sessions/a", "/v1/sessions/-a", undefined])
      expect(parseSessionPath(bad)).toBeUndefined();
    expect(parseSessionPath("/v1/sessions/" + "a".repeat(317))).toBe("a".repeat(317));
    expect(parseSessionPath("/v1/sessions/" + "a".repeat(318))).toBeUndefined();
  });

  it("keys a session object by namespace and name, which no other object shares", () => {
    expect(sessionKey("shop", "mc-0123456789abcdef")).toBe("shop:mc-0123456789abcdef");
    expect(sessionKey("shop", "mc-0123456789abcdef")).not.toBe(sessionKey("tenant-b", "mc-0123456789abcdef"));
    expect(parseSessionKey("shop:mc-0123456789abcdef-east")).toEqual({
      namespace: "shop",
      name: "mc-0123456789abcdef-east",
    });
    const longest = sessionKey("n".repeat(63), "a".repeat(253));
    expect(longest).toHaveLength(SESSION_ID_MAX_LENGTH);
    expect(parseSessionPath(sessionPath(longest))).toBe(longest);
    for (const [ns, name] of [
      ["Shop", "x"],
      ["a:b", "x"],
      ["shop", "x:y"],
      ["shop", ""],
      ["", "x"],
      ["shop", "a".repeat(254)],
    ])
      expect(() => sessionKey(ns!, name!)).toThrow(/RFC 1123 label/);
    for (const bad of ["mc-0123456789abcdef", "shop:", ":x", "Shop:x", "shop:x:y"])
      expect(parseSessionKey(bad)).toBeUndefined();
  });

  it("builds session URLs on a base, keeping a full session URL", () => {
    expect(sessionUrl("wss://gw.example:8443", "s1")).toBe("wss://gw.example:8443/v1/sessions/s1");
    expect(sessionUrl("ws://127.0.0.1:1/", "s1")).toBe("ws://127.0.0.1:1/v1/sessions/s1");
    expect(sessionUrl("ws://h:1/v1/sessions/other", "s1")).toBe("ws://h:1/v1/sessions/other");
  });

  it("writes a refusal that parseRefusal reads back over real HTTP", async () => {
    const server = createServer();
    server.on("upgrade", (_req, socket) =>
      writeRefusal(socket, 503, ErrorCode.ROUTER_NOT_READY, "retry shortly", 2),
    );
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const { port } = server.address() as AddressInfo;
      const refusal = await new Promise<ReturnType<typeof parseRefusal>>((resolve, reject) => {
        const req = request({
          port,
          host: "127.0.0.1",
          headers: { connection: "Upgrade", upgrade: "websocket" },
        });
        req.on("response", (res) => {
          let body = "";
          res.on("data", (c: Buffer) => (body += c.toString()));
          res.on("end", () => resolve(parseRefusal(res.statusCode ?? 0, body, res.headers["retry-after"])));
        });
        req.on("error", reject);
        req.end();
      });
      expect(refusal).toEqual({
        status: 503,
        code: "SWITCHYARD_ROUTER_NOT_READY",
        message: "retry shortly",
        retryAfterMs: 2000,
      });
    } finally {
      server.close();
    }
  });

  it("keeps a body that is not JSON as the message", () => {
    expect(parseRefusal(502, "Bad Gateway")).toEqual({ status: 502, code: "", message: "Bad Gateway" });
  });
});

describe("error frames", () => {
  it("encode a catalogue code with its context", () => {
    const f = decodeFrame(
      errorFrame(ErrorCode.UNKNOWN_CONNECTION, "no such connection", {
        requestId: 7,
        cluster: "east",
        family: 8,
        kind: 2,
      }),
    );
    expect(f.header).toMatchObject({ family: FrameFamily.CONTROL, kind: ControlKind.ERROR, requestId: 7 });
    expect(f.message as ProtocolError).toMatchObject({
      code: "SWITCHYARD_UNKNOWN_CONNECTION",
      message: "no such connection",
      cluster: "east",
      frameFamily: 8,
      frameKind: 2,
    });
    expect(isErrorCode("SWITCHYARD_UNKNOWN_CONNECTION")).toBe(true);
    expect(isErrorCode("SWITCHYARD_NOPE")).toBe(false);
  });
});
