// `npm run bench -- <name> [options]`: runs one benchmark.
//   router [--quick] [--unmasked] [--profile] [--k6 | --k6-only]   see bench/README.md
import { Command } from "commander";
import { defaultRouterBench, runRouterBench } from "./router-bench.js";
import { runK6Fanout } from "./k6-runner.js";

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
await program.parseAsync();
