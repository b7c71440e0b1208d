// Who may open a session on this agent. The workload router presents a secret as
// `Authorization: Bearer <secret>` on the upgrade to /v1/sessions/{id}; the agent keeps
// only sha256 hashes (lowercase hex) and compares in constant time (proto/session-auth.ts).
// Hashes come from `--secret-hash` (valid for every session: the per-agent secret the
// control plane passes when it starts an agent) and from an optional secrets file
// (re-read when its mtime changes) for per-session secrets and DB branches:
//
//   secretSha256: [<hex>, …]            # optional: valid for every session
//   sessions:
//     <session id>:
//       secretSha256: <hex> | [<hex>, …]
//       branch: { variable: DATABASE_URL, branch: feature-x }   # optional DB branch
//
// JSON or YAML. Nothing in this repository's control plane writes that file: whoever runs
// the agent provides it. A file that fails to parse keeps the last good content (logged).
import { readFile, stat } from "node:fs/promises";
import { parse as parseYaml } from "yaml";
import { OptionError } from "../../../lib/option-error.js";
import { isSecretHash, secretMatches } from "../../../proto/session-auth.js";
import type { BranchDatabaseRewrite } from "./target/branch-rewrite.js";

export const SECRETS_FILE_INVALID = "SWITCHYARD_AGENT_SECRETS_FILE";

/** The secrets file cannot be read or says something the agent cannot use; names the field. */
export class SecretsFileError extends Error {
  override readonly name = "SecretsFileError";
  readonly code = SECRETS_FILE_INVALID;
}

/** What an accepted secret grants: the session's connect parameters. */
export interface SessionGrant {
  branch?: BranchDatabaseRewrite;
}

interface SessionEntry {
  /** Lowercase hex sha256s. */
  hashes: string[];
  grant: SessionGrant;
}

interface SecretsContent {
  any: string[];
  sessions: Map<string, SessionEntry>;
}

type Invalid = (where: string, problem: string) => Error;
const fileError: Invalid = (where, problem) => new SecretsFileError(`${where} ${problem}`);

function hashOf(where: string, raw: unknown, invalid: Invalid): string {
  const hash = typeof raw === "string" ? raw.toLowerCase() : "";
  if (!isSecretHash(hash))
    throw invalid(where, `must be a sha256 in hex (64 characters), got ${JSON.stringify(raw)?.slice(0, 80)}`);
  return hash;
}

function hashList(where: string, raw: unknown, invalid: Invalid = fileError): string[] {
  if (raw === undefined) return [];
  return (Array.isArray(raw) ? raw : [raw]).map((h, i) =>
    hashOf(Array.isArray(raw) ? `${where}[${i}]` : where, h, invalid),
  );
}

/** Parses a secrets file's text; throws SecretsFileError naming the bad field. */
export function parseSecretsFile(text: string, file = "secrets file"): SecretsContent {
  let doc: unknown;
  try {
    doc = parseYaml(text) ?? {};
  } catch (err) {
    throw new SecretsFileError(`${file} is not JSON or YAML: ${(err as Error).message}`);
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    throw new SecretsFileError(`${file} must hold a mapping with secretSha256 and/or sessions`);
  }
  const d = doc as { secretSha256?: unknown; sessions?: unknown };
  const out: SecretsContent = { any: hashList(`${file}: secretSha256`, d.secretSha256), sessions: new Map() };
  if (d.sessions !== undefined) {
    if (typeof d.sessions !== "object" || d.sessions === null || Array.isArray(d.sessions)) {
      throw new SecretsFileError(`${file}: sessions must map session ids to entries`);
    }
    for (const [id, raw] of Object.entries(d.sessions as Record<string, unknown>)) {
      const e = (raw ?? {}) as { secretSha256?: unknown; branch?: unknown };
      const where = `${file}: sessions.${id}`;
      const grant: SessionGrant = {};
      if (e.branch !== undefined) {
        const b = e.branch as { variable?: unknown; branch?: unknown };
        if (typeof b.variable !== "string" || !b.variable || typeof b.branch !== "string" || !b.branch) {
          throw new SecretsFileError(`${where}.branch needs non-empty strings variable and branch`);
        }
        grant.branch = { variable: b.variable, branch: b.branch };
      }
      out.sessions.set(id, { hashes: hashList(`${where}.secretSha256`, e.secretSha256), grant });
    }
  }
  return out;
}

export interface SessionSecretsOptions {
  /** sha256 hex hashes accepted for every session (`--secret-hash`). */
  secretHashes?: readonly string[];
  /** Path of the secrets file (`--secrets-file`); re-read when its mtime changes. */
  secretsFile?: string;
  /** Called when the file cannot be read or parsed (the last good content stays in force). */
  onFileError?: (err: Error) => void;
}

const matchesAny = (secret: string, hashes: readonly string[]) =>
  hashes.some((h) => secretMatches(secret, h));

export class SessionSecrets {
  private readonly flagHashes: string[];
  private file: SecretsContent = { any: [], sessions: new Map() };
  private fileMtimeMs = -1;

  constructor(private readonly opts: SessionSecretsOptions) {
    this.flagHashes = hashList(
      "--secret-hash",
      [...(opts.secretHashes ?? [])],
      (where, problem) => new OptionError(where, problem),
    );
    if (this.flagHashes.length === 0 && !opts.secretsFile) {
      throw new OptionError(
        "--secret-hash",
        "no way to authenticate routers: give --secret-hash <sha256 hex> or --secrets-file <path>",
      );
    }
  }

  /** Loads the file now (startup): a missing or bad file is an error here, not later. */
  async load(): Promise<void> {
    if (!this.opts.secretsFile) return;
    await this.refresh(true);
  }

  private async refresh(strict: boolean): Promise<void> {
    const path = this.opts.secretsFile;
    if (!path) return;
    try {
      const s = await stat(path);
      if (s.mtimeMs === this.fileMtimeMs) return;
      this.file = parseSecretsFile(await readFile(path, "utf8"), path);
      this.fileMtimeMs = s.mtimeMs;
    } catch (err) {
      if (strict)
        throw err instanceof SecretsFileError
          ? err
          : new SecretsFileError(`cannot read ${path}: ${(err as Error).message}`);
      this.opts.onFileError?.(err as Error);
    }
  }

  /** The session's grant when `secret` is accepted for `sessionId`, else undefined. */
  async authorize(sessionId: string, secret: string): Promise<SessionGrant | undefined> {
    await this.refresh(false);
    const entry = this.file.sessions.get(sessionId);
    if (entry && matchesAny(secret, entry.hashes)) return entry.grant;
    if (matchesAny(secret, this.flagHashes) || matchesAny(secret, this.file.any)) return entry?.grant ?? {};
    return undefined;
  }
}
