// Ordered shutdown of a long-running environment (`npm start`, `npm run clusters -- up`) on
// SIGINT, SIGTERM or SIGHUP: Ctrl-C, `kill`, a closed terminal. The first signal runs `stop`
// once and then exits; a later one (a second Ctrl-C) calls `hurry` — kill everything now —
// while `stop` still runs to its end, so the state directory is removed either way.
//
// Why a repeat is not always a second Ctrl-C: a terminal sends SIGINT to its whole
// foreground process group, and npm forwards the SIGINT it received to its child as well,
// so one Ctrl-C arrives twice within milliseconds. Repeats within REPEAT_MS count as one.
import { ownSignals } from "../processes.js";

const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
/** Repeats closer than this are the same Ctrl-C delivered twice (terminal and npm). */
const REPEAT_MS = 1000;
/** Past this, `stop` is hurried even without a second signal (a step that hangs). */
const HURRY_AFTER_MS = 30_000;
/** Past this, the process exits even if `stop` never settles: it must never hang on Ctrl-C. */
const GIVE_UP_AFTER_MS = 60_000;

export interface SignalShutdownOptions {
  /** Stops everything and removes every file; must settle (errors are reported, then exit). */
  stop: () => Promise<void>;
  /** Kills everything at once, synchronously; `stop` is still awaited afterwards. */
  hurry: () => void;
  /** Where progress lines go (default stderr). */
  say?: (line: string) => void;
  /** Exit code once stopped (default 0: stopping on request is not a failure). */
  exitCode?: number;
}

export interface SignalShutdown {
  /** True once a signal arrived: failures of a start in progress are expected then. */
  readonly stopping: boolean;
  /** Resolves when the stop is complete (just before the process exits). */
  readonly stopped: Promise<void>;
}

export function shutdownOnSignals(opts: SignalShutdownOptions): SignalShutdown {
  ownSignals();
  const say = opts.say ?? ((line: string) => process.stderr.write(`${line}\n`));
  // A closed terminal (SIGHUP) makes writes fail; a write error must not end the cleanup.
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});
  let firstAt = 0;
  let hurried = false;
  let markStopped!: () => void;
  const stopped = new Promise<void>((r) => (markStopped = r));
  const hurry = () => {
    if (hurried) return;
    hurried = true;
    opts.hurry();
  };
  const onSignal = (sig: NodeJS.Signals) => {
    if (firstAt === 0) {
      firstAt = Date.now();
      say(`${sig}: stopping everything … (again to kill at once)`);
      const hurryTimer = setTimeout(hurry, HURRY_AFTER_MS);
      setTimeout(() => {
        say(
          `stopping did not finish in ${GIVE_UP_AFTER_MS / 1000} s; exiting (the next start sweeps what is left)`,
        );
        process.exit(1);
      }, GIVE_UP_AFTER_MS).unref();
      void opts
        .stop()
        .catch((err: unknown) => say(`stopping failed: ${(err as Error).message}`))
        .finally(() => {
          clearTimeout(hurryTimer);
          say("stopped");
          markStopped();
          process.exit(opts.exitCode ?? 0);
        });
      return;
    }
    if (Date.now() - firstAt < REPEAT_MS || hurried) return;
    say(`${sig} again: killing everything now`);
    hurry();
  };
  for (const sig of SIGNALS) process.on(sig, onSignal);
  return {
    get stopping() {
      return firstAt !== 0;
    },
    stopped,
  };
}
