// Kept-alive connections for a KubeConfig's API calls. client-node (1.x) builds a new
// https.Agent for every request it sends through `makeApiClient`, so every GET, PATCH and
// CREATE pays a TCP connect and a full TLS handshake (a fresh secure context, the CA parsed
// again) — under many sessions most of the control plane's CPU and a round trip of every
// call. `reuseConnections` makes those requests share kept-alive agents: one per distinct TLS
// identity (CA, client certificate and key, server name, verification), so a renewed client
// certificate gets new connections while a renewed bearer token (a header) keeps them. Watches
// (client-node's Watch) are long-lived and keep their own connection each.
import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent, type AgentOptions } from "node:https";
import type { KubeConfig, RequestContext } from "@kubernetes/client-node";

/** A kept-alive connection unused this long is closed (ms). */
export const IDLE_CONNECTION_MS = 30_000;
/** Agents kept per KubeConfig; an older identity's agent is dropped (its idle sockets then time out). */
const MAX_IDENTITIES = 4;
/** The options that make a connection's TLS identity: requests differing only elsewhere share sockets. */
const IDENTITY = ["ca", "cert", "key", "pfx", "passphrase", "rejectUnauthorized", "servername"] as const;

const reused = new WeakSet<KubeConfig>();

/** Makes `kc`'s API requests share kept-alive agents (idempotent); returns `kc`. */
export function reuseConnections(kc: KubeConfig): KubeConfig {
  if (reused.has(kc)) return kc;
  reused.add(kc);
  const agents = new Map<string, HttpAgent>();
  const apply = kc.applySecurityAuthentication.bind(kc);
  kc.applySecurityAuthentication = async (context: RequestContext) => {
    await apply(context);
    const shared = sharedAgent(agents, context.getAgent());
    if (shared) context.setAgent(shared);
  };
  return kc;
}

/** The kept-alive agent for the TLS identity of `fresh` (the per-request agent client-node made). */
function sharedAgent(agents: Map<string, HttpAgent>, fresh: unknown): HttpAgent | undefined {
  // Proxy agents (socks, hpagent) are subclasses: left as they are.
  const kind = fresh?.constructor === HttpsAgent ? "https" : fresh?.constructor === HttpAgent ? "http" : "";
  if (!kind) return undefined;
  const options = (fresh as HttpAgent & { options: AgentOptions }).options;
  const identity: Partial<AgentOptions> = {};
  const parts: string[] = [kind];
  for (const k of IDENTITY) {
    const v: unknown = options[k];
    if (v === undefined) continue;
    Object.assign(identity, { [k]: v });
    parts.push(
      `${k}=${Buffer.isBuffer(v) ? v.toString("base64") : typeof v === "string" ? v : JSON.stringify(v)}`,
    );
  }
  // The PEMs themselves (a few KiB): cheaper per call than hashing them, and never logged.
  const key = parts.join("\n");
  let agent = agents.get(key);
  if (!agent) {
    const common = { keepAlive: true, timeout: IDLE_CONNECTION_MS, scheduling: "lifo" as const };
    agent = kind === "https" ? new HttpsAgent({ ...identity, ...common }) : new HttpAgent(common);
    agents.set(key, agent);
    // Oldest identity out (a renewed certificate replaced it): its idle sockets close on their timeout.
    if (agents.size > MAX_IDENTITIES) agents.delete(agents.keys().next().value!);
  } else {
    // Most recently used last, so eviction drops what is no longer used.
    agents.delete(key);
    agents.set(key, agent);
  }
  return agent;
}
