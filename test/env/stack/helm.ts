// Runs the real helm binary (test/env builds it) against charts/switchyard with values given as
// objects, in a private HELM_* home so tests never read or write the developer's helm state.
// Also parses rendered manifests, so tests assert on objects rather than on text.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { binaryPath, ensureBinaries } from "../binaries.js";

export const chartDir = resolve(dirname(fileURLToPath(import.meta.url)), "../../../charts/switchyard");

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** A Kubernetes object as rendered by the chart (only the fields tests look at are typed). */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

export class Helm {
  private counter = 0;

  /** `home`: helm's private HOME (default a fresh temp directory); close() removes it. */
  private constructor(private readonly home: string) {
    mkdirSync(home, { recursive: true });
  }

  static async create(home?: string): Promise<Helm> {
    await ensureBinaries(["helm"]);
    return new Helm(home ?? mkdtempSync(join(tmpdir(), "switchyard-helm-")));
  }

  /** Runs helm with `args`; each entry of `values` becomes a `-f` file (later ones win). */
  run(args: readonly string[], values: readonly object[] = []): Promise<HelmResult> {
    const files = values.map((v) => {
      // JSON is YAML that no YAML 1.1 parser reinterprets ("yes", "on", "0755" stay strings).
      const file = join(this.home, `values-${++this.counter}.json`);
      writeFileSync(file, JSON.stringify(v));
      return file;
    });
    const env = {
      PATH: process.env.PATH ?? "",
      HOME: this.home,
      HELM_CACHE_HOME: join(this.home, "cache"),
      HELM_CONFIG_HOME: join(this.home, "config"),
      HELM_DATA_HOME: join(this.home, "data"),
    };
    return new Promise((resolvePromise) => {
      execFile(
        binaryPath("helm"),
        [...args, ...files.flatMap((f) => ["-f", f])],
        { env, maxBuffer: 64 * 1024 * 1024 },
        (err, stdout, stderr) => {
          const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
          resolvePromise({ code, stdout, stderr });
        },
      );
    });
  }

  /** `helm template` the chart; resolves with the manifests, rejects with stderr on failure. */
  async template(values: object = {}, namespace = "switchyard"): Promise<Manifest[]> {
    const r = await this.run(["template", "switchyard", chartDir, "--namespace", namespace], [values]);
    if (r.code !== 0) throw new Error(`helm template failed (${r.code}):\n${r.stderr}`);
    return parseManifests(r.stdout);
  }

  close(): void {
    rmSync(this.home, { recursive: true, force: true });
  }
}

export function parseManifests(text: string): Manifest[] {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as Manifest | null)
    .filter((m): m is Manifest => m !== null && typeof m === "object" && "kind" in m);
}

export function find(manifests: readonly Manifest[], kind: string, name: string): Manifest {
  const m = manifests.find((x) => x.kind === kind && x.metadata.name === name);
  if (!m)
    throw new Error(
      `no ${kind}/${name} rendered; got ${manifests.map((x) => `${x.kind}/${x.metadata.name}`).join(", ")}`,
    );
  return m;
}
