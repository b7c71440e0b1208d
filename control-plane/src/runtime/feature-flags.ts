// A feature's command-line flags: it adds them to the process's command and parses what
// they hold into its own options, so no feature reads the process's options and each one's
// flags, defaults and errors live beside its code. Errors are `OptionError`s naming the flag.
import { readFileSync } from "node:fs";
import { Command } from "commander";
import { OptionError } from "../../../lib/option-error.js";
import type { ControlPlaneMode } from "./process-mode.js";

/** Every flag of the command as commander parsed it (camelCase names). */
export type FlagValues = Readonly<Record<string, string | boolean | string[] | undefined>>;

export interface FeatureFlags<O> {
  /** Adds the feature's flags to the process's command line. */
  add(cmd: Command): Command;
  /**
   * The feature's options from the parsed flags of the whole command (a feature may check its
   * flags against another's, e.g. the webhook's against the agent provisioner).
   */
  parse(values: FlagValues, mode: ControlPlaneMode): O;
}

/**
 * Parses `argv` with one feature's flags alone: what a feature's tests use instead of the
 * process's whole command line.
 */
export function parseFeatureFlags<O>(flags: FeatureFlags<O>, argv: string[], mode: ControlPlaneMode): O {
  const cmd = flags.add(
    new Command("flags").exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} }),
  );
  try {
    cmd.parse(argv, { from: "user" });
  } catch (err) {
    throw new OptionError("arguments", (err as Error).message.replace(/^error: /, ""));
  }
  return flags.parse(cmd.opts(), mode);
}

export interface ListenAddress {
  host: string;
  port: number;
}

/** `host:port` or `:port` (all interfaces) of a listen flag. */
export function parseListen(flag: string, value: string): ListenAddress {
  const m = /^(?:(\[[0-9a-fA-F:]+\]|[^:]*):)?(\d{1,5})$/.exec(value);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65535) {
    throw new OptionError(flag, `"${value}" is not host:port or :port (e.g. :9443 or 127.0.0.1:0)`);
  }
  const host = (m[1] ?? "").replace(/^\[|\]$/g, "") || "0.0.0.0";
  return { host, port };
}

/** The text of the file a flag names (a PEM bundle, a key); unreadable: an error naming the flag. */
export function readFlagFile(flag: string, path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new OptionError(flag, `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
}

/** RFC 1123 label (namespaces, cluster names) and subdomain (Secret names). */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A positive number of seconds of a flag, in ms. */
export function secondsFlag(flag: string, v: string): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0)
    throw new OptionError(flag, `must be a positive number of seconds, got "${v}"`);
  return Math.round(n * 1000);
}
