// SQS queue splitting as a feature of the control-plane process (member mode, opt-in with
// `--sqs-splitting`): the SQS clients (this cluster's region or endpoint, the SDK's
// credential chain), the splitter metrics and the controller, one leadership term at a time.
// On stop the process waits for the last term: its splitters forward what they received.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { ControllerMetrics, Feature } from "../runtime/index.js";
import { SplitterMetrics } from "./queue-metrics.js";
import { queueFlags, type QueueOptions } from "./queue-options.js";
import { QueueSplitController } from "./queue-split-controller.js";
import { SqsClients } from "./sqs-clients.js";

export interface QueueSplitNeeds {
  kubeConfig: KubeConfig;
  /** This cluster's name: temporary queues carry it. */
  clusterName: string;
  registry: Registry;
  controllerMetrics: ControllerMetrics;
  logger: Logger;
}

export const queueSplitFeature: Feature<QueueOptions, QueueSplitNeeds> = {
  name: "queue splitting",
  runsIn: ["member"],
  flags: queueFlags,
  enabled: (o) => o.splitting,
  start(o, needs) {
    const clients = new SqsClients({
      ...(o.region ? { region: o.region } : {}),
      ...(o.endpoint ? { endpoint: o.endpoint } : {}),
    });
    const controller = new QueueSplitController({
      kubeConfig: needs.kubeConfig,
      clients,
      clusterId: needs.clusterName,
      logger: needs.logger.child({ component: "queue-split" }),
      metrics: new SplitterMetrics(needs.registry),
      controllerMetrics: needs.controllerMetrics,
    });
    needs.logger.info({ region: o.region, endpoint: o.endpoint }, "SQS queue splitting enabled");
    return { lead: (leading) => controller.start(leading), finishTermOnStop: true };
  },
};
