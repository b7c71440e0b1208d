// The README index rule (test/lint/README.md): what a README's index names, and the check that
// every tracked folder's entries are named by the index that owns the folder, and that every name
// in an index exists.

/** A name an index lists, as written (backticks and link markup removed), with its line (1-based). */
export interface IndexName {
  name: string;
  line: number;
}

/** Header words of an index table's first column; any other first column is not an index. */
const indexHeader = /^(files?|folders?|modules?|entry|entries)(\s*(\/|,|or)\s*(files?|folders?|modules?))*$/i;

/** Entries that never need naming: the README itself and placeholders that keep a folder in git. */
const notEntries = new Set(["README.md", ".gitkeep"]);

const delimiterRow = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function cells(row: string): string[] {
  const inner = row
    .trim()
    .replace(/^\|/, "")
    .replace(/(?<!\\)\|$/, "");
  return inner.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

/** The names of a first cell: its code spans, or without any, its text split at commas. */
function cellNames(cell: string): string[] {
  const spans = [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.trim());
  if (spans.length > 0) return spans;
  const text = cell.replace(/\[([^\]]*)\]\([^)]*\)/g, "$1");
  return text
    .split(",")
    .map((n) => n.trim())
    .filter((n) => n !== "");
}

/**
 * The names a README's index lists: the first cell of every body row of a table whose header's
 * first cell is `file`, `folder`, `module` or `entry` (plurals and combinations like
 * `folder / module` too), and the first word of every line of a fenced block without a language
 * that starts with the README's folder path from the repository root (`cli/src/main.ts` in
 * cli/README.md). `folder` is that path ("" for the root README, whose fences never count).
 */
export function indexNames(markdown: string, folder: string): IndexName[] {
  const lines = markdown.split(/\r?\n/);
  const names: IndexName[] = [];
  let fence: { marker: string; index: boolean } | undefined;
  let table: "index" | "other" | undefined;
  lines.forEach((text, i) => {
    const line = i + 1;
    const fenceMark = /^\s*(`{3,}|~{3,})(.*)$/.exec(text);
    if (fence) {
      if (fenceMark && fenceMark[1]!.startsWith(fence.marker) && fenceMark[2]!.trim() === "") {
        fence = undefined;
      } else if (fence.index && folder !== "") {
        const first = text.trim().split(/\s+/)[0] ?? "";
        if (first.startsWith(`${folder}/`)) names.push({ name: first, line });
      }
      return;
    }
    if (fenceMark) {
      fence = { marker: fenceMark[1]!, index: fenceMark[2]!.trim() === "" };
      table = undefined;
      return;
    }
    if (!text.trim().startsWith("|")) {
      table = undefined;
      return;
    }
    if (table === undefined) {
      const isTable = delimiterRow.test(lines[i + 1] ?? "");
      table = isTable && indexHeader.test(cells(text)[0] ?? "") ? "index" : "other";
      return;
    }
    if (table === "other" || delimiterRow.test(text)) return;
    for (const name of cellNames(cells(text)[0] ?? "")) names.push({ name, line });
  });
  return names;
}

/** What is wrong with one README's index: entries it does not name, names that match nothing. */
export interface IndexProblems {
  readme: string;
  missing: string[];
  unknown: IndexName[];
}

/** A folder with entries but no README, whose entries the nearest README above (`owner`) names none of. */
export interface FolderWithoutReadme {
  folder: string;
  owner: string | undefined;
}

export interface IndexReport {
  readmes: IndexProblems[];
  withoutReadme: FolderWithoutReadme[];
  /** Allow-list folders that have a README or are not tracked. */
  staleExemptions: string[];
}

const parent = (path: string) => path.slice(0, Math.max(0, path.lastIndexOf("/")));
const join = (folder: string, name: string) => (folder === "" ? name : `${folder}/${name}`);
const inside = (path: string, folder: string) => folder === "" || path.startsWith(`${folder}/`);

function globRegExp(pattern: string): RegExp {
  const body = pattern
    .split("*")
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
    .join("[^/]*");
  return new RegExp(`^${body}$`);
}

/**
 * Checks every README index against the tracked files (`git ls-files`, repository-relative).
 * `read` returns a README's text; `exempt` lists folders that need no README (with everything
 * under them).
 */
export function checkIndexes(
  files: readonly string[],
  read: (readme: string) => string,
  exempt: readonly string[],
): IndexReport {
  const fileSet = new Set(files);
  const entries = new Map<string, Set<string>>([["", new Set()]]);
  for (const file of files) {
    let path = file;
    while (path !== "") {
      const up = parent(path);
      if (!entries.has(up)) entries.set(up, new Set());
      const name = up === "" ? path : path.slice(up.length + 1);
      if (!notEntries.has(name)) entries.get(up)!.add(name);
      path = up;
    }
  }
  const folders = [...entries.keys()].sort();
  const hasReadme = (folder: string) => fileSet.has(join(folder, "README.md"));
  const isExempt = (folder: string) => exempt.some((e) => folder === e || inside(folder, e));

  const matches = (path: string, wantFolder: boolean): string[] => {
    if (!path.includes("*")) {
      return entries.has(path) || (!wantFolder && fileSet.has(path)) ? [path] : [];
    }
    const re = globRegExp(path);
    const candidates = wantFolder ? folders : [...folders, ...files];
    return candidates.filter((c) => c !== "" && re.test(c));
  };

  const named = new Map<string, string[]>();
  const readmes = new Map<string, IndexProblems>();
  for (const folder of folders.filter(hasReadme)) {
    const readme = join(folder, "README.md");
    const paths: string[] = [];
    const unknown: IndexName[] = [];
    for (const entry of indexNames(read(readme), folder)) {
      const wantFolder = entry.name.endsWith("/");
      const name = entry.name.replace(/^\.\//, "").replace(/\/+$/, "");
      let found = name === "" ? [] : matches(join(folder, name), wantFolder);
      if (found.length === 0 && folder !== "" && name.includes("/")) found = matches(name, wantFolder);
      if (found.length === 0) unknown.push(entry);
      paths.push(...found);
    }
    named.set(folder, paths);
    readmes.set(folder, { readme, missing: [], unknown });
  }
  const ownerOf = (folder: string): string | undefined => {
    for (let f = folder; ; f = parent(f)) {
      if (hasReadme(f)) return f;
      if (f === "") return undefined;
    }
  };

  const withoutReadme: FolderWithoutReadme[] = [];
  for (const folder of folders) {
    if (isExempt(folder)) continue;
    const own = [...entries.get(folder)!].sort();
    const owner = ownerOf(folder);
    const paths = owner === undefined ? [] : named.get(owner)!;
    if (owner !== folder && own.length > 0 && !paths.some((p) => inside(p, folder))) {
      withoutReadme.push({ folder, owner: owner === undefined ? undefined : join(owner, "README.md") });
      continue;
    }
    for (const name of own) {
      const path = join(folder, name);
      if (paths.some((p) => p === path || p.startsWith(`${path}/`))) continue;
      const shown = owner === "" ? path : path.slice(owner!.length + 1);
      readmes.get(owner!)!.missing.push(entries.has(path) ? `${shown}/` : shown);
    }
  }

  const staleExemptions = exempt.filter((e) => !entries.has(e) || hasReadme(e));
  return {
    readmes: [...readmes.values()].filter((r) => r.missing.length > 0 || r.unknown.length > 0),
    withoutReadme,
    staleExemptions,
  };
}

/** One line per problem, for a test failure. */
export function describeReport(report: IndexReport): string[] {
  return [
    ...report.readmes.flatMap((r) => [
      ...r.missing.map((m) => `${r.readme}: does not name ${m}`),
      ...r.unknown.map((u) => `${r.readme}:${u.line}: names ${u.name}, which matches nothing tracked`),
    ]),
    ...report.withoutReadme.map(
      (w) =>
        `${w.folder === "" ? "the repository root" : `${w.folder}/`}: no README.md, and ` +
        `${w.owner ?? "no README above it"} names none of its entries (add one with an index)`,
    ),
    ...report.staleExemptions.map((f) => `${f}: exempt from a README, but it has one or is not tracked`),
  ];
}
