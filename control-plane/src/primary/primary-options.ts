// The Primary's flags: where its multi-cluster configuration is, how often it checks the
// remote clusters, and the CA routers verify member gateways with. Rendered by the chart;
// every error names the flag and the fix.
import type { Command } from "commander";
import { OptionError } from "../../../lib/option-error.js";
import { readFlagFile, secondsFlag, type FeatureFlags } from "../runtime/index.js";

export interface PrimaryOptions {
  /** ConfigMap holding clusters-config.yaml. */
  configMap: string;
  /** Remote-cluster health check interval, ms. */
  healthCheckIntervalMs: number;
  /** PEM CA routers verify member gateways (wss://) with (in the routing table; default none). */
  gatewayCaPem: string | undefined;
}

export const primaryFlags: FeatureFlags<PrimaryOptions> = {
  add: (cmd: Command) =>
    cmd
      .option("--config-map <name>", "ConfigMap holding clusters-config.yaml", "switchyard-clusters")
      .option("--health-check-interval-seconds <s>", "remote-cluster health check interval", "30")
      .option("--gateway-ca <file>", "Primary: PEM CA bundle routers verify member gateways (wss://) with"),
  parse(o, mode) {
    const gatewayCa = o.gatewayCa as string | undefined;
    if (gatewayCa !== undefined && mode === "member") {
      throw new OptionError(
        "--gateway-ca",
        "only a Primary (--mode=primary or both) routes to member gateways: drop the flag here",
      );
    }
    return {
      configMap: o.configMap as string,
      healthCheckIntervalMs: secondsFlag(
        "--health-check-interval-seconds",
        o.healthCheckIntervalSeconds as string,
      ),
      gatewayCaPem: gatewayCa !== undefined ? readFlagFile("--gateway-ca", gatewayCa) : undefined,
    };
  },
};
