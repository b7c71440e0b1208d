import { describe, expect, it } from "vitest";
import { createCertificateAuthority } from "../../../test/env/pki.js";
import { ManualClock } from "./clock.js";
import type { RequestCredentials } from "./credential-source.js";
import { MtlsCredentialSource } from "./mtls-credential-source.js";

describe("MtlsCredentialSource", () => {
  it("puts the pair on requests, reloads it, and warns then errors as expiry nears", async () => {
    const ca = await createCertificateAuthority("unit");
    const a = await ca.issue({ commonName: "a", usage: "client", validForSeconds: 30 * 86_400 });
    const b = await ca.issue({ commonName: "b", usage: "client", validForSeconds: 3_600 });
    const clock = new ManualClock();
    const s = new MtlsCredentialSource({
      cluster: "on",
      certPem: a.certPem,
      keyPem: a.keyPem,
      clock,
      warnBeforeExpiryMs: 7_200_000,
    });
    const opts: RequestCredentials = {};
    await s.apply(opts);
    expect(opts).toEqual({ cert: a.certPem, key: a.keyPem });
    expect(s.status().warning).toBeUndefined();
    s.update(b.certPem, b.keyPem);
    await s.apply(opts);
    expect(opts.cert).toBe(b.certPem);
    expect(s.status().warning).toMatch(/client certificate expires at \d{4}-.*rotate/);
    clock.advance(3_700_000);
    expect(s.status().error).toMatch(/client certificate expired at/);
  });
});
