// The member's agent flags: how agents are provisioned (a sidecar in the target's pods, or a
// process on this host in the embedded environment) and how routers reach them. Rendered by
// the chart (values `agent.*`, `tls.*`); every error names the flag and the fix.
import { isIP } from "node:net";
import { Option, type Command } from "commander";
import { OptionError } from "../../../lib/option-error.js";
import { DNS_SUBDOMAIN, readFlagFile, type FeatureFlags, type FlagValues } from "../runtime/index.js";
import { MAX_LINGER_SECONDS } from "./agent-linger.js";

export interface AgentOptions {
  /** How agents are provisioned. */
  provisioner: "sidecar" | "process";
  /** Process provisioner: kubeconfig the agents read their pod with. */
  kubeconfig: string | undefined;
  /** Process provisioner: `--outbound-bind` of the agents. */
  outboundBind: string | undefined;
  /** Process provisioner: extra flags for every agent (e.g. --app-host=127.0.0.2). */
  extraArgs: string[];
  /** Process provisioner: where agent records and logs live (one directory per control plane). */
  stateDir: string | undefined;
  /** Process provisioner: agents take app port P's traffic on P + offset (0 = ephemeral). */
  trafficPortOffset: number;
  /** Sidecar provisioner: the agent image. */
  image: string | undefined;
  /**
   * Sidecar provisioner: seconds an idle agent stays in the workload after the last session on
   * it ended (0 = restore at once, -1 = until removed; default 900). A session that starts
   * meanwhile attaches with no template change. A workload's `switchyard.dev/agent-linger-seconds`
   * annotation overrides it.
   */
  lingerSeconds: number;
  /** Sidecar provisioner: the image of the iptables redirect init container (sh + iptables). */
  redirectImage: string | undefined;
  /** Sidecar provisioner: kubernetes.io/tls Secret (in each target namespace) the agents serve wss:// with. */
  tlsSecret: string | undefined;
  /**
   * Sidecar provisioner with tlsSecret: the DNS name the agents' certificate carries; routers
   * dial agents by pod IP and verify the certificate against this name instead (default
   * "switchyard-agent"; undefined without tlsSecret).
   */
  tlsServerName: string | undefined;
  /** PEM CA routers verify wss:// agents with (in the routing table; default none = system trust). */
  caPem: string | undefined;
}

/** Seconds an idle sidecar agent stays unless --agent-linger-seconds says otherwise (15 minutes). */
export const DEFAULT_AGENT_LINGER_SECONDS = 900;

/** DNS name agent certificates carry unless --agent-tls-server-name says otherwise. */
export const DEFAULT_AGENT_TLS_SERVER_NAME = "switchyard-agent";

function add(cmd: Command): Command {
  return cmd
    .addOption(
      new Option("--agent-provisioner <kind>", "sidecar | process")
        .choices(["sidecar", "process"])
        .default("sidecar"),
    )
    .option("--agent-kubeconfig <path>", "process provisioner: kubeconfig the agents use")
    .option(
      "--agent-outbound-bind <ip>",
      "process provisioner: source address of agents' outgoing connections",
    )
    .option("--agent-extra-arg <flag...>", "process provisioner: extra flag for every agent (repeatable)")
    .option(
      "--agent-state-dir <dir>",
      "process provisioner: agent records and logs, a private directory (mode 0700, this user's; " +
        "default: per cluster under $XDG_RUNTIME_DIR/switchyard-agents, else <tmpdir>/switchyard-agents-<uid>)",
    )
    .option(
      "--agent-traffic-port-offset <n>",
      "process provisioner: agents take port P's traffic on P+n",
      "0",
    )
    .option("--agent-image <image>", "sidecar provisioner: agent container image")
    .option(
      "--agent-linger-seconds <n>",
      "sidecar provisioner: seconds an idle agent stays after the last session (0 = restore at once, -1 = until removed)",
      String(DEFAULT_AGENT_LINGER_SECONDS),
    )
    .option(
      "--redirect-image <image>",
      "sidecar provisioner: image (sh, iptables) of the redirect init container",
    )
    .option(
      "--agent-tls-secret <name>",
      "sidecar provisioner: kubernetes.io/tls Secret in each target namespace; agents serve wss:// with it",
    )
    .option(
      "--agent-tls-server-name <name>",
      `DNS name the agents' certificate carries; routers verify agents (dialled by pod IP) against it (default ${DEFAULT_AGENT_TLS_SERVER_NAME} with --agent-tls-secret)`,
    )
    .option("--agent-ca <file>", "PEM CA bundle routers verify wss:// agents with");
}

function tlsServerName(secret: string | undefined, flag: string | undefined): string | undefined {
  if (flag !== undefined) {
    if (secret === undefined)
      throw new OptionError(
        "--agent-tls-server-name",
        "names the agents' certificate, but without --agent-tls-secret agents serve plaintext ws://: give --agent-tls-secret too, or drop the flag",
      );
    if (isIP(flag) !== 0 || !DNS_SUBDOMAIN.test(flag))
      throw new OptionError(
        "--agent-tls-server-name",
        `"${flag}" is not a DNS name (lowercase letters, digits, '-' and '.'; not an IP address): give a name the agents' certificate carries as a DNS SAN, e.g. ${DEFAULT_AGENT_TLS_SERVER_NAME}`,
      );
  }
  return secret === undefined ? undefined : (flag ?? DEFAULT_AGENT_TLS_SERVER_NAME);
}

function parse(o: FlagValues): AgentOptions {
  const provisioner = o.agentProvisioner as "sidecar" | "process";
  if (provisioner === "process" && !o.agentKubeconfig) {
    throw new OptionError("--agent-kubeconfig", "the process provisioner needs a kubeconfig for its agents");
  }
  const tlsSecret = o.agentTlsSecret as string | undefined;
  if (tlsSecret !== undefined) {
    if (provisioner !== "sidecar")
      throw new OptionError(
        "--agent-tls-secret",
        "is mounted into sidecar agents; process agents serve plaintext on this host (use --agent-provisioner=sidecar or drop the flag)",
      );
    if (!DNS_SUBDOMAIN.test(tlsSecret))
      throw new OptionError("--agent-tls-secret", `"${tlsSecret}" is not a Secret name`);
  }
  const agentCa = o.agentCa as string | undefined;
  if (agentCa !== undefined && tlsSecret === undefined) {
    throw new OptionError(
      "--agent-ca",
      "verifies agents serving wss://, but without --agent-tls-secret agents serve plaintext ws://: give both or neither",
    );
  }
  const offset = Number(o.agentTrafficPortOffset);
  if (!Number.isInteger(offset) || offset < 0 || offset > 60000) {
    throw new OptionError(
      "--agent-traffic-port-offset",
      `must be an integer 0-60000, got "${o.agentTrafficPortOffset as string}"`,
    );
  }
  const lingerSeconds = Number(o.agentLingerSeconds);
  if (!Number.isInteger(lingerSeconds) || lingerSeconds < -1 || lingerSeconds > MAX_LINGER_SECONDS) {
    throw new OptionError(
      "--agent-linger-seconds",
      `must be an integer from -1 (until removed) to ${MAX_LINGER_SECONDS} (30 days), got "${o.agentLingerSeconds as string}"`,
    );
  }
  return {
    provisioner,
    kubeconfig: o.agentKubeconfig as string | undefined,
    outboundBind: o.agentOutboundBind as string | undefined,
    extraArgs: (o.agentExtraArg as string[] | undefined) ?? [],
    trafficPortOffset: offset,
    stateDir: o.agentStateDir as string | undefined,
    image: o.agentImage as string | undefined,
    lingerSeconds,
    redirectImage: o.redirectImage as string | undefined,
    tlsSecret,
    tlsServerName: tlsServerName(tlsSecret, o.agentTlsServerName as string | undefined),
    caPem: agentCa !== undefined ? readFlagFile("--agent-ca", agentCa) : undefined,
  };
}

export const agentFlags: FeatureFlags<AgentOptions> = { add, parse };
