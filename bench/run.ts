// `npm run bench -- <name> [options]`: runs one benchmark.
//   router [--quick] [--unmasked] [--profile] [--k6 | --k6-only]   see bench/router/README.md
//   sessions [--sessions n] [--memory-sessions n] [--concurrency n] [--push-only] [--fresh-stacks n]
//   scale [--sessions n] [--concurrency n] [--sample n] [--quick]   many sessions on the local stack: Ready, routes, memory, leaks
//   data-path [--quick] [--pin]
//   agent-mirror [--requests n] [--rounds n] [--cpus list]
//   delivery [--quick]                                              stolen HTTP requests → local app, old vs undici
//   k6 [--quick] [--only fanout,rate,setup]                         k6 scenarios with HTML reports in bench/results/
//   failover [--runs n]                                             leader failover on the Lease: crash vs clean stop
//   primary-latency [--sequential n] [--concurrent n]               the Primary's share of session start-up
//   member-latency [--sessions n]                                   member create -> Ready, table push to a router
//   pods [--runs n] [--rps-requests n] [--requests n] [--baseline-cli bin]
//                                                                   real pods: cold vs warm sessions, idle agent cost, memory, stolen vs direct
//   chaos [--only list] [--sessions n] [--rate n] [--duration s] [--kill-every s] [--outage s]
//                                                                   real pods: leader, router, API server, client kills
//   branching [--size-mb n] [--runs n] [--no-pods]                  database branches: time to Ready vs the plain tools
//   queues [--messages n] [--runs n] [--rate n] [--seconds n] [--consumers n] [--splitter-loops n] [--quick]
//                                                                   SQS splitting: consumer throughput and latency, direct vs split
//   transparent [--runs n] [--mib n]                                real pods: exec --network=transparent vs proxy, bulk and connect
//   capacity [--rate n] [--steps list] [--hold s] [--replicas 1|2|both] [--request echo|ping] [--max n]
//            [--pair-cpu q] [--profile] [--quick]                   sessions one router replica serves before p99 doubles; two replicas
//   gateway-mux [--sessions n] [--rounds n] [--seconds n]          Primary router -> gateway: one multiplexed connection vs one per session
import { Command } from "commander";
import { defaultRouterBench, runRouterBench } from "./router/router-bench.js";
import { defaultK6Bench, K6_SCENARIOS, runK6Bench, type K6Scenario } from "./k6/k6-bench.js";
import { defaultSessionsBench, runSessionsBench } from "./sessions/sessions.js";
import { defaultDataPathBench, runDataPathBench } from "./data-path/data-path.js";
import { defaultScaleBench, quickScaleBench, runScaleBench } from "./sessions/scale.js";
import { defaultAgentMirrorBench, runAgentMirrorBench } from "./data-path/agent-mirror.js";
import { defaultDeliveryBench, runDeliveryBench } from "./data-path/delivery.js";
import { defaultHostileRegexBench, runHostileRegexBench } from "./data-path/hostile-regex.js";
import { defaultFailoverBench, runFailoverBench } from "./sessions/failover.js";
import { defaultPrimaryLatencyBench, runPrimaryLatencyBench } from "./sessions/primary-latency.js";
import { defaultMemberLatencyBench, runMemberLatencyBench } from "./sessions/member-latency.js";
import { defaultPodsBench, runPodsBench } from "./pods/pods.js";
import { defaultBranchingBench, runBranchingBench } from "./branching/branching.js";
import { defaultQueuesBench, quickQueuesBench, runQueuesBench } from "./queues/queues.js";
import { defaultTransparentBench, runTransparentBench } from "./data-path/transparent.js";
import { defaultCapacityBench, quickCapacityBench, runCapacityBench } from "./router/capacity.js";
import { defaultGatewayMuxBench, runGatewayMuxBench } from "./router/gateway-mux.js";
import { CHAOS_SCENARIOS, defaultChaosBench, runChaosBench, type ChaosScenario } from "./chaos/chaos.js";

const program = new Command("bench");
program
  .command("router")
  .description("router vs direct vs trivial relay: latency, fan-out, throughput, idle memory")
  .option("--quick", "fewer rounds (smoke run)", false)
  .option("--unmasked", "router sends unmasked frames upstream", false)
  .option("--k6", "also run the k6 fan-out scenario (as `bench -- k6 --only fanout`)", false)
  .option("--k6-only", "run only the k6 fan-out scenario", false)
  .option("--profile", "write a CPU profile of the router to $TMPDIR/switchyard-router-profiles/", false)
  .action(
    async (o: { quick: boolean; unmasked: boolean; k6: boolean; k6Only: boolean; profile: boolean }) => {
      const k6Fanout = () => runK6Bench({ ...defaultK6Bench, scenarios: ["fanout"] });
      if (o.k6Only) return k6Fanout();
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
      if (o.k6) await k6Fanout();
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
  .option("--fresh-stacks <n>", "only: n fresh stacks, first session create -> Ready on each", "0")
  .action(
    async (o: {
      sessions: string;
      memorySessions: string;
      concurrency: string;
      pushOnly: boolean;
      freshStacks: string;
    }) => {
      await runSessionsBench({
        ...defaultSessionsBench,
        sessions: Number(o.sessions),
        memorySessions: Number(o.memorySessions),
        concurrency: Number(o.concurrency),
        pushOnly: o.pushOnly,
        freshStacks: Number(o.freshStacks),
      });
      process.exit(0);
    },
  );
program
  .command("scale")
  .description(
    "many sessions on the local stack: create -> Ready, Ready -> Primary routers, memory per session, traffic on a sample, leaks after deleting",
  )
  .option("--sessions <n>", "sessions created (default 1000; --quick: 100)")
  .option("--concurrency <n>", "creates in flight at once", String(defaultScaleBench.concurrency))
  .option(
    "--sample <n>",
    "sessions that connect and carry traffic once all are Ready",
    String(defaultScaleBench.sample),
  )
  .option("--quick", "100 sessions (smoke run); --sessions overrides it", false)
  .option("--log-dir <dir>", "keep every component's log there (default: removed with the stack)")
  .action(
    async (o: {
      sessions?: string;
      concurrency: string;
      sample: string;
      quick: boolean;
      logDir?: string;
    }) => {
      const base = o.quick ? quickScaleBench : defaultScaleBench;
      await runScaleBench({
        ...base,
        sessions: o.sessions !== undefined ? Number(o.sessions) : base.sessions,
        concurrency: Number(o.concurrency),
        sample: Number(o.sample),
        ...(o.logDir ? { logDir: o.logDir } : {}),
      });
      process.exit(0);
    },
  );
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
program
  .command("hostile-regex")
  .description("hostile filter regexes: the agents' RE2 at 50 000 characters vs V8's RegExp")
  .option("--repeats <n>", "matches of each case", String(defaultHostileRegexBench.repeats))
  .action(async (o: { repeats: string }) => {
    await runHostileRegexBench({ ...defaultHostileRegexBench, repeats: Number(o.repeats) });
    process.exit(0);
  });
program
  .command("delivery")
  .description(
    "the CLI delivering stolen HTTP requests to a local app: node:http per request vs undici pools",
  )
  .option("--quick", "fewer requests and rounds (smoke run)", false)
  .action(async (o: { quick: boolean }) => {
    await runDeliveryBench(
      o.quick ? { sequential: 200, concurrent: 1000, concurrency: 16, rounds: 1 } : defaultDeliveryBench,
    );
    process.exit(0);
  });
program
  .command("failover")
  .description("leader failover on a real API server: leader crash vs clean stop -> successor leads")
  .option("--runs <n>", "rounds (one crash and one clean stop each)", String(defaultFailoverBench.runs))
  .action(async (o: { runs: string }) => {
    await runFailoverBench({ ...defaultFailoverBench, runs: Number(o.runs) });
    process.exit(0);
  });
program
  .command("primary-latency")
  .description("the Primary's share of session start-up (stand-in members), then many sessions at once")
  .option("--sequential <n>", "sessions one after another", String(defaultPrimaryLatencyBench.sequential))
  .option("--concurrent <n>", "sessions at once afterwards", String(defaultPrimaryLatencyBench.concurrent))
  .action(async (o: { sequential: string; concurrent: string }) => {
    await runPrimaryLatencyBench({ sequential: Number(o.sequential), concurrent: Number(o.concurrent) });
    process.exit(0);
  });
program
  .command("member-latency")
  .description("member mode: create -> Ready with and without agent start, table push to a router")
  .option(
    "--sessions <n>",
    "targets (one first and one reuse session each)",
    String(defaultMemberLatencyBench.sessions),
  )
  .action(async (o: { sessions: string }) => {
    await runMemberLatencyBench({ ...defaultMemberLatencyBench, sessions: Number(o.sessions) });
    process.exit(0);
  });
program
  .command("pods")
  .description(
    "real pods: cold vs warm sessions (exec -> stolen, rollouts), idle-agent cost, agent/router/control-plane memory, stolen vs direct GETs",
  )
  .option(
    "--runs <n>",
    "rounds of cold session, idle agent, warm session and removal",
    String(defaultPodsBench.runs),
  )
  .option(
    "--rps-requests <n>",
    "GETs per req/s measurement, without an agent and with an idle one",
    String(defaultPodsBench.rpsRequests),
  )
  .option("--requests <n>", "sequential GETs per side, direct and stolen", String(defaultPodsBench.requests))
  .option(
    "--baseline-cli <bin>",
    "another build's bin (e.g. an earlier commit's dist/bin/switchyard.mjs), run in turns with this one in the warm and born rounds",
  )
  .action(async (o: { runs: string; requests: string; rpsRequests: string; baselineCli?: string }) => {
    await runPodsBench({
      runs: Number(o.runs),
      requests: Number(o.requests),
      rpsRequests: Number(o.rpsRequests),
      ...(o.baselineCli ? { baselineCli: o.baselineCli } : {}),
    });
    process.exit(0);
  });
program
  .command("chaos")
  .description(
    "real pods under chaos: leader killed while sessions start, router pods deleted and an API server stopped under traffic, the CLI SIGKILLed",
  )
  .option("--only <list>", `comma-separated scenarios (${CHAOS_SCENARIOS.join(", ")})`)
  .option("--sessions <n>", "sessions opened while the leader is deleted", String(defaultChaosBench.sessions))
  .option("--rate <n>", "requests per second over both clusters", String(defaultChaosBench.rate))
  .option("--duration <s>", "traffic while router pods are deleted, s", String(defaultChaosBench.durationS))
  .option(
    "--kill-every <s>",
    "interval between router pod deletions, s",
    String(defaultChaosBench.killEveryS),
  )
  .option("--outage <s>", "how long west's API server is stopped, s", String(defaultChaosBench.outageS))
  .action(
    async (o: {
      only?: string;
      sessions: string;
      rate: string;
      duration: string;
      killEvery: string;
      outage: string;
    }) => {
      const only = o.only?.split(",").map((s) => s.trim()) ?? [...CHAOS_SCENARIOS];
      for (const s of only)
        if (!(CHAOS_SCENARIOS as readonly string[]).includes(s))
          throw new Error(
            `--only: unknown scenario ${JSON.stringify(s)}; choose from ${CHAOS_SCENARIOS.join(", ")}`,
          );
      await runChaosBench({
        scenarios: only as ChaosScenario[],
        sessions: Number(o.sessions),
        rate: Number(o.rate),
        durationS: Number(o.duration),
        killEveryS: Number(o.killEvery),
        outageS: Number(o.outage),
      });
      process.exit(0);
    },
  );
program
  .command("k6")
  .description(
    "k6 scenarios (fan-out by cluster count, routed message rate, session set-up) with HTML reports",
  )
  .option("--quick", "5 s stages (smoke run)", false)
  .option("--only <list>", `comma-separated scenarios (${K6_SCENARIOS.join(", ")})`)
  .action(async (o: { quick: boolean; only?: string }) => {
    const only = o.only?.split(",").map((s) => s.trim()) ?? [...K6_SCENARIOS];
    for (const s of only)
      if (!(K6_SCENARIOS as readonly string[]).includes(s))
        throw new Error(
          `--only: unknown scenario ${JSON.stringify(s)}; choose from ${K6_SCENARIOS.join(", ")}`,
        );
    await runK6Bench({
      ...defaultK6Bench,
      scenarios: only as K6Scenario[],
      ...(o.quick ? { stageSeconds: 5 } : {}),
    });
    process.exit(0);
  });
program
  .command("branching")
  .description(
    "database branches: time to Ready per copy mode and path vs CREATE DATABASE … TEMPLATE and pg_dump | psql",
  )
  .option("--size-mb <n>", "size of the generated source database", String(defaultBranchingBench.sizeMb))
  .option("--runs <n>", "runs per measured copy", String(defaultBranchingBench.runs))
  .option("--no-pods", "leave out the pod provisioner (it needs root and a real node)")
  .action(async (o: { sizeMb: string; runs: string; pods: boolean }) => {
    await runBranchingBench({ sizeMb: Number(o.sizeMb), runs: Number(o.runs), pods: o.pods });
    process.exit(0);
  });
program
  .command("queues")
  .description(
    "SQS queue splitting on a real ElasticMQ: consumer throughput and added latency, direct vs through the splitter",
  )
  .option("--messages <n>", "messages preloaded per throughput run", String(defaultQueuesBench.messages))
  .option("--runs <n>", "throughput runs per arm (alternating)", String(defaultQueuesBench.runs))
  .option("--rate <n>", "latency part: messages sent per second", String(defaultQueuesBench.rate))
  .option(
    "--seconds <n>",
    "latency part: how long each arm is sent to, s",
    String(defaultQueuesBench.seconds),
  )
  .option("--consumers <n>", "the consumer's receive loops, both arms", String(defaultQueuesBench.consumers))
  .option("--splitter-loops <n>", "the splitter's receive loops (default: the product's)")
  .option("--quick", "fewer messages, one run, 5 s of latency (smoke run); other options override it", false)
  .action(
    async (
      o: {
        messages: string;
        runs: string;
        rate: string;
        seconds: string;
        consumers: string;
        splitterLoops?: string;
        quick: boolean;
      },
      cmd: Command,
    ) => {
      const base = o.quick ? quickQueuesBench : defaultQueuesBench;
      const given = (name: string) => cmd.getOptionValueSource(name) === "cli";
      const pick = (name: "messages" | "runs" | "rate" | "seconds" | "consumers") =>
        given(name) ? Number(o[name]) : base[name];
      await runQueuesBench({
        ...base,
        messages: pick("messages"),
        runs: pick("runs"),
        rate: pick("rate"),
        seconds: pick("seconds"),
        consumers: pick("consumers"),
        ...(o.splitterLoops !== undefined ? { splitterLoops: Number(o.splitterLoops) } : {}),
      });
      process.exit(0);
    },
  );
program
  .command("transparent")
  .description(
    "real pods: outgoing TCP of exec --network=transparent vs --network=proxy (bulk MiB/s, connect latency), direct as reference",
  )
  .option("--runs <n>", "runs per arm (the arms take turns)", String(defaultTransparentBench.runs))
  .option("--mib <n>", "MiB downloaded over one connection per run", String(defaultTransparentBench.mib))
  .action(async (o: { runs: string; mib: string }) => {
    await runTransparentBench({ runs: Number(o.runs), mib: Number(o.mib) });
    process.exit(0);
  });
program
  .command("capacity")
  .description(
    "active sessions one router replica serves at a fixed load per session before p99 doubles; two replicas vs one",
  )
  .option("--rate <n>", "requests per second per session", String(defaultCapacityBench.rate))
  .option("--steps <list>", "sessions per replica at each step, comma-separated (the first is the baseline)")
  .option("--hold <s>", "seconds each step is measured", String(defaultCapacityBench.holdS))
  .option(
    "--replicas <which>",
    "1 (one full-CPU replica), 2 (two replicas vs one under a CPU quota) or both",
    "both",
  )
  .option(
    "--request <kind>",
    "echo (64-byte outgoing TCP via the Default upstream) or ping (merged pong)",
    "echo",
  )
  .option("--max <n>", "most sessions per replica", String(defaultCapacityBench.max))
  .option(
    "--pair-cpu <q>",
    "CPUs each replica gets in the two-replica comparison",
    String(defaultCapacityBench.pairQuota),
  )
  .option("--profile", "V8 CPU profile of one router held at the knee (into bench/results/)", false)
  .option("--quick", "fewer, shorter steps (smoke run); --steps and --hold override it", false)
  .action(
    async (
      o: {
        rate: string;
        steps?: string;
        hold: string;
        replicas: string;
        request: string;
        max: string;
        pairCpu: string;
        profile: boolean;
        quick: boolean;
      },
      cmd: Command,
    ) => {
      const base = { ...defaultCapacityBench, ...(o.quick ? quickCapacityBench : {}) };
      const num = (flag: string, v: string, min: number) => {
        const n = Number(v);
        if (!Number.isFinite(n) || n < min)
          throw new Error(`${flag}: ${JSON.stringify(v)} is not a number >= ${min}`);
        return n;
      };
      if (!["1", "2", "both"].includes(o.replicas))
        throw new Error(`--replicas: ${JSON.stringify(o.replicas)}; choose 1, 2 or both`);
      if (o.request !== "echo" && o.request !== "ping")
        throw new Error(`--request: ${JSON.stringify(o.request)}; choose echo or ping`);
      const steps = o.steps?.split(",").map((s) => num("--steps", s.trim(), 1)) ?? base.steps;
      for (let i = 1; i < steps.length; i++)
        if (steps[i]! <= steps[i - 1]!) throw new Error(`--steps: ${o.steps} must increase`);
      await runCapacityBench({
        rate: num("--rate", o.rate, 0.1),
        request: o.request,
        steps,
        holdS: cmd.getOptionValueSource("hold") === "cli" ? num("--hold", o.hold, 1) : base.holdS,
        replicas: o.replicas as "1" | "2" | "both",
        max: num("--max", o.max, 1),
        pairQuota: num("--pair-cpu", o.pairCpu, 0.05),
        profile: o.profile,
      });
      process.exit(0);
    },
  );
program
  .command("gateway-mux")
  .description("Primary router -> gateway: one multiplexed connection vs a WebSocket per session")
  .option("--sessions <n>", "sessions through the gateway", String(defaultGatewayMuxBench.sessions))
  .option("--rounds <n>", "rounds (arms alternate)", String(defaultGatewayMuxBench.rounds))
  .option(
    "--seconds <n>",
    "seconds of echo traffic per arm and round",
    String(defaultGatewayMuxBench.seconds),
  )
  .action(async (o: { sessions: string; rounds: string; seconds: string }) => {
    await runGatewayMuxBench({
      sessions: Number(o.sessions),
      rounds: Number(o.rounds),
      seconds: Number(o.seconds),
    });
  });
await program.parseAsync();
