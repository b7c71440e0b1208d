// The admission webhook as one part of the control-plane process: built from its options,
// `start(signal)` listens and resolves once the server is closed after `signal` aborts. The
// serving certificate follows its files (the chart's TLS Secret volume, which cert-manager
// renews): re-read every 30 s, a valid new pair serves the next connections, no restart.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { X509Certificate } from "node:crypto";
import { OptionError } from "../../../lib/option-error.js";
import { watchServingCert } from "../../../lib/serving-cert-files.js";
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
      const { certFile, keyFile } = o.tls!;
      const watch =
        certFile && keyFile
          ? watchServingCert(
              { certFile, keyFile },
              o.tls!,
              (pem) => {
                server.setTls(pem);
                const cert = new X509Certificate(pem.certPem);
                logger.info(
                  { serial: cert.serialNumber, validTo: cert.validTo },
                  "admission webhook: serving the renewed certificate",
                );
              },
              {
                onError: (message) =>
                  logger.warn({ err: message }, "admission webhook: certificate not renewed"),
              },
            )
          : undefined;
      await new Promise<void>((resolve) =>
        signal.aborted ? resolve() : signal.addEventListener("abort", () => resolve(), { once: true }),
      );
      watch?.stop();
      await server.close();
    },
  };
}
