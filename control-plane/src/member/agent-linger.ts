// How long an idle sidecar agent stays, as pure functions over a workload's annotations: the
// install's default (`--agent-linger-seconds`) unless the workload's owner set its own
// (`switchyard.dev/agent-linger-seconds`), and the linger record written when the last session
// ended (`switchyard.dev/agent-linger-until`: a time, or `never`). The record lives on the
// workload, so a restarted or newly elected control plane reads when to restore from the
// cluster, never from memory.
import {
  LINGER_FOREVER,
  LINGER_SECONDS_ANNOTATION,
  LINGER_UNTIL_ANNOTATION,
  REMOVE_REQUESTED_ANNOTATION,
} from "./agent-annotations.js";

/** The longest linger short of "until removed": 30 days, in seconds. */
export const MAX_LINGER_SECONDS = 30 * 86_400;

export type Annotations = Record<string, string> | undefined;

/**
 * Seconds the idle agent of this workload stays: -1 = until removed, 0 = restore at once. A
 * removal asked for while sessions used the agent wins (0); then the workload's own annotation
 * when it is an integer in range; else the install's default.
 */
export function lingerSecondsFor(annotations: Annotations, installDefault: number): number {
  if (annotations?.[REMOVE_REQUESTED_ANNOTATION] !== undefined) return 0;
  const own = annotations?.[LINGER_SECONDS_ANNOTATION];
  if (own !== undefined && /^-?\d+$/.test(own.trim())) {
    const n = Number(own.trim());
    if (n >= -1 && n <= MAX_LINGER_SECONDS) return n;
  }
  return installDefault;
}

/** Why the workload's own linger annotation is ignored (undefined when it is absent or valid). */
export function lingerAnnotationProblem(annotations: Annotations): string | undefined {
  const own = annotations?.[LINGER_SECONDS_ANNOTATION];
  if (own === undefined) return undefined;
  const n = /^-?\d+$/.test(own.trim()) ? Number(own.trim()) : NaN;
  if (n >= -1 && n <= MAX_LINGER_SECONDS) return undefined;
  return (
    `annotation ${LINGER_SECONDS_ANNOTATION}="${own}" is not an integer from -1 (until removed) to ` +
    `${MAX_LINGER_SECONDS}; using the install's sidecar.lingerSeconds`
  );
}

/** The linger record for an agent that went idle at `now` (ms) for `seconds` (> 0 or -1). */
export function lingerUntilValue(now: number, seconds: number): string {
  return seconds < 0 ? LINGER_FOREVER : new Date(now + seconds * 1000).toISOString();
}

/**
 * The workload's linger record: epoch ms, "never", or undefined when there is none (a session
 * uses the agent, or none was ever injected). A record that is not a time counts as expired:
 * nobody but the member writes it, so a mangled one must not keep an agent forever.
 */
export function lingerUntil(annotations: Annotations): number | "never" | undefined {
  const v = annotations?.[LINGER_UNTIL_ANNOTATION];
  if (v === undefined) return undefined;
  if (v === LINGER_FOREVER) return "never";
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : 0;
}
