// Finding programs as a shell would: on PATH, or as a path.
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

export function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The executable `cmd` names (a path, or a name on env.PATH), or undefined. */
export function findExecutable(cmd: string, env: NodeJS.ProcessEnv): string | undefined {
  const candidates = cmd.includes("/")
    ? [cmd]
    : (env.PATH ?? "").split(delimiter).map((d) => join(d || ".", cmd));
  return candidates.find(isExecutable);
}
