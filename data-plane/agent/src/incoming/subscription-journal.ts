// The agent's subscriptions on disk, so that an agent that restarts knows its sessions
// before it accepts a single connection. Without it a restarted agent would hand every
// connection to the app until the routers replay their subscriptions — and a keep-alive
// connection accepted in that moment would stay with the app for good. With it the
// restarted agent reloads each subscription *held* (incoming/port-subscriptions.ts):
// traffic for it waits until its session reconnects and renews it, or the hold lapses.
//
// The file lives where a container restart does not reach (the sidecar template puts it in
// an emptyDir of the pod) and only the agent's user may read it (mode 0600): it holds
// session ids, ports, modes and HTTP filters, never a secret. Every change rewrites it
// whole through a temporary file and a rename, so a crash leaves the old or the new
// version, never half of one. A file that cannot be read back is logged and ignored: the
// agent then starts as before, knowing nothing.
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import type { Logger } from "pino";
import type { HttpFilter } from "./http-filter.js";
import type { PortSubscriptions, SubscriptionMode } from "./port-subscriptions.js";

export interface JournalEntry {
  sessionId: string;
  port: number;
  mode: SubscriptionMode;
  filter?: HttpFilter;
}

interface JournalFile {
  version: 1;
  subscriptions: JournalEntry[];
}

export interface SubscriptionJournalOptions {
  path: string;
  subscriptions: PortSubscriptions;
  logger: Logger;
}

export class SubscriptionJournal {
  private detach: (() => void) | undefined;

  constructor(private readonly o: SubscriptionJournalOptions) {}

  /**
   * Reloads the saved subscriptions into `subscriptions` (renewing nothing: the caller holds
   * them) and returns the sessions they belong to. A missing file is an empty journal.
   */
  restore(): string[] {
    const entries = this.read();
    const sessions = new Set<string>();
    for (const e of entries) {
      try {
        this.o.subscriptions.subscribe(e.sessionId, e.port, e.mode, e.filter);
        sessions.add(e.sessionId);
      } catch (err) {
        this.o.logger.warn(
          { session: e.sessionId, port: e.port, err: (err as Error).message },
          "a saved subscription could not be restored; left out",
        );
      }
    }
    return [...sessions];
  }

  /** From now on every change of the subscriptions rewrites the file. */
  attach(): void {
    this.detach ??= this.o.subscriptions.onChange(() => this.write());
    this.write();
  }

  /**
   * Stops writing: called before the agent ends its sessions on shutdown, so the file keeps
   * what was live for the agent that starts next (a container restart; a deleted pod takes
   * its emptyDir with it).
   */
  stop(): void {
    this.detach?.();
    this.detach = undefined;
  }

  private read(): JournalEntry[] {
    let text: string;
    try {
      text = readFileSync(this.o.path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
      this.o.logger.warn(
        { path: this.o.path, err: (err as Error).message },
        "cannot read the saved subscriptions; starting without them",
      );
      return [];
    }
    try {
      return parseJournal(text);
    } catch (err) {
      this.o.logger.warn(
        { path: this.o.path, err: (err as Error).message },
        "the saved subscriptions are not valid; starting without them",
      );
      return [];
    }
  }

  private write(): void {
    const body: JournalFile = {
      version: 1,
      subscriptions: this.o.subscriptions.all().map((s) => ({
        sessionId: s.sessionId,
        port: s.port,
        mode: s.mode,
        ...(s.filter ? { filter: s.filter } : {}),
      })),
    };
    const tmp = `${this.o.path}.tmp`;
    try {
      mkdirSync(dirname(this.o.path), { recursive: true, mode: 0o700 });
      writeFileSync(tmp, JSON.stringify(body), { mode: 0o600 });
      renameSync(tmp, this.o.path);
    } catch (err) {
      try {
        rmSync(tmp, { force: true });
      } catch {
        // nothing was written there
      }
      this.o.logger.warn(
        { path: this.o.path, err: (err as Error).message },
        "cannot save the subscriptions; a restart of this agent would not know them",
      );
    }
  }
}

/** The entries of a journal file; throws naming what is wrong. */
export function parseJournal(text: string): JournalEntry[] {
  const doc = JSON.parse(text) as Partial<JournalFile> | null;
  if (!doc || typeof doc !== "object" || doc.version !== 1 || !Array.isArray(doc.subscriptions))
    throw new Error("expected {version: 1, subscriptions: [...]}");
  return doc.subscriptions.map((e, i) => {
    const ok =
      e &&
      typeof e === "object" &&
      typeof e.sessionId === "string" &&
      Number.isInteger(e.port) &&
      (e.mode === "mirror" || e.mode === "steal") &&
      (e.filter === undefined || (typeof e.filter === "object" && e.filter !== null));
    if (!ok)
      throw new Error(
        `subscriptions[${i}] needs sessionId, port, mode (mirror|steal) and an optional filter`,
      );
    return e;
  });
}
