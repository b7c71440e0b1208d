// Runs scripted agents as a process (benchmarks, manual experiments):
//   tsx test/peers/scripted-agents-main.ts --agents east,west,north --secret s [--host 127.0.0.1]
// Prints one JSON line {"agents":{"east":<port>,…}} once all listen; stops on SIGTERM/SIGINT.
import { Command } from "commander";
import { ScriptedAgent } from "./scripted-agent.js";

const opts = new Command("switchyard-scripted-agents")
  .requiredOption("--agents <names>", "comma-separated agent names, one listener each")
  .requiredOption("--secret <secret>", "secret routers must present")
  .option("--host <host>", "listen host", "127.0.0.1")
  .option("--record", "record received frames (off: benchmarks)", false)
  .parse()
  .opts<{ agents: string; secret: string; host: string; record: boolean }>();

const agents = opts.agents
  .split(",")
  .map((name) => new ScriptedAgent({ name, secret: opts.secret, host: opts.host, record: opts.record }));
const ports: Record<string, number> = {};
for (const a of agents) ports[a.opts.name] = await a.start();
process.stdout.write(JSON.stringify({ agents: ports }) + "\n");
const stop = async () => {
  for (const a of agents) await a.stop();
  process.exit(0);
};
process.once("SIGTERM", () => void stop());
process.once("SIGINT", () => void stop());
