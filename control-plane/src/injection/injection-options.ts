// The admission webhook's flag: `--injection-listen <addr>` turns it on (member or both mode,
// sidecar provisioner). The API server calls webhooks over HTTPS only, so it serves with the
// control plane's own certificate (--tls-cert/--tls-key, the chart's TLS Secret).
import type { Command } from "commander";
import { OptionError } from "../../../lib/option-error.js";
import { parseListen, type FeatureFlags, type ListenAddress } from "../runtime/index.js";

export interface InjectionOptions {
  /** Where the webhook listens; undefined = no webhook (default). */
  listen: ListenAddress | undefined;
}

export const injectionFlags: FeatureFlags<InjectionOptions> = {
  add: (cmd: Command) =>
    cmd.option(
      "--injection-listen <addr>",
      "member: listen address of the admission webhook giving opted-in pods the agent at birth (HTTPS; default: off)",
    ),
  parse(o, mode) {
    const flag = o.injectionListen as string | undefined;
    if (flag === undefined) return { listen: undefined };
    if (mode === "primary" || o.agentProvisioner !== "sidecar")
      throw new OptionError(
        "--injection-listen",
        "gives pods the sidecar agent: it runs in member or both mode with --agent-provisioner=sidecar; drop the flag here",
      );
    if (!o.tlsCert || !o.tlsKey)
      throw new OptionError(
        "--injection-listen",
        "the API server calls the webhook over HTTPS only: give --tls-cert and --tls-key (the chart's TLS Secret)",
      );
    return { listen: parseListen("--injection-listen", flag) };
  },
};
