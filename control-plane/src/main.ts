// Entry point of the control-plane image: parse flags, start the parts for --mode, stop
// on SIGTERM/SIGINT. An invalid flag or configuration exits with status 2 and a message
// naming what to fix.
import "./young-generation.js"; // first: before the loading of every other module
import { pino } from "pino";
import { OptionError } from "../../lib/option-error.js";
import { STOP_DEADLINE_MS } from "../../lib/stop-deadline.js";
import { HelpRequested, parseControlPlaneArgs } from "./control-plane-options.js";
import { startControlPlane } from "./control-plane.js";

async function main(): Promise<number> {
  let options;
  try {
    options = parseControlPlaneArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof HelpRequested) {
      process.stdout.write(err.text);
      return 0;
    }
    if (err instanceof OptionError) {
      process.stderr.write(`switchyard-control-plane: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const logger = pino({
    level: options.logLevel,
    base: { component: "control-plane", identity: options.identity },
  });
  const stop = new AbortController();
  for (const sig of ["SIGTERM", "SIGINT"] as const) {
    process.once(sig, () => {
      logger.info({ signal: sig }, "stopping");
      stop.abort();
    });
  }
  try {
    const running = await startControlPlane(options, stop.signal, logger);
    // Gone before the kubelet's SIGKILL (30 s), saying what hung.
    running.stopping.arm(stop.signal, STOP_DEADLINE_MS, (pending) => {
      logger.error(
        { pending, deadlineMs: STOP_DEADLINE_MS },
        "parts still stopping at the deadline; exiting without them",
      );
      process.exit(1);
    });
    await running.done;
    return 0;
  } catch (err) {
    const e = err as Error & { code?: string };
    logger.fatal({ code: e.code, err: e.message }, "control plane stopped");
    process.stderr.write(`switchyard-control-plane: ${e.message}\n`);
    return e.code?.startsWith("SWITCHYARD_CLUSTER_CONFIG") ? 2 : 1;
  }
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    process.stderr.write(`switchyard-control-plane: ${err.stack ?? err.message}\n`);
    process.exit(1);
  },
);
