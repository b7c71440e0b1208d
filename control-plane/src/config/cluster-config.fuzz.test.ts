// Fuzz of clusters-config.yaml (fast-check): mutated documents (fields removed, wrong types,
// hostile and huge strings, unknown keys), YAML that does not parse and arbitrary values all
// end in either a valid configuration or ClusterConfigErrors whose every entry names a field
// of the document and a fix, in a message of bounded size with no stack trace. Never another
// exception: a crash-looping control plane must say what to change.
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { createCertificateAuthority } from "../../../test/env/pki.js";
import { FUZZ_SEED, fuzzParameters } from "../../../test/support/fuzz-parameters.js";
import { dottedPath, mutatedJson, type Json } from "../../../test/support/mutated-json.js";
import { DNS_LABEL, parseClusterConfig, validateClusterConfig } from "./cluster-config.js";
import { ClusterConfigError, ClusterConfigErrors } from "./cluster-config-error.js";

let valid: Json;
beforeAll(async () => {
  const caData = Buffer.from((await createCertificateAuthority("fuzz-ca")).certPem).toString("base64");
  valid = {
    enabled: true,
    clusterName: "primary",
    defaultCluster: "east",
    managementOnly: false,
    clusters: {
      east: { authType: "bearerToken", server: "https://api.east.example.com:6443", caData, isDefault: true },
      Prod_EKS: {
        authType: "eks",
        server: "https://abc123.gr7.eu-north-1.eks.amazonaws.com",
        caData,
        region: "eu-north-1",
      },
      onprem: { authType: "mtls", server: "https://10.0.0.1:6443", caData, namespace: "tools" },
    },
  };
});

/** Longest message an error may carry: values are quoted, never pasted whole. */
const MAX_MESSAGE = 2_000;

/** Runs `fn`; returns the errors it reported, or [] when it accepted. Fails on any other throw. */
function outcome(fn: () => unknown): ClusterConfigError[] {
  try {
    fn();
    return [];
  } catch (err) {
    if (!(err instanceof ClusterConfigErrors))
      throw new Error(`expected ClusterConfigErrors, got ${String(err)}`, { cause: err });
    return [...err.errors];
  }
}

function expectPrecise(errors: ClusterConfigError[], topLevelKeys: readonly string[]): void {
  for (const e of errors) {
    expect(e).toBeInstanceOf(ClusterConfigError);
    expect(e.code).toMatch(/^SWITCHYARD_CLUSTER_CONFIG_(INVALID|MISSING)$/);
    expect(e.field, e.message).not.toBe("");
    expect(e.fix, e.message).not.toBe("");
    expect(e.message).toContain(`${e.field}: `);
    expect(e.message).toContain(". Fix: ");
    expect(e.message.length, e.message.slice(0, 300)).toBeLessThanOrEqual(MAX_MESSAGE);
    expect(e.message).not.toMatch(/\n\s+at /);
    // The field is the document, the YAML key, a top-level field or clusters.<key>[.<field>].
    const root = e.field.split(".")[0]!;
    expect(["(document)", "clusters-config", ...topLevelKeys], e.message).toContain(root);
  }
}

describe(`clusters-config.yaml under fuzz (seed ${FUZZ_SEED})`, () => {
  const keys = ["enabled", "clusterName", "defaultCluster", "managementOnly", "clusters"];

  it("mutated documents are accepted consistently or refused naming the field and the fix", () => {
    const tally = { accepted: 0, refused: 0, named: 0 };
    fc.assert(
      fc.property(mutatedJson(valid, { maxMutations: 3 }), ({ value, mutations }) => {
        const errors = outcome(() => validateClusterConfig(value));
        expectPrecise(errors, keys);
        if (errors.length === 0) {
          tally.accepted++;
          const c = validateClusterConfig(value);
          if (!c.enabled) return;
          for (const r of c.remotes) {
            expect(r.name).toMatch(DNS_LABEL);
            expect(r.server).toMatch(/^https:\/\//);
          }
          expect([c.clusterName, ...c.remotes.map((r) => r.name)]).toContain(c.defaultCluster);
          return;
        }
        tally.refused++;
        // A refusal caused only by top-level mutations names one of the mutated fields.
        const touched = mutations.map((m) => dottedPath(m.path));
        if (touched.some((t) => errors.some((e) => e.field.startsWith(t) || t.startsWith(e.field))))
          tally.named++;
      }),
      fuzzParameters(400),
    );
    expect(tally.refused).toBeGreaterThan(0);
    expect(tally.named / tally.refused).toBeGreaterThan(0.8);
  });

  it("the same documents as YAML text parse to the same outcome", () => {
    fc.assert(
      fc.property(mutatedJson(valid, { maxMutations: 2 }), ({ value }) => {
        const text = stringify(value);
        const direct = outcome(() => validateClusterConfig(value)).map((e) => e.message);
        const parsed = outcome(() => parseClusterConfig(text)).map((e) => e.message);
        expect(parsed).toEqual(direct);
      }),
      fuzzParameters(150),
    );
  });

  it("arbitrary values and broken YAML are refused with a field, never a crash", () => {
    const text = fc.oneof(
      fc.string({ unit: "binary", maxLength: 200 }),
      fc.jsonValue({ maxDepth: 3 }).map((v) => stringify(v)),
      fc.constantFrom(
        "enabled: [true",
        "clusters: !!binary AAAA",
        "a: &x 1\nb: *y",
        "? [a]\n: b",
        "clusters:\n  east: *a",
        "---\nenabled: true\n---\nenabled: false",
        "enabled: true\nclusterName: primary\nclusters: [east]",
        "enabled: true\nclusters:\n  __proto__: {authType: mtls}",
        "enabled: yes",
        "\t- x",
        "%YAML 9.9\n---\n{}",
      ),
    );
    fc.assert(
      fc.property(text, (t) => {
        expectPrecise(
          outcome(() => parseClusterConfig(t)),
          keys,
        );
      }),
      fuzzParameters(400),
    );
  });

  it("a huge value is quoted in part, not pasted whole into the message", () => {
    const huge = "x".repeat(300_000);
    const errors = outcome(() =>
      validateClusterConfig({ enabled: true, clusterName: huge, defaultCluster: huge }),
    );
    expect(errors.map((e) => e.field)).toEqual(["clusterName", "defaultCluster"]);
    for (const e of errors) expect(e.message.length).toBeLessThanOrEqual(MAX_MESSAGE);
  });
});
