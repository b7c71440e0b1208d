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
  workdir: string;
  env: string[];
  user?: string;
  expose: string[];
  entrypoint?: string[];
  cmd?: string[];
  copies: DockerCopy[];
  runs: string[];
}

export class DockerfileError extends Error {
  readonly code = "SWITCHYARD_TEST_DOCKERFILE_UNSUPPORTED";
}

/** Instructions as `[keyword, rest]`, comments dropped and `\` continuations joined. */
function instructions(text: string): [string, string][] {
  const joined = text
    .split("\n")
    .filter((l) => !/^\s*#/.test(l))
    .join("\n")
    .replace(/\\\n/g, " ");
  return joined
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      const m = /^(\S+)\s+(.*)$/.exec(l);
      if (!m) throw new DockerfileError(`cannot read Dockerfile line: ${l}`);
      return [m[1]!.toUpperCase(), m[2]!.trim()];
    });
}

/** An exec-form JSON array (`["node"]`); the shell form is refused (its meaning needs a shell). */
function execForm(keyword: string, rest: string): string[] {
  if (!rest.startsWith("[")) throw new DockerfileError(`${keyword} must use the exec form: ${rest}`);
  return JSON.parse(rest) as string[];
}

/** The stages of `text`, in order. */
export function parseDockerfile(text: string): DockerStage[] {
  const stages: DockerStage[] = [];
  for (const [keyword, rest] of instructions(text)) {
    if (keyword === "ARG") continue;
    if (keyword === "FROM") {
      const m = /^\S+(?:\s+AS\s+(\S+))?$/i.exec(rest);
      if (!m) throw new DockerfileError(`cannot read FROM ${rest}`);
      stages.push({
        ...(m[1] ? { name: m[1] } : {}),
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
  return stages;
}

export function readDockerfile(path: string): DockerStage[] {
  return parseDockerfile(readFileSync(path, "utf8"));
}
