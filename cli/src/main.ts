#!/usr/bin/env node
// The `switchyard` command: parses flags with commander and dispatches to the commands in
// cli/src/commands. `run(argv, out)` is the whole CLI as a function (tests call it in
// process); executed directly, it exits with the command's exit code.
import { existsSync, realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Command, Option } from "commander";
import { CliError, CliErrorCode } from "./sdk/cli-errors.js";
import { loadKubeConfig } from "./sdk/kube/kube-access.js";
import { resolveNamespace } from "./sdk/kube/open-session.js";
import {
  readConfigFile,
  resolveConfig,
  type SessionConfigFile,
  type SessionFlags,
} from "./sdk/local/session-config.js";
import {
  branchesDestroyCommand,
  branchesListCommand,
  branchesStatusCommand,
} from "./commands/branches-command.js";
import { agentsListCommand, agentsRemoveCommand } from "./commands/agents-command.js";
import { execCommand } from "./commands/exec-command.js";
import { parseOutputFormat, processOut, reportError, type Out } from "./commands/output.js";
import { queuesConsumersCommand, queuesStatusCommand } from "./commands/queues-command.js";
import { envCommand, filesCatCommand, filesLsCommand } from "./commands/remote-commands.js";
import { sessionsKillCommand, sessionsListCommand } from "./commands/sessions-command.js";
import { statusCommand } from "./commands/status-command.js";

const VERSION = "0.1.0";
const collect = (v: string, prev: string[] = []) => [...prev, v];

interface GlobalOpts {
  kubeconfig?: string;
  context?: string;
  namespace?: string;
  output?: string;
  quiet?: boolean;
}

/** Flags of commands that open a session: the config flags plus the command's own. */
interface SessionCmdOpts extends GlobalOpts, Omit<SessionFlags, keyof GlobalOpts> {
  config?: string;
  readyTimeout?: string;
}

function addSessionOptions(cmd: Command): Command {
  return cmd
    .option("-f, --config <file>", "session config file (default: ./switchyard.json when it exists)")
    .option("-t, --target <target>", "target, e.g. deployment/myapp or deployment/myapp/container/app")
    .option("--router <url>", "router URL overriding the operator's routerEndpoint (repeatable)", collect)
    .option("--router-ca <file>", "PEM CA that signed the routers' certificate")
    .option("--env-include <pattern>", "only these variables (shell pattern, repeatable)", collect)
    .option("--env-exclude <pattern>", "drop these variables (shell pattern, repeatable)", collect)
    .option("--ttl <seconds>", "seconds the session survives without this client (default 60)")
    .option("--ready-timeout <seconds>", "how long to wait for the session to become ready", "120");
}

function sessionConfig(o: SessionCmdOpts, proxySource?: string): ReturnType<typeof resolveConfig> {
  let file: SessionConfigFile = {};
  if (o.config) file = readConfigFile(o.config);
  else if (existsSync("switchyard.json")) file = readConfigFile("switchyard.json");
  const flags: SessionFlags = {};
  const keys = [
    "target",
    "namespace",
    "context",
    "kubeconfig",
    "router",
    "routerCa",
    "steal",
    "mirror",
    "port",
    "httpHeader",
    "httpPath",
    "httpMethod",
    "httpMatch",
    "envInclude",
    "envExclude",
    "ttl",
    "proxy",
    "network",
    "keepLocal",
    "files",
  ] as const;
  for (const k of keys) if (o[k] !== undefined) (flags as Record<string, unknown>)[k] = o[k];
  // commander gives --no-proxy a default of true; only an explicit flag overrides the file.
  if (proxySource === "default") delete flags.proxy;
  return resolveConfig(file, flags);
}

function readyTimeoutMs(o: SessionCmdOpts): number {
  const s = Number(o.readyTimeout ?? "120");
  if (!Number.isFinite(s) || s <= 0)
    throw new CliError(
      CliErrorCode.INVALID_OPTION,
      `--ready-timeout "${o.readyTimeout}" must be a positive number of seconds`,
    );
  return s * 1000;
}

export function buildProgram(out: Out, setExit: (code: number) => void): Command {
  const program = new Command("switchyard")
    .description("Run one local process against a workload in every cluster, through one session.")
    .version(VERSION)
    .option("--kubeconfig <file>", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    .option("--context <name>", "kubeconfig context of the Primary cluster")
    .option("-n, --namespace <ns>", "namespace (default: the context's, else the operator's default)")
    .addOption(new Option("-o, --output <format>", "output format").choices(["table", "json"]))
    .option("-q, --quiet", "no progress messages on stderr")
    .showHelpAfterError()
    .configureOutput({ writeOut: (s) => out.stdout(s), writeErr: (s) => out.stderr(s) })
    .exitOverride();

  const globals = (cmd: Command): SessionCmdOpts => cmd.optsWithGlobals<SessionCmdOpts>();
  const guarded =
    <A extends unknown[]>(fn: (...a: A) => Promise<number>) =>
    async (...a: A) => {
      const cmd = a[a.length - 1] as Command;
      let format: "table" | "json" = "table";
      try {
        format = parseOutputFormat(globals(cmd).output);
        setExit(await fn(...a));
      } catch (err) {
        setExit(reportError(err, format, out));
      }
    };
  const kube = (o: GlobalOpts) =>
    loadKubeConfig({
      ...(o.kubeconfig ? { kubeconfig: o.kubeconfig } : {}),
      ...(o.context ? { context: o.context } : {}),
    });

  addSessionOptions(
    program
      .command("exec")
      .description(
        "run CMD with the target's environment, traffic and network: switchyard exec -t deployment/app -- CMD…",
      )
      .argument("<command...>", "the command to run (after --)")
      .option("--steal", "take the target's incoming traffic (the cluster's app no longer sees it)")
      .option("--mirror", "get a copy of the target's incoming traffic (default)")
      .option(
        "-p, --port <port[:local]>",
        "target port to mirror/steal, delivered to the local port (repeatable)",
        collect,
      )
      .option(
        "--http-header <'Name: regex'>",
        "steal only requests whose header matches (repeatable)",
        collect,
      )
      .option("--http-path <regex>", "steal only requests whose path matches")
      .option("--http-method <method>", "steal only requests with this method")
      .addOption(new Option("--http-match <all|any>", "how HTTP conditions combine").choices(["all", "any"]))
      .option("--no-proxy", "do not give CMD the SOCKS5/HTTP proxy through the default cluster")
      .addOption(
        new Option(
          "--network <mode>",
          "transparent: CMD's network, DNS and files are the default cluster's (Linux, no root); proxy: only the proxy variables; auto (default): transparent where possible",
        ).choices(["auto", "transparent", "proxy"]),
      )
      .option("--keep-local <cidr>", "address or CIDR CMD reaches from this machine (repeatable)", collect)
      .option(
        "--files <path>",
        "a container path to show CMD besides the target's mounts (repeatable)",
        collect,
      ),
  ).action(
    guarded(async (command: string[], _o: unknown, cmd: Command) => {
      const o = globals(cmd);
      const cfg = sessionConfig(o, cmd.getOptionValueSource("proxy"));
      return execCommand(
        kube(cfg),
        cfg,
        { command, readyTimeoutMs: readyTimeoutMs(o), ...(o.quiet ? { quiet: true } : {}) },
        out,
      );
    }),
  );

  program
    .command("status")
    .description("clusters, connectivity, versions and latency from the SwitchyardOperator")
    .action(
      guarded(async (_o: unknown, cmd: Command) =>
        statusCommand(kube(globals(cmd)), parseOutputFormat(globals(cmd).output), out),
      ),
    );

  const sessions = program.command("sessions").description("list or kill sessions");
  sessions
    .command("list")
    .alias("ls")
    .description("sessions in the namespace (-A: all namespaces)")
    .option("-A, --all-namespaces", "list sessions of every namespace")
    .option("--children", "also list child ClusterSessions of multi-cluster sessions")
    .action(
      guarded(async (_o: unknown, cmd: Command) => {
        const o = globals(cmd) as GlobalOpts & { allNamespaces?: boolean; children?: boolean };
        const kc = kube(o);
        const namespace = o.allNamespaces ? undefined : resolveNamespace(kc, undefined, o.namespace);
        return sessionsListCommand(
          kc,
          { namespace, children: o.children === true },
          parseOutputFormat(o.output),
          out,
        );
      }),
    );
  sessions
    .command("kill")
    .description("delete sessions by id, or --all in the namespace")
    .argument("[ids...]", "session ids (see sessions list)")
    .option("--all", "every session in the namespace")
    .action(
      guarded(async (ids: string[], _o: unknown, cmd: Command) => {
        const o = globals(cmd) as GlobalOpts & { all?: boolean };
        const kc = kube(o);
        return sessionsKillCommand(
          kc,
          { ids, all: o.all === true, namespace: resolveNamespace(kc, undefined, o.namespace) },
          parseOutputFormat(o.output),
          out,
        );
      }),
    );

  const branches = program.command("branches").description("list, inspect or destroy database branches");
  branches
    .command("list")
    .alias("ls")
    .description("database branches (PgBranchDatabase, MysqlBranchDatabase) in the namespace (-A: all)")
    .option("-A, --all-namespaces", "list branches of every namespace")
    .action(
      guarded(async (_o: unknown, cmd: Command) => {
        const o = globals(cmd) as GlobalOpts & { allNamespaces?: boolean };
        const kc = kube(o);
        const namespace = o.allNamespaces ? undefined : resolveNamespace(kc, undefined, o.namespace);
        return branchesListCommand(kc, { namespace }, parseOutputFormat(o.output), out);
      }),
    );
  const engineOption = () =>
    new Option("--engine <engine>", "the branch's engine, when the name exists as both").choices([
      "postgres",
      "mysql",
    ]);
  branches
    .command("status")
    .description("one branch: phase, spec, expiry, sessions and conditions")
    .argument("<name>", "branch name (see branches list)")
    .addOption(engineOption())
    .action(
      guarded(async (name: string, _o: unknown, cmd: Command) => {
        const o = globals(cmd) as GlobalOpts & { engine?: string };
        const kc = kube(o);
        return branchesStatusCommand(
          kc,
          {
            name,
            namespace: resolveNamespace(kc, undefined, o.namespace),
            ...(o.engine ? { engine: o.engine } : {}),
          },
          parseOutputFormat(o.output),
          out,
        );
      }),
    );
  branches
    .command("destroy")
    .description("delete a branch (its database, Secret and copies go with it)")
    .argument("<name>", "branch name (see branches list)")
    .addOption(engineOption())
    .option("--wait <seconds>", "how long to wait until it is gone (0: do not wait)", "60")
    .action(
      guarded(async (name: string, _o: unknown, cmd: Command) => {
        const o = globals(cmd) as GlobalOpts & { engine?: string; wait?: string };
        const waitSeconds = Number(o.wait ?? "60");
        if (!Number.isFinite(waitSeconds) || waitSeconds < 0)
          throw new CliError(
            CliErrorCode.INVALID_OPTION,
            `--wait "${o.wait}" must be a number of seconds, 0 or more`,
          );
        const kc = kube(o);
        return branchesDestroyCommand(
          kc,
          {
            name,
            namespace: resolveNamespace(kc, undefined, o.namespace),
            ...(o.engine ? { engine: o.engine } : {}),
            waitSeconds,
          },
          parseOutputFormat(o.output),
          out,
        );
      }),
    );

  const agents = program
    .command("agents")
    .description("sidecar agents kept in workloads: in use, lingering idle, or born with them");
  agents
    .command("list")
    .alias("ls")
    .description(
      "which targets in which clusters carry an agent, since when, lingering until when, sessions on them",
    )
    .option("-A, --all-namespaces", "agents of every namespace")
    .action(
      guarded(async (_o: unknown, cmd: Command) => {
        const o = globals(cmd) as GlobalOpts & { allNamespaces?: boolean };
        const kc = kube(o);
        const namespace = o.allNamespaces ? undefined : resolveNamespace(kc, undefined, o.namespace);
        return agentsListCommand(kc, { namespace }, parseOutputFormat(o.output), out);
      }),
    );
  agents
    .command("remove")
    .alias("rm")
    .description("remove a target's agents in every cluster: now where idle, else when its last session ends")
    .argument("<target>", "deployment/<name> or statefulset/<name>")
    .option("--wait <seconds>", "how long to wait for every cluster's answer", "60")
    .action(
      guarded(async (target: string, _o: unknown, cmd: Command) => {
        const o = globals(cmd) as GlobalOpts & { wait?: string };
        const seconds = Number(o.wait ?? "60");
        if (!Number.isFinite(seconds) || seconds <= 0)
          throw new CliError(
            CliErrorCode.INVALID_OPTION,
            `--wait "${o.wait}" must be a positive number of seconds`,
          );
        const kc = kube(o);
        return agentsRemoveCommand(
          kc,
          { target, namespace: resolveNamespace(kc, undefined, o.namespace), timeoutMs: seconds * 1000 },
          parseOutputFormat(o.output),
          out,
        );
      }),
    );

  const queues = program.command("queues").description("SQS queue splits and the queues workloads consume");
  for (const [name, what, run] of [
    [
      "status",
      "each session's queue splits: session, cluster, queue, phase, mode, output queue",
      queuesStatusCommand,
    ],
    [
      "consumers",
      "QueueConsumers: which queues each workload consumes, through which variable",
      queuesConsumersCommand,
    ],
  ] as const)
    queues
      .command(name)
      .description(what)
      .action(
        guarded(async (_o: unknown, cmd: Command) => {
          const o = globals(cmd);
          const kc = kube(o);
          return run(
            kc,
            { namespace: resolveNamespace(kc, undefined, o.namespace) },
            parseOutputFormat(o.output),
            out,
          );
        }),
      );

  const files = program.command("files").description("read the target's files (Default cluster)");
  for (const [name, what] of [
    ["cat", "print a file"],
    ["ls", "list a directory"],
  ] as const)
    addSessionOptions(
      files.command(name).description(what).argument("<path>", "absolute path in the target container"),
    ).action(
      guarded(async (path: string, _o: unknown, cmd: Command) => {
        const o = globals(cmd);
        const cfg = sessionConfig(o);
        const run = name === "cat" ? filesCatCommand : filesLsCommand;
        return run(kube(cfg), cfg, path, parseOutputFormat(o.output), out, {
          readyTimeoutMs: readyTimeoutMs(o),
          ...(o.quiet ? { quiet: true } : {}),
        });
      }),
    );

  addSessionOptions(
    program.command("env").description("print the target's environment as resolved on the Default cluster"),
  ).action(
    guarded(async (_o: unknown, cmd: Command) => {
      const o = globals(cmd);
      const cfg = sessionConfig(o);
      return envCommand(kube(cfg), cfg, parseOutputFormat(o.output), out, {
        readyTimeoutMs: readyTimeoutMs(o),
        ...(o.quiet ? { quiet: true } : {}),
      });
    }),
  );
  return program;
}

/** Runs the CLI; resolves with the exit code. */
export async function run(argv: string[], out: Out = processOut): Promise<number> {
  let code = 0;
  const program = buildProgram(out, (c) => (code = c));
  try {
    await program.parseAsync(argv, { from: "user" });
  } catch (err) {
    const e = err as { exitCode?: number; code?: string };
    if (e.code === "commander.helpDisplayed" || e.code === "commander.version" || e.code === "commander.help")
      return 0;
    return e.exitCode ?? 1;
  }
  return code;
}

/** Runs the command line as the program, and exits once it ended (with its exit code). */
export async function runAsProgram(): Promise<void> {
  const code = await run(process.argv.slice(2));
  process.exitCode = code;
  // Let stdout drain, but never hang on a stray handle (a watch, a socket) after the command ended.
  setTimeout(() => process.exit(code), 500).unref();
}

// Executed as a program (tsx, dist/cli) rather than imported by a test; the bundled bin
// (dist/bin/switchyard.cjs) runs it from bin/cli-entry.ts instead.
const invokedDirectly = (() => {
  try {
    const self = fileURLToPath(import.meta.url);
    return !self.endsWith(".cjs") && realpathSync(process.argv[1] ?? "") === realpathSync(self);
  } catch {
    return false;
  }
})();

if (invokedDirectly) void runAsProgram();
