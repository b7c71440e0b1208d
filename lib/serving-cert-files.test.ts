import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createCertificateAuthority } from "../test/env/pki.js";
import { watchServingCert, type ServingCertPem } from "./serving-cert-files.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), "serving-cert-"));
  dirs.push(dir);
  const ca = await createCertificateAuthority("unit");
  const issue = () => ca.issue({ commonName: "webhook", usage: "server", dnsNames: ["webhook"] });
  const files = { certFile: join(dir, "tls.crt"), keyFile: join(dir, "tls.key") };
  const write = (p: { certPem: string; keyPem: string }) => {
    writeFileSync(files.certFile, p.certPem);
    writeFileSync(files.keyFile, p.keyPem);
  };
  return { files, issue, write };
}

describe("watchServingCert", () => {
  it("applies a renewed pair once, and nothing while the files stay the same", async () => {
    const { files, issue, write } = await setup();
    const first = await issue();
    write(first);
    const applied: ServingCertPem[] = [];
    const w = watchServingCert(files, first, (p) => applied.push(p), { intervalMs: 60_000 });
    try {
      await w.check();
      expect(applied).toEqual([]);
      const renewed = await issue();
      write(renewed);
      await w.check();
      await w.check();
      expect(applied).toEqual([renewed]);
    } finally {
      w.stop();
    }
  });

  it("keeps the pair in use when the new files do not match, says why once, and applies them once they do", async () => {
    const { files, issue, write } = await setup();
    const first = await issue();
    write(first);
    const applied: ServingCertPem[] = [];
    const errors: string[] = [];
    const w = watchServingCert(files, first, (p) => applied.push(p), {
      intervalMs: 60_000,
      onError: (m) => errors.push(m),
    });
    try {
      const renewed = await issue();
      // Half-way through a renewal: the new certificate beside the old key.
      writeFileSync(files.certFile, renewed.certPem);
      await w.check();
      await w.check();
      expect(applied).toEqual([]);
      expect(errors).toHaveLength(1);
      expect(errors[0]).toContain("do not make a serving certificate");
      expect(errors[0]).not.toContain("PRIVATE KEY");
      writeFileSync(files.keyFile, renewed.keyPem);
      await w.check();
      expect(applied).toEqual([renewed]);
    } finally {
      w.stop();
    }
  });

  it("reports a missing file and recovers when it is back", async () => {
    const { files, issue, write } = await setup();
    const first = await issue();
    const errors: string[] = [];
    const applied: ServingCertPem[] = [];
    const w = watchServingCert(files, first, (p) => applied.push(p), {
      intervalMs: 60_000,
      onError: (m) => errors.push(m),
    });
    try {
      await w.check();
      expect(errors[0]).toContain("ENOENT");
      const renewed = await issue();
      write(renewed);
      await w.check();
      expect(applied).toEqual([renewed]);
    } finally {
      w.stop();
    }
  });
});
