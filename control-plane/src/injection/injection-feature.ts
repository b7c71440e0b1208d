// The admission webhook as a feature of the control-plane process (member mode, opt-in with
// `--injection-listen`): every replica serves it (no Lease) until the process stops. The
// serving certificate follows its files (the chart's TLS Secret volume, which cert-manager
// renews): re-read every 30 s, a valid new pair serves the next connections, no restart.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { X509Certificate } from "node:crypto";
import { untilAborted } from "../../../lib/abortable-sleep.js";
import { OptionError } from "../../../lib/option-error.js";
import { watchServingCert } from "../../../lib/serving-cert-files.js";
import type { SessionAllowListOptions } from "../allow-list/index.js";
import type { Feature } from "../runtime/index.js";
import { AdmissionServer } from "./admission-server.js";
import { injectionFlags, type InjectionOptions } from "./injection-options.js";
import { InjectionPolicy } from "./injection-policy.js";

export interface InjectionNeeds {
  kubeConfig: KubeConfig;
  /** The control plane's serving certificate (--tls-cert/--tls-key) and where it was read. */
  tls: { certPem: string; keyPem: string; certFile?: string; keyFile?: string } | undefined;
  /** The sidecar the webhook gives: the member's agent options. */
  agent: { image: string | undefined; redirectImage: string | undefined; tlsSecret: string | undefined };
  allowList: SessionAllowListOptions;
  /** The control plane's namespace: agent Secrets live there. */
  namespace: string;
  registry: Registry;
  logger: Logger;
}

export const injectionFeature: Feature<InjectionOptions, InjectionNeeds> = {
  name: "admission webhook",
  runsIn: ["member"],
  flags: injectionFlags,
  enabled: (o) => o.listen !== undefined,
  start(o, needs) {
    const { tls, agent, logger } = needs;
    if (!o.listen || !tls || !agent.image)
      throw new OptionError("--injection-listen", "needs --tls-cert/--tls-key and --agent-image");
    const server = new AdmissionServer({
      policy: new InjectionPolicy({
        kubeConfig: needs.kubeConfig,
        settings: {
          agentImage: agent.image,
          ...(agent.redirectImage ? { redirectImage: agent.redirectImage } : {}),
          ...(agent.tlsSecret ? { agentTlsSecret: agent.tlsSecret } : {}),
        },
        allowList: needs.allowList,
        secretNamespace: needs.namespace,
      }),
      tls: { certPem: tls.certPem, keyPem: tls.keyPem },
      host: o.listen.host,
      port: o.listen.port,
      registry: needs.registry,
      logger,
    });
    return {
      async serve(signal) {
        const port = await server.listen();
        logger.info({ port }, "admission webhook listening");
        const { certFile, keyFile } = tls;
        const watch =
          certFile && keyFile
            ? watchServingCert(
                { certFile, keyFile },
                tls,
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
        await untilAborted(signal);
        watch?.stop();
        await server.close();
      },
    };
  },
};
