// A real SQS-compatible server for tests: ElasticMQ (elasticmq-install.ts puts its jars in the
// binary cache) on the JVM, speaking the AWS JSON protocol the AWS SDK uses, on 127.0.0.1 (or
// the address it is given) and a free port. Each server lives in its own `set-sqs-*` directory of processes.ts — its config,
// Java's temp directory and the log — so a killed owner's server is swept like a cluster set's
// processes, and `stop()` removes every file. Any number may run at once (one per workload
// cluster). Queues live in memory only: a stopped server's queues are gone.
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ListQueuesCommand, SQSClient } from "@aws-sdk/client-sqs";
import { eventually } from "../../support/poll.js";
import { freePorts } from "../ports.js";
import { envRoot, ProcessGroupDir, sweepOrphans, type ManagedProcess } from "../processes.js";
import { versions } from "../versions.js";
import { ensureElasticmq, javaCommand } from "./elasticmq-install.js";

/** The account id in every queue URL: `http://127.0.0.1:<port>/000000000000/<queue>`. */
export const ELASTICMQ_ACCOUNT_ID = "000000000000";

export interface ElasticmqServer {
  /** `http://<host>:<port>` (host 127.0.0.1 unless told): the SQS endpoint, and the prefix of every queue URL. */
  endpoint: string;
  port: number;
  /** The region ElasticMQ puts in queue ARNs (default "us-east-1"). */
  region: string;
  accountId: typeof ELASTICMQ_ACCOUNT_ID;
  /** The pinned ElasticMQ version (versions.ts). */
  version: string;
  /** The server's own directory (config, temp files, log); gone after `stop()`. */
  dir: string;
  /** Stops the server (SIGTERM, then SIGKILL after 10 s) and removes every file it had. */
  stop(): Promise<void>;
}

export interface ElasticmqOptions {
  /** Names the directory (`set-sqs-<name>-*`) and the log; lower-case letters, digits, '-' (default "elasticmq"). */
  name?: string;
  /** How long start-up may take once the jars are cached, ms (default 60 000). */
  readyTimeoutMs?: number;
  /** The region of queue ARNs and of the clients `sqsClientFor` builds (default "us-east-1"). */
  region?: string;
  /**
   * The address it listens on and puts in queue URLs (default "127.0.0.1"): a test node's host
   * address (`10.<block>.<i>.1`) makes it reachable from that node's pods and from this machine.
   */
  host?: string;
  /** Its port (default: a free one). */
  port?: number;
}

const NAME = /^[a-z0-9][a-z0-9-]{0,39}$/;
const REGION = /^[a-z]{2}(-[a-z0-9]+)+-\d$/;

// Start-up in about a second and ~130 MB resident: the client compiler only (a test server's
// throughput does not matter), and no hsperfdata file in /tmp (it outlives a killed JVM).
const JVM_SETTINGS = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData"];

/** The credentials ElasticMQ accepts (any: it checks no signature). Nothing is exported to the environment. */
export const ELASTICMQ_CREDENTIALS = { accessKeyId: "test", secretAccessKey: "test" } as const;

/** An SQS client of `server`; the caller destroys it (`client.destroy()`) when done. */
export function sqsClientFor(
  server: Pick<ElasticmqServer, "endpoint" | "region">,
  config: { maxAttempts?: number; requestTimeoutMs?: number } = {},
): SQSClient {
  return new SQSClient({
    endpoint: server.endpoint,
    region: server.region,
    credentials: ELASTICMQ_CREDENTIALS,
    ...(config.maxAttempts !== undefined ? { maxAttempts: config.maxAttempts } : {}),
    ...(config.requestTimeoutMs !== undefined
      ? {
          requestHandler: {
            requestTimeout: config.requestTimeoutMs,
            connectionTimeout: config.requestTimeoutMs,
          },
        }
      : {}),
  });
}

function serverConfig(host: string, port: number, region: string): string {
  return [
    'include classpath("application.conf")',
    // The address in queue URLs: what clients dial.
    `node-address { protocol = http, host = "${host}", port = ${port}, context-path = "" }`,
    `rest-sqs { enabled = true, bind-port = ${port}, bind-hostname = "${host}", sqs-limits = strict }`,
    `aws { region = "${region}", accountId = "${ELASTICMQ_ACCOUNT_ID}" }`,
    // In memory only (the defaults, said here so that no file is ever written elsewhere).
    'queues-storage { enabled = false, path = "" }',
    "messages-storage { enabled = false }",
    "",
  ].join("\n");
}

/** Resolves ElasticMQ's jars if needed, starts it (on 127.0.0.1 and a free port unless told), and waits until ListQueues answers. */
export async function startElasticmq(options: ElasticmqOptions = {}): Promise<ElasticmqServer> {
  const name = options.name ?? "elasticmq";
  const region = options.region ?? "us-east-1";
  const host = options.host ?? "127.0.0.1";
  if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(host))
    throw new Error(`startElasticmq: host ${JSON.stringify(host)} must be an IPv4 address of this machine`);
  if (!NAME.test(name))
    throw new Error(`startElasticmq: name ${JSON.stringify(name)} must match ${NAME} (it names a directory)`);
  if (!REGION.test(region))
    throw new Error(
      `startElasticmq: region ${JSON.stringify(region)} is not an AWS region name like "us-east-1"`,
    );
  const java = javaCommand();
  const lib = await ensureElasticmq();
  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  await sweepOrphans();
  const group = new ProcessGroupDir(
    join(envRoot(), `set-sqs-${name}-${process.pid}-${randomBytes(4).toString("hex")}`),
  );
  let server: ManagedProcess | undefined;
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await server?.stop(10_000);
      group.remove();
    })());
  try {
    const tmpDir = join(group.dir, "tmp");
    mkdirSync(tmpDir, { recursive: true });
    const configFile = join(group.dir, "elasticmq.conf");
    const port = options.port ?? (await freePorts(1))[0]!;
    writeFileSync(configFile, serverConfig(host, port, region));
    const proc = group.spawn(
      name,
      java,
      [
        ...JVM_SETTINGS,
        `-Djava.io.tmpdir=${tmpDir}`,
        `-Dconfig.file=${configFile}`,
        "-cp",
        `${lib}/*`,
        "org.elasticmq.server.Main",
      ],
      // A JVM that crashes writes hs_err_pid*.log to its working directory: keep it in ours.
      { cwd: group.dir },
    );
    server = proc;
    const endpoint = `http://${host}:${port}`;
    const probe = sqsClientFor({ endpoint, region }, { maxAttempts: 1, requestTimeoutMs: 2000 });
    try {
      await eventually(
        `ElasticMQ on ${endpoint} to answer ListQueues`,
        async () => {
          await probe.send(new ListQueuesCommand({}));
          return true;
        },
        {
          timeoutMs: Math.max(1000, deadline - Date.now()),
          intervalMs: 100,
          giveUp: () =>
            proc.hasExited()
              ? new Error(`ElasticMQ (java) exited during start-up; its log ends:\n${proc.logTail()}`)
              : undefined,
        },
      );
    } finally {
      probe.destroy();
    }
    return {
      endpoint,
      port,
      region,
      accountId: ELASTICMQ_ACCOUNT_ID,
      version: versions.elasticmq,
      dir: group.dir,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
