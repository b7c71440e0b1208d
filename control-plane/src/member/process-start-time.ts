// Which process a pid names. Pids are reused, so a pid written down earlier — in a record
// that outlives the control plane — may belong to an unrelated process by now. A pid
// together with its start time (field 22 of /proc/<pid>/stat: clock ticks after boot)
// names one process for good: a later process with the same pid starts later.
import { readFileSync } from "node:fs";

/** The fields of /proc/<pid>/stat after the command name, or undefined (no such process, no /proc). */
function statFields(pid: number): string[] | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name is parenthesised and may itself hold spaces and ")": split after the last.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/**
 * The start time of `pid` (field 22 of /proc/<pid>/stat, as a decimal string), or
 * undefined when no such process runs or the platform has no /proc.
 */
export function processStartTime(pid: number): string | undefined {
  return statFields(pid)?.[19]; // field 22, counted from field 3 (the state) at index 0
}

/**
 * True while the process that `pid` and `startTime` name runs. A zombie has finished; an
 * empty `startTime` (not known when recorded) never matches.
 */
export function isSameProcess(pid: number, startTime: string): boolean {
  const fields = statFields(pid);
  if (!fields || !startTime) return false;
  return fields[19] === startTime && fields[0] !== "Z" && fields[0] !== "X";
}
