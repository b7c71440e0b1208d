// The per-agent secret (DESIGN §6: workload router → agent). One random secret per
// target, kept in a Kubernetes Secret — in the control plane's own namespace when one is
// configured (so the control plane needs no Secret access in workload namespaces), else in
// the target's namespace — so a restarted control plane finds the same one (agents keep running and keep accepting it). Only its
// sha256 goes to the agent; the secret itself goes into this member's routing table.
// Never logged.
import { createHash } from "node:crypto";
import { ApiException, CoreV1Api, type KubeConfig, type V1Secret } from "@kubernetes/client-node";
import { GROUP } from "../../../proto/api/v1alpha1/index.js";
import { hashSecret, newSecret } from "../../../proto/session-auth.js";

export const AGENT_SECRET_LABEL = `${GROUP}/agent-secret`;
export const AGENT_TARGET_ANNOTATION = `${GROUP}/agent-target`;

export interface AgentSecret {
  secret: string;
  hash: string;
}

/** sha256 hex of an id, for stable names derived from it (Secret names, agent ids); secrets use hashSecret. */
export function sha256Hex(s: string): string {
  return createHash("sha256").update(s, "utf8").digest("hex");
}

/** Name of the Secret holding the agent secret of target `id` (`ns/kind/name`). */
export function agentSecretName(id: string): string {
  return `switchyard-agent-${sha256Hex(id).slice(0, 20)}`;
}

export class AgentSecretStore {
  readonly #core: CoreV1Api;

  readonly #namespace: string | undefined;

  /** `namespace`: where every agent Secret lives (names are unique per target id). */
  constructor(kc: KubeConfig, namespace?: string) {
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#namespace = namespace;
  }

  /** The target's secret, created on first use. */
  async ensure(targetNamespace: string, id: string): Promise<AgentSecret> {
    const namespace = this.#namespace ?? targetNamespace;
    const name = agentSecretName(id);
    const existing = await this.#read(namespace, name);
    if (existing) return existing;
    const secret = newSecret();
    const body: V1Secret = {
      metadata: {
        name,
        namespace,
        labels: { [AGENT_SECRET_LABEL]: "true", "app.kubernetes.io/managed-by": "switchyard" },
        annotations: { [AGENT_TARGET_ANNOTATION]: id },
      },
      type: "Opaque",
      data: { secret: Buffer.from(secret, "utf8").toString("base64") },
    };
    try {
      await this.#core.createNamespacedSecret({ namespace, body });
      return { secret, hash: hashSecret(secret) };
    } catch (err) {
      // Another writer won the race: use theirs.
      if (err instanceof ApiException && err.code === 409) {
        const again = await this.#read(namespace, name);
        if (again) return again;
      }
      throw err;
    }
  }

  async delete(targetNamespace: string, id: string): Promise<void> {
    const namespace = this.#namespace ?? targetNamespace;
    try {
      await this.#core.deleteNamespacedSecret({ namespace, name: agentSecretName(id) });
    } catch (err) {
      if (!(err instanceof ApiException && err.code === 404)) throw err;
    }
  }

  async #read(namespace: string, name: string): Promise<AgentSecret | undefined> {
    try {
      const s = await this.#core.readNamespacedSecret({ namespace, name });
      const b64 = s.data?.secret;
      if (!b64) return undefined;
      const secret = Buffer.from(b64, "base64").toString("utf8");
      return { secret, hash: hashSecret(secret) };
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw err;
    }
  }
}
