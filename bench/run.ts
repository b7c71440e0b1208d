// `npm run bench -- <name> [options]`: runs one benchmark.
//   router [--quick] [--unmasked] [--profile] [--k6 | --k6-only]   see bench/README.md
//   sessions [--sessions n] [--memory-sessions n] [--concurrency n] [--push-only]
//   data-path [--quick] [--pin]
//   agent-mirror [--requests n] [--rounds n] [--cpus list]
import { Command } from "commander";
import { defaultRouterBench, runRouterBench } from "./router-bench.js";
import { runK6Fanout } from "./k6-runner.js";
import { defaultSessionsBench, runSessionsBench } from "./sessions.js";
import { defaultDataPathBench, runDataPathBench } from "./data-path.js";
import { defaultAgentMirrorBench, runAgentMirrorBench } from "./agent-mirror.js";

const program = new Command("bench");
program
  .command("router")
  .description("router vs direct vs trivial relay: latency, fan-out, throughput, idle memory")
  .option("--quick", "fewer rounds (smoke run)", false)
  .option("--unmasked", "router sends unmasked frames upstream", false)
  .option("--k6", "also run the k6 fan-out scenario (needs the k6 binary: npm run binaries)", false)
  .option("--k6-only", "run only the k6 fan-out scenario", false)
  .option("--profile", "write a CPU profile of the router to $TMPDIR/switchyard-router-profiles/", false)
  .action(
    async (o: { quick: boolean; unmasked: boolean; k6: boolean; k6Only: boolean; profile: boolean }) => {
      if (o.k6Only) return runK6Fanout();
      const opts = o.quick
        ? {
            latencyRounds: 1000,
            smallFrames: 20_000,
            bulkFrames: 2_000,
            idleSessions: 100,
            unmasked: o.unmasked,
            profile: o.profile,
          }
        : { ...defaultRouterBench, unmasked: o.unmasked, profile: o.profile };
      await runRouterBench(opts);
      if (o.k6) await runK6Fanout();
    },
  );
program
  .command("sessions")
  .description("session start-up on the local stack: create -> Ready, Ready -> routers, push cost, memory")
  .option("--sessions <n>", "sequential sessions after the first", String(defaultSessionsBench.sessions))
  .option(
    "--memory-sessions <n>",
    "extra sessions for the memory reading (0: skip)",
    String(defaultSessionsBench.memorySessions),
  )
  .option("--concurrency <n>", "creates in flight while filling up", String(defaultSessionsBench.concurrency))
  .option("--push-only", "only the push-cost comparison (no stack)", false)
  .action(async (o: { sessions: string; memorySessions: string; concurrency: string; pushOnly: boolean }) => {
    await runSessionsBench({
      ...defaultSessionsBench,
      sessions: Number(o.sessions),
      memorySessions: Number(o.memorySessions),
      concurrency: Number(o.concurrency),
      pushOnly: o.pushOnly,
    });
    process.exit(0);
  });
program
  .command("data-path")
  .description("stolen request round trip vs direct, mirror cost, outgoing bulk via the proxy (local stack)")
  .option("--quick", "fewer requests (smoke run)", false)
  .option("--pin", "mirror part: in-cluster side (load, app, east's agent) on its own CPUs", false)
  .action(async (o: { quick: boolean; pin: boolean }) => {
    await runDataPathBench({
      ...(o.quick
        ? {
            pacedRequests: 200,
            maxRequests: 1000,
            concurrency: 16,
            bulkBytes: 16 * 1024 * 1024,
            bulkRuns: 1,
            mirrorRounds: 1,
          }
        : defaultDataPathBench),
      pin: o.pin,
    });
    process.exit(0);
  });
program
  .command("agent-mirror")
  .description("the agent alone: CPU per request and req/s with no session vs one mirroring session")
  .option("--requests <n>", "requests per round", String(defaultAgentMirrorBench.requests))
  .option("--rounds <n>", "alternating no-session / mirror rounds", String(defaultAgentMirrorBench.rounds))
  .option("--cpus <list>", "run load, app and agent on these CPUs (taskset list, e.g. 0)")
  .action(async (o: { requests: string; rounds: string; cpus?: string }) => {
    await runAgentMirrorBench({
      ...defaultAgentMirrorBench,
      requests: Number(o.requests),
      rounds: Number(o.rounds),
      ...(o.cpus ? { cpus: o.cpus } : {}),
    });
    process.exit(0);
  });
await program.parseAsync();
