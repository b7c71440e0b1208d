// Puts ElasticMQ (an SQS-compatible server on the JVM) in the binary cache, once per version:
// `<binaryCacheDir()>/elasticmq-<version>/lib/*.jar`, org.elasticmq:elasticmq-server_2.13 and
// every jar it depends on, resolved from Maven Central by Maven through a throwaway POM. Maven's
// own repository stays in `<binaryCacheDir()>/m2`, so a version bump downloads only what changed.
// Concurrent callers serialize on a lock file; the finished directory appears by one rename.
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { BinaryBuildError, binaryCacheDir, lock } from "../binaries.js";
import { versions } from "../versions.js";

const execFileAsync = promisify(execFile);

const GROUP_ID = "org.elasticmq";
const ARTIFACT_ID = "elasticmq-server_2.13";
/** Pinned so that every Maven resolves the same way (Maven 3.8's default is 2.8, 3.9's newer). */
const DEPENDENCY_PLUGIN_VERSION = "3.8.1";
const MINIMUM_JAVA = 17;

const prerequisite = () =>
  `ElasticMQ, the SQS server of the queue-splitting tests, needs Java >= ${MINIMUM_JAVA} (java) and ` +
  "Maven (mvn) on PATH: on Debian/Ubuntu `apt-get install --no-install-recommends " +
  "default-jre-headless maven` (.ci/run does it); see Prerequisites in README.md.";

/** The directory of the pinned ElasticMQ's jars (present once `ensureElasticmq` has resolved). */
export function elasticmqLibDir(): string {
  return join(binaryCacheDir(), `elasticmq-${versions.elasticmq}`, "lib");
}

/** The main jar, whose presence marks a complete directory (it appears by one rename). */
const serverJar = (lib: string) => join(lib, `${ARTIFACT_ID}-${versions.elasticmq}.jar`);

/** The absolute path of `name` on PATH, or undefined. */
export function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(":").filter(Boolean)) {
    const candidate = join(dir, name);
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** `java` on PATH, or an error naming the packages to install. */
export function javaCommand(): string {
  const java = onPath("java");
  if (!java) throw new BinaryBuildError(`java is not installed. ${prerequisite()}`);
  return java;
}

async function checkJava(java: string): Promise<void> {
  // `java -version` prints to stderr: `openjdk version "17.0.15" 2025-04-15` (or "1.8.0_…" up to 8).
  const { stderr } = await execFileAsync(java, ["-version"]);
  const m = /version "(\d+)(?:\.(\d+))?/.exec(stderr);
  const major = m ? (m[1] === "1" ? Number(m[2]) : Number(m[1])) : NaN;
  if (!(major >= MINIMUM_JAVA))
    throw new BinaryBuildError(`${java} is Java ${m ? major : "of unknown version"}. ${prerequisite()}`);
}

function pom(): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.switchyard.test</groupId>
  <artifactId>elasticmq-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>${GROUP_ID}</groupId>
      <artifactId>${ARTIFACT_ID}</artifactId>
      <version>${versions.elasticmq}</version>
    </dependency>
  </dependencies>
  <build>
    <pluginManagement>
      <plugins>
        <plugin>
          <groupId>org.apache.maven.plugins</groupId>
          <artifactId>maven-dependency-plugin</artifactId>
          <version>${DEPENDENCY_PLUGIN_VERSION}</version>
        </plugin>
      </plugins>
    </pluginManagement>
  </build>
</project>
`;
}

/**
 * Makes sure the pinned ElasticMQ's jars are in the cache, resolving them with Maven when they
 * are not (about 6–14 s the first time); resolves with their directory. A no-op when cached.
 */
export async function ensureElasticmq(
  log: (line: string) => void = (l) => process.stderr.write(`[test/env] ${l}\n`),
): Promise<string> {
  const lib = elasticmqLibDir();
  if (existsSync(serverJar(lib))) return lib;
  await checkJava(javaCommand());
  const mvn = onPath("mvn");
  if (!mvn) throw new BinaryBuildError(`mvn is not installed. ${prerequisite()}`);
  const cache = binaryCacheDir();
  mkdirSync(cache, { recursive: true });
  const release = await lock(join(cache, ".elasticmq.lock"));
  try {
    if (existsSync(serverJar(lib))) return lib;
    const target = join(cache, `elasticmq-${versions.elasticmq}`);
    // What an earlier, killed resolve left (the lock is ours: nobody else is resolving).
    for (const entry of readdirSync(cache))
      if (entry.startsWith("elasticmq-") && entry.includes(".tmp-"))
        rmSync(join(cache, entry), { recursive: true, force: true });
    rmSync(target, { recursive: true, force: true }); // incomplete: no server jar
    const started = Date.now();
    log(`resolving ElasticMQ ${versions.elasticmq} from Maven Central (first run only; cached in ${cache})`);
    const tmp = mkdtempSync(`${target}.tmp-`);
    try {
      writeFileSync(join(tmp, "pom.xml"), pom());
      try {
        await execFileAsync(
          mvn,
          [
            "-q",
            "-B",
            "dependency:copy-dependencies",
            `-DoutputDirectory=${join(tmp, "lib")}`,
            `-Dmaven.repo.local=${join(cache, "m2")}`,
          ],
          { cwd: tmp, maxBuffer: 16 * 1024 * 1024 },
        );
      } catch (err) {
        const e = err as { stdout?: string; stderr?: string; message: string };
        const output = `${e.stdout ?? ""}${e.stderr ?? ""}`.trim() || e.message;
        throw new BinaryBuildError(
          `mvn could not resolve ${GROUP_ID}:${ARTIFACT_ID}:${versions.elasticmq} from Maven Central ` +
            `(is the network reachable? a proxy or mirror goes in ~/.m2/settings.xml). Last output:\n${output.slice(-4000)}`,
        );
      }
      if (!existsSync(serverJar(join(tmp, "lib"))))
        throw new BinaryBuildError(`mvn finished but ${serverJar(join(tmp, "lib"))} is missing`);
      rmSync(join(tmp, "pom.xml"));
      renameSync(tmp, target);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
    log(`resolved ElasticMQ in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    return lib;
  } finally {
    release();
  }
}
