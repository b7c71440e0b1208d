// What every real-pod bench does around its measurements: checks its whole-number options,
// starts the pod stack (test/env/stack/pod-stack.ts), stops it however the run ends (Ctrl-C
// included, with every child process and owned file), and prints the bench's closing lines
// (its GOAL lines) last, after the stack is down. Also the developer's `switchyard exec`
// command line the pod benches launch.
import { join } from "node:path";
import { startPodStack, type PodStack, type PodStackOptions } from "../../test/env/stack/pod-stack.js";
import { killChildren, sweepOrphans } from "../../test/env/processes.js";
import { shutdownOnSignals } from "../../test/env/stack/signal-shutdown.js";
import { repoRoot, tsx } from "../../test/support/launch.js";

/** Throws naming the flag when a value is not a whole number >= 1. */
export function requireWholeNumbers(options: readonly (readonly [flag: string, value: number])[]): void {
  for (const [flag, v] of options)
    if (!Number.isInteger(v) || v < 1) throw new Error(`${flag}: expected a whole number >= 1, got ${v}`);
}

/** Runs `work` on a fresh pod stack; prints the lines it returns once the stack has stopped. */
export async function onPodStack(
  label: string,
  work: (stack: PodStack) => Promise<string[]>,
  options: Pick<PodStackOptions, "injection"> = {},
): Promise<void> {
  let stack: PodStack | undefined;
  // Ctrl-C or kill: stop the stack (pods, nodes, clusters) and remove its files before exiting.
  const shutdown = shutdownOnSignals({
    stop: async () => {
      try {
        await stack?.stop();
      } finally {
        killChildren();
        await sweepOrphans({ mine: true });
      }
    },
    hurry: () => killChildren(),
  });
  const t0 = performance.now();
  let closing: string[];
  try {
    stack = await startPodStack({
      ...options,
      onPhase: (phase, ms) => console.log(`[${label}] ${phase} at ${(ms / 1000).toFixed(1)} s`),
    });
    closing = await work(stack);
  } catch (err) {
    // A signal stops everything under the run's feet: its failures are expected; let the stop finish.
    if (shutdown.stopping) return shutdown.stopped;
    throw err;
  } finally {
    if (!shutdown.stopping) {
      await stack?.stop();
      console.log(`wall time ${((performance.now() - t0) / 1000).toFixed(1)} s, stack stopped`);
    }
  }
  for (const line of closing) console.log(line);
}

/** `switchyard exec … --steal --port 8080:<localPort> -- node local-app.mjs`, as the developer runs it (default target: the demo). */
export function stealExecCommand(
  stack: PodStack,
  localPort: number,
  target?: string,
  /** The CLI as installed (the product build's bin, `installedCli()`) instead of the sources under tsx. */
  compiledCli?: string,
) {
  const args = [...stack.developerCliArgs];
  if (target) args[args.indexOf("-t") + 1] = target;
  const cli = (a: string[]) =>
    compiledCli ? { command: process.execPath, args: [compiledCli, ...a] } : tsx("cli/src/main.ts", a);
  return cli([
    "exec",
    ...args,
    "--steal",
    "--port",
    `8080:${localPort}`,
    "--",
    process.execPath,
    join(repoRoot, "test/e2e/fixtures/local-app.mjs"),
  ]);
}
