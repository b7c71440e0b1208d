// The admission webhook as one part of the control-plane process: built from its options,
// `start(signal)` listens and resolves once the server is closed after `signal` aborts.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { OptionError } from "../../../lib/option-error.js";
import type { SessionAllowListOptions } from "../allow-list/index.js";
import type { ControlPlaneOptions } from "../control-plane-options.js";
import { AdmissionServer } from "./admission-server.js";
import { InjectionPolicy } from "./injection-policy.js";

export function injectionPart(
  o: ControlPlaneOptions,
  kc: KubeConfig,
  allowList: SessionAllowListOptions,
  registry: Registry,
  logger: Logger,
): { start(signal: AbortSignal): Promise<void> } {
  if (!o.injectionListen || !o.tls || !o.agentImage)
    throw new OptionError("--injection-listen", "needs --tls-cert/--tls-key and --agent-image");
  const server = new AdmissionServer({
    policy: new InjectionPolicy({
      kubeConfig: kc,
      settings: {
        agentImage: o.agentImage,
        ...(o.redirectImage ? { redirectImage: o.redirectImage } : {}),
        ...(o.agentTlsSecret ? { agentTlsSecret: o.agentTlsSecret } : {}),
      },
      allowList,
      secretNamespace: o.namespace,
    }),
    tls: { certPem: o.tls.certPem, keyPem: o.tls.keyPem },
    host: o.injectionListen.host,
    port: o.injectionListen.port,
    registry,
    logger,
  });
  return {
    async start(signal) {
      const port = await server.listen();
      logger.info({ port }, "admission webhook listening");
      await new Promise<void>((resolve) =>
        signal.aborted ? resolve() : signal.addEventListener("abort", () => resolve(), { once: true }),
      );
      await server.close();
    },
  };
}
