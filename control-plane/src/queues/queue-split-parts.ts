// SQS queue splitting as a part of the control-plane process (member mode, `--sqs-splitting`):
// the SQS clients (this cluster's region or endpoint, the SDK's credential chain), the
// splitter metrics and the controller, run once per leadership term.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { ControlPlaneOptions } from "../control-plane-options.js";
import type { ControllerMetrics } from "../runtime/index.js";
import { SplitterMetrics } from "./queue-metrics.js";
import { QueueSplitController } from "./queue-split-controller.js";
import { SqsClients } from "./sqs-clients.js";

export function queueSplitParts(
  o: ControlPlaneOptions,
  kc: KubeConfig,
  registry: Registry,
  controllerMetrics: ControllerMetrics,
  logger: Logger,
): { start(leading: AbortSignal): Promise<void>; idle(): Promise<void> } {
  const clients = new SqsClients({
    ...(o.queues.region ? { region: o.queues.region } : {}),
    ...(o.queues.endpoint ? { endpoint: o.queues.endpoint } : {}),
  });
  const controller = new QueueSplitController({
    kubeConfig: kc,
    clients,
    clusterId: o.clusterName,
    logger: logger.child({ component: "queue-split" }),
    metrics: new SplitterMetrics(registry),
    controllerMetrics,
  });
  logger.info({ region: o.queues.region, endpoint: o.queues.endpoint }, "SQS queue splitting enabled");
  return { start: (leading) => controller.start(leading), idle: () => controller.idle() };
}
