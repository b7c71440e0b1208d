// The control plane's queue-splitting flags: whether this member splits SQS queues, and how
// it reaches SQS. Credentials are never flags: the AWS SDK's default chain finds them (IRSA,
// Pod Identity, the instance profile, or the environment).
import type { Command } from "commander";
import { OptionError } from "../../../lib/option-error.js";
import type { ControlPlaneMode, FeatureFlags, FlagValues } from "../runtime/index.js";

export interface QueueOptions {
  /** `--sqs-splitting`: run the queue split controller (member mode). */
  splitting: boolean;
  /** `--sqs-region` (default: the SDK's own, e.g. AWS_REGION). */
  region: string | undefined;
  /** `--sqs-endpoint`: an SQS-compatible endpoint (default: AWS's regional one). */
  endpoint: string | undefined;
}

const REGION = /^[a-z]{2}(-[a-z]+)+-[0-9]+$/;

function add(cmd: Command): Command {
  return cmd
    .option(
      "--sqs-splitting",
      "member: split SQS queues for sessions that ask (connectParams.sqsSplit)",
      false,
    )
    .option(
      "--sqs-region <region>",
      "AWS region of this cluster's queues (default: the SDK's, e.g. AWS_REGION)",
    )
    .option("--sqs-endpoint <url>", "SQS-compatible endpoint, e.g. http://elasticmq:9324 (default: AWS's)");
}

function parse(o: FlagValues, mode: ControlPlaneMode): QueueOptions {
  const splitting = o.sqsSplitting === true;
  const region = o.sqsRegion as string | undefined;
  const endpoint = o.sqsEndpoint as string | undefined;
  if (splitting && mode === "primary")
    throw new OptionError(
      "--sqs-splitting",
      "queues are split by members: use it with --mode member or both",
    );
  if (region !== undefined && !REGION.test(region))
    throw new OptionError("--sqs-region", `must be an AWS region such as eu-west-1, got "${region}"`);
  if (endpoint !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(endpoint);
    } catch {
      url = undefined;
    }
    if (!url || !/^https?:$/.test(url.protocol) || url.search || url.hash)
      throw new OptionError("--sqs-endpoint", `must be an http(s):// URL without query, got "${endpoint}"`);
  }
  if (!splitting && (region !== undefined || endpoint !== undefined))
    throw new OptionError(
      region !== undefined ? "--sqs-region" : "--sqs-endpoint",
      "has no effect without --sqs-splitting: add it, or drop this flag",
    );
  return { splitting, region, endpoint };
}

export const queueFlags: FeatureFlags<QueueOptions> = { add, parse };
