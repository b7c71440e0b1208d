// Property: for any multi-cluster document, `helm template` accepts it exactly when the control
// plane's validator does, and when both refuse it, every error the control plane reports appears
// verbatim in helm's message (field paths prefixed with "multiCluster."). This keeps DESIGN §1
// enforced identically at install time and at start-up, including rules nobody wrote a case for.
import fc from "fast-check";
import { afterAll, beforeAll, expect, it } from "vitest";
import { validateClusterConfig } from "../../../control-plane/src/config/cluster-config.js";
import { ClusterConfigErrors } from "../../../control-plane/src/config/cluster-config-error.js";
import { createCertificateAuthority } from "../../env/index.js";
import { chartDir, Helm } from "../../env/stack/helm.js";

const ca = await createCertificateAuthority("parity-ca");
const validCaData = Buffer.from(ca.certPem).toString("base64");

let helm: Helm;
beforeAll(async () => {
  helm = await Helm.create();
});
afterAll(() => helm?.close());

const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const cluster = fc.record(
  {
    // Valid values repeated so that fully valid documents are common too.
    authType: maybe(fc.constantFrom("bearerToken", "bearerToken", "mtls", "mtls", "eks", "EKS", "token")),
    server: maybe(
      fc.constantFrom(
        "https://api.example.com:6443",
        "http://api.example.com",
        "https://abc.gr7.eu-north-1.eks.amazonaws.com",
      ),
    ),
    caData: maybe(fc.constantFrom(validCaData, validCaData, Buffer.from("not a cert").toString("base64"))),
    region: maybe(fc.constantFrom("eu-north-1", "north")),
    namespace: maybe(fc.constantFrom("switchyard", "switchyard", "Bad_NS")),
    isDefault: maybe(fc.boolean()),
  },
  { requiredKeys: [] },
);
// EKS names (capitals, '_') are valid keys of eks clusters only; "Prod_East" and "prod-east",
// and "Primary" and the Primary, become the same cluster name.
const names = ["Bad_1", "east", "primary", "west", "south", "Prod_East", "prod-east", "Primary"].sort(); // byte order = the order both sides list them in
const doc = fc.record({
  enabled: fc.boolean(),
  clusterName: maybe(fc.constantFrom("primary", "Bad_Primary")),
  defaultCluster: maybe(fc.constantFrom("primary", "east", "west", "nowhere", "Prod_East", "prod-east")),
  managementOnly: fc.boolean(),
  clusters: fc
    .subarray(names)
    .chain((keys) =>
      fc.tuple(...keys.map(() => cluster)).map((cs) => Object.fromEntries(keys.map((k, i) => [k, cs[i]]))),
    ),
});

const tally = { accepted: 0, refused: 0 };
// Near-valid documents, so acceptance is exercised as often as refusal.
const nearValid = fc
  .record({
    managementOnly: fc.boolean(),
    keys: fc.subarray(["Prod_East", "east", "south", "west"], { minLength: 1 }),
    authTypes: fc.array(fc.constantFrom("bearerToken", "mtls", "eks"), { minLength: 4, maxLength: 4 }),
    pick: fc.nat(),
  })
  .map(({ managementOnly, keys, authTypes, pick }) => ({
    enabled: true,
    clusterName: "primary",
    managementOnly,
    defaultCluster: ["primary", ...keys][pick % (keys.length + 1)],
    clusters: Object.fromEntries(
      keys.map((k, i) => [
        k,
        {
          authType: authTypes[i],
          server: "https://abc.gr7.eu-north-1.eks.amazonaws.com",
          caData: validCaData,
        },
      ]),
    ),
  }));

/** Drops undefined fields, the way a values file simply omits them. */
const clean = (v: unknown): unknown => JSON.parse(JSON.stringify(v));

it("helm and the control plane accept and refuse the same multi-cluster documents, with the same errors", async () => {
  await fc.assert(
    fc.asyncProperty(fc.oneof(doc, nearValid), async (raw) => {
      const multiCluster = clean(raw) as Record<string, unknown>;
      let cpErrors: string[] = [];
      try {
        validateClusterConfig(structuredClone(multiCluster));
      } catch (err) {
        if (!(err instanceof ClusterConfigErrors)) throw err;
        cpErrors = err.errors.map((e) => `multiCluster.${e.field}: ${e.problem}. Fix: ${e.fix}`);
      }
      if (multiCluster.enabled) tally[cpErrors.length === 0 ? "accepted" : "refused"] += 1;
      const r = await helm.run(
        ["template", "switchyard", chartDir, "--namespace", "switchyard"],
        [{ multiCluster }],
      );
      if (cpErrors.length === 0)
        expect(r.code, `helm refused what the control plane accepts:\n${r.stderr}`).toBe(0);
      else {
        expect(r.code, `helm accepted what the control plane refuses: ${cpErrors.join("; ")}`).not.toBe(0);
        for (const e of cpErrors) expect(r.stderr).toContain(e);
      }
    }),
    { numRuns: 80 },
  );
  // Both outcomes were exercised with multi-cluster on (not only disabled documents).
  console.info(`parity: ${tally.accepted} enabled documents accepted, ${tally.refused} refused`);
  expect(tally.refused).toBeGreaterThan(0);
  expect(tally.accepted).toBeGreaterThan(0);
});
