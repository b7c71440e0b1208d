// The process provisioner's state directory: agent records (whose pids the control plane
// signals) and agent logs. Whoever can write there can make the control plane signal a
// process of their choosing, so the directory is private: created mode 0700, and refused
// when it already exists owned by another user, open to group or others, or as a symbolic
// link. The default is per user — `$XDG_RUNTIME_DIR/switchyard-agents` when that is set (a
// per-user 0700 directory by the XDG spec), else `<tmpdir>/switchyard-agents-<uid>` — and
// checked like any other: in a shared /tmp anyone may have created that name first.
import { lstatSync, mkdirSync, type Stats } from "node:fs";
import { tmpdir } from "node:os";
import { isAbsolute, join } from "node:path";
import { OptionError } from "../../../lib/option-error.js";

/** The flag that sets the directory, named by every refusal. */
export const AGENT_STATE_DIR_FLAG = "--agent-state-dir";

const uid = (): number | undefined => process.getuid?.();

/** The default state directory of this user (not created). */
export function defaultAgentStateDir(env: NodeJS.ProcessEnv = process.env): string {
  const runtime = env.XDG_RUNTIME_DIR;
  if (runtime && isAbsolute(runtime)) return join(runtime, "switchyard-agents");
  return join(tmpdir(), `switchyard-agents-${uid() ?? "user"}`);
}

function refuse(dir: string, problem: string): OptionError {
  return new OptionError(
    AGENT_STATE_DIR_FLAG,
    `${dir} ${problem}; agent records there name processes the control plane signals, so it must ` +
      `be a directory of this user with mode 0700: fix it (chmod 700), remove it, or give ` +
      `${AGENT_STATE_DIR_FLAG} a private directory`,
  );
}

/** Throws unless `st` (from lstat) is a directory of this user that no one else may use. */
function checkPrivate(dir: string, st: Stats): void {
  if (st.isSymbolicLink()) throw refuse(dir, "is a symbolic link");
  if (!st.isDirectory()) throw refuse(dir, "is not a directory");
  const me = uid();
  if (me !== undefined && st.uid !== me)
    throw refuse(dir, `belongs to uid ${st.uid}, not to this user (uid ${me})`);
  const mode = st.mode & 0o777;
  if ((mode & 0o077) !== 0)
    throw refuse(dir, `has mode ${mode.toString(8).padStart(4, "0")}, open to group or others`);
}

/**
 * Creates each of `dirs` (outermost first, each inside the one before) with mode 0700 when
 * missing, and checks every one is private; throws an OptionError naming
 * `--agent-state-dir` otherwise. Returns the innermost.
 */
export function preparePrivateDirs(...dirs: [string, ...string[]]): string {
  for (const dir of dirs) {
    try {
      mkdirSync(dir, { mode: 0o700 });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT") mkdirSync(dir, { recursive: true, mode: 0o700 });
      else if (code !== "EEXIST") throw refuse(dir, `cannot be created (${(err as Error).message})`);
    }
    checkPrivate(dir, lstatSync(dir));
  }
  return dirs[dirs.length - 1]!;
}
