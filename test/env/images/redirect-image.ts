// The redirect image (the sidecar's port-redirect init container) from `Dockerfile.redirect`'s
// own instructions, without Docker: its FROM must be the Debian release this host runs, each
// RUN command is applied from this host's package database (debian-packages.ts) — `apt-get
// install --no-install-recommends` adds the packages' files and those of everything they
// depend on, `update-alternatives --set` picks an alternative's link — and its CMD,
// ENTRYPOINT and USER are the image's. A command this reader does not know is refused with
// its text rather than skipped.
//
// The base image is stood in for by what the init container uses of it: libc6 (with what it
// depends on) and dash, which is `/bin/sh`. The rest of the slim base (apt, coreutils,
// perl-base, …) is not copied; the RUN's packages are laid over the stand-in as a layer of
// their own, as Docker lays a RUN over its FROM.
import { readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { baseImage, DockerfileError, parseDockerfileWithArgs, type DockerStage } from "./dockerfile.js";
import {
  alternativeLinks,
  hostAlternatives,
  installedPackages,
  mergedUsrDirectories,
  packageClosure,
  packageFiles,
} from "./debian-packages.js";
import { baseDirectories, PATH_ENV, type ImageFile, type ImageSpec } from "./oci-image.js";
import { REPO_ROOT } from "./product-build.js";

/** What a stage's RUN lines ask for, read command by command. */
export interface RunPlan {
  install: string[];
  /** `update-alternatives --set name path`. */
  alternatives: Map<string, string>;
}

/** Reads RUN lines of `&&`-joined commands; `where` names the file in errors. */
export function planRuns(runs: readonly string[], where: string): RunPlan {
  const plan: RunPlan = { install: [], alternatives: new Map() };
  for (const run of runs) {
    for (const command of run.split("&&").map((c) => c.trim().replace(/\s+/g, " "))) {
      const words = command.split(" ");
      const unknown = () =>
        new DockerfileError(
          `${where}: RUN ${command}: the test images apply apt-get update/install --no-install-recommends, update-alternatives --set and rm -rf /var/lib/apt/lists/* without Docker, not this`,
        );
      if (/[;|&<>`$]/.test(command)) throw unknown();
      if (command === "apt-get update" || command === "rm -rf /var/lib/apt/lists/*") continue;
      if (words[0] === "apt-get" && words[1] === "install") {
        const flags = words.slice(2).filter((w) => w.startsWith("-"));
        if (
          !flags.includes("--no-install-recommends") ||
          flags.some((f) => !/^(-y|-q+|--no-install-recommends)$/.test(f))
        )
          throw unknown();
        plan.install.push(...words.slice(2).filter((w) => !w.startsWith("-")));
        continue;
      }
      if (words[0] === "update-alternatives" && words[1] === "--set" && words.length === 4) {
        plan.alternatives.set(words[2]!, words[3]!);
        continue;
      }
      throw unknown();
    }
  }
  return plan;
}

/** The host's Debian release codename (`bookworm`), from /etc/os-release. */
export function hostDebianRelease(osRelease = readFileSync("/etc/os-release", "utf8")): string | undefined {
  if (!/^ID=debian$/m.test(osRelease)) return undefined;
  return /^VERSION_CODENAME=(\S+)$/m.exec(osRelease)?.[1];
}

/** Refuses a FROM that is not this host's Debian release (the packages would be another release's). */
export function checkDebianBase(image: string, line: number, where: string, host: string | undefined): void {
  const m = /^(?:docker\.io\/)?(?:library\/)?debian:([a-z]+)(?:-slim)?(?:@sha256:[0-9a-f]{64})?$/.exec(image);
  if (!m)
    throw new DockerfileError(
      `${where}:${line}: the image is ${image}; the test images build only from debian:<release>[-slim]`,
    );
  if (m[1] !== host)
    throw new DockerfileError(
      `${where}:${line}: the image is ${image}, but this host is ${host ? `Debian ${host}` : "not Debian"}: ` +
        `its packages would not be that release's (build the test images on a Debian ${m[1]} host, or change the ARG)`,
    );
}

/** The image spec `file` (default `Dockerfile.redirect` of this tree) describes. */
export function redirectImage(name: string, file = join(REPO_ROOT, "Dockerfile.redirect")): ImageSpec {
  const where = basename(file);
  const dockerfile = parseDockerfileWithArgs(readFileSync(file, "utf8"));
  if (dockerfile.stages.length !== 1)
    throw new DockerfileError(`${where}: expected one stage, found ${dockerfile.stages.length}`);
  const stage: DockerStage = dockerfile.stages[0]!;
  if (stage.copies.length) throw new DockerfileError(`${where}: COPY is not applied to this image`);
  const { image, line } = baseImage(dockerfile, stage);
  checkDebianBase(image, line, where, hostDebianRelease());
  const plan = planRuns(stage.runs, where);

  const installed = installedPackages();
  const merged = mergedUsrDirectories();
  const standIn = [...packageClosure(["libc6"], installed, `${image} (its C library)`), "dash"];
  const added = packageClosure(plan.install, installed, `${where}'s apt-get install`).filter(
    (p) => !standIn.includes(p),
  );
  const base: ImageFile[] = [
    ...baseDirectories(),
    ...merged.map((d) => ({ path: `/${d}`, symlink: `usr/${d}` })),
    ...standIn.flatMap((p) => packageFiles(p, merged)),
  ];
  const run = added.flatMap((p) => packageFiles(p, merged));
  const present = new Set([...base, ...run].filter((f) => !("directory" in f)).map((f) => f.path));
  run.push(...alternativeLinks(hostAlternatives(), present, plan.alternatives, merged));
  return {
    name,
    files: base,
    layers: [run],
    ...(stage.entrypoint ? { entrypoint: stage.entrypoint } : {}),
    ...(stage.cmd ? { cmd: stage.cmd } : {}),
    env: [PATH_ENV, ...stage.env],
    ...(stage.user ? { user: stage.user } : {}),
  };
}
