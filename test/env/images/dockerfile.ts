// Reads the repository's production Dockerfile as data, so the images built here without
// Docker come from the same file list and the same config: the build stage's COPY sources are
// the build context, the final stage's `COPY --from=build` lines are the image's contents, and
// its WORKDIR, ENV, USER, EXPOSE, ENTRYPOINT and CMD are the image's config. Only the subset of
// Dockerfile syntax that file uses is understood; anything else is refused rather than guessed.
import { readFileSync } from "node:fs";
import { posix } from "node:path";

export interface DockerCopy {
  /** The stage it copies from (`--from=`), or undefined for the build context. */
  from?: string;
  sources: string[];
  /** Absolute destination (relative ones resolved against WORKDIR); ends with `/` for "into". */
  dest: string;
}

export interface DockerStage {
  name?: string;
  /** The FROM image as written (`${NODE_IMAGE}`), and the 1-based line of that FROM. */
  from: string;
  fromLine: number;
  workdir: string;
  env: string[];
  user?: string;
  expose: string[];
  entrypoint?: string[];
  cmd?: string[];
  copies: DockerCopy[];
  runs: string[];
}

/** An ARG before the first FROM (usable in FROM lines): its default and its 1-based line. */
export interface DockerArg {
  name: string;
  value?: string;
  line: number;
}

export interface Dockerfile {
  args: DockerArg[];
  stages: DockerStage[];
}

export class DockerfileError extends Error {
  readonly code = "SWITCHYARD_TEST_DOCKERFILE_UNSUPPORTED";
}

/** Instructions as `[keyword, rest, line]`, comments dropped and `\` continuations joined. */
function instructions(text: string): [string, string, number][] {
  const out: [string, string, number][] = [];
  let pending: { text: string; line: number } | undefined;
  const lines = text.split("\n");
  for (const [i, raw] of lines.entries()) {
    if (/^\s*#/.test(raw)) continue;
    const continued = raw.endsWith("\\");
    const part = continued ? `${raw.slice(0, -1)} ` : raw;
    pending = pending ? { ...pending, text: pending.text + part } : { text: part, line: i + 1 };
    if (continued) continue;
    const l = pending.text.trim();
    const line = pending.line;
    pending = undefined;
    if (!l) continue;
    const m = /^(\S+)\s+(.*)$/.exec(l);
    if (!m) throw new DockerfileError(`cannot read Dockerfile line ${line}: ${l}`);
    out.push([m[1]!.toUpperCase(), m[2]!.trim(), line]);
  }
  if (pending?.text.trim()) throw new DockerfileError(`Dockerfile line ${pending.line} ends with \\`);
  return out;
}

/** An exec-form JSON array (`["node"]`); the shell form is refused (its meaning needs a shell). */
function execForm(keyword: string, rest: string): string[] {
  if (!rest.startsWith("[")) throw new DockerfileError(`${keyword} must use the exec form: ${rest}`);
  return JSON.parse(rest) as string[];
}

/** The stages of `text`, in order. */
export function parseDockerfile(text: string): DockerStage[] {
  return parseDockerfileWithArgs(text).stages;
}

/** The global ARGs (before the first FROM) and the stages of `text`, in order. */
export function parseDockerfileWithArgs(text: string): Dockerfile {
  const stages: DockerStage[] = [];
  const args: DockerArg[] = [];
  for (const [keyword, rest, line] of instructions(text)) {
    if (keyword === "ARG") {
      const m = /^(\w+)(?:=(\S+))?$/.exec(rest);
      if (!m) throw new DockerfileError(`line ${line}: ARG must be NAME or NAME=value: ${rest}`);
      // A stage's own ARGs do not reach FROM lines; only the global ones are kept.
      if (!stages.length) args.push({ name: m[1]!, ...(m[2] !== undefined ? { value: m[2] } : {}), line });
      continue;
    }
    if (keyword === "FROM") {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest);
      if (!m) throw new DockerfileError(`cannot read FROM ${rest}`);
      stages.push({
        ...(m[2] ? { name: m[2] } : {}),
        from: m[1]!,
        fromLine: line,
        workdir: "/",
        env: [],
        expose: [],
        copies: [],
        runs: [],
      });
      continue;
    }
    const stage = stages.at(-1);
    if (!stage) throw new DockerfileError(`${keyword} before FROM`);
    switch (keyword) {
      case "WORKDIR":
        stage.workdir = posix.resolve(stage.workdir, rest);
        break;
      case "ENV": {
        const m = /^(\w+)=(\S*)$/.exec(rest);
        if (!m) throw new DockerfileError(`ENV must be KEY=value: ${rest}`);
        stage.env.push(`${m[1]}=${m[2]}`);
        break;
      }
      case "USER":
        stage.user = rest;
        break;
      case "EXPOSE":
        stage.expose.push(...rest.split(/\s+/).map((p) => (p.includes("/") ? p : `${p}/tcp`)));
        break;
      case "ENTRYPOINT":
        stage.entrypoint = execForm(keyword, rest);
        break;
      case "CMD":
        stage.cmd = execForm(keyword, rest);
        break;
      case "RUN":
        stage.runs.push(rest);
        break;
      case "COPY": {
        const words = rest.split(/\s+/);
        const flags = words.filter((w) => w.startsWith("--"));
        const paths = words.filter((w) => !w.startsWith("--"));
        const from = flags.find((f) => f.startsWith("--from="))?.slice("--from=".length);
        if (flags.some((f) => !f.startsWith("--from=")) || paths.length < 2)
          throw new DockerfileError(`unsupported COPY ${rest}`);
        const raw = paths.at(-1)!;
        const dest = posix.resolve(stage.workdir, raw);
        stage.copies.push({
          ...(from ? { from } : {}),
          sources: paths.slice(0, -1),
          // A trailing slash means "into this directory" (kept so the reader can tell).
          dest: raw.endsWith("/") && dest !== "/" ? `${dest}/` : dest,
        });
        break;
      }
      default:
        throw new DockerfileError(`unsupported Dockerfile instruction ${keyword}`);
    }
  }
  return { args, stages };
}

export function readDockerfile(path: string): DockerStage[] {
  return parseDockerfile(readFileSync(path, "utf8"));
}

/**
 * A stage's base image with the global ARG defaults substituted (`${NAME}` and `$NAME`), and the
 * line that names it: the ARG's when the FROM takes it from one, else the FROM's.
 */
export function baseImage(file: Dockerfile, stage: DockerStage): { image: string; line: number } {
  let line = stage.fromLine;
  const image = stage.from.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, braced?: string, bare?: string) => {
    const name = (braced ?? bare)!;
    const arg = file.args.find((a) => a.name === name);
    if (arg?.value === undefined)
      throw new DockerfileError(`line ${stage.fromLine}: FROM ${stage.from} uses ${name}, which no ARG sets`);
    line = arg.line;
    return arg.value;
  });
  return { image, line };
}
