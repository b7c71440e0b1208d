// Global setup of the integration projects: builds the test binaries once (cached by
// version) and, on teardown, kills whatever a crashed, killed or timed-out test file (a
// worker of this process) left running and removes its directories. Anything found then is
// a leak: the run fails (exit status 1), naming each file that left it.
import { ensureBinaries } from "./env/binaries.js";
import { sweepOrphans, type SweptDirectory } from "./env/processes.js";

/** The lines that report a teardown's sweep; none when it found nothing. */
export function leakReport(swept: SweptDirectory[]): string[] {
  const leaks = swept.filter((s) => s.killed > 0);
  if (leaks.length === 0) return [];
  const byFile = new Map<string, number>();
  for (const s of leaks) {
    const file = s.testFile ?? `an unnamed owner (${s.dir})`;
    byFile.set(file, (byFile.get(file) ?? 0) + s.killed);
  }
  return [
    `[test/env] teardown found processes left running; the run fails:`,
    ...[...byFile].map(([file, n]) => `[test/env]   ${file}: ${n} process(es) killed`),
  ];
}

export default async function setup(): Promise<() => Promise<void>> {
  await sweepOrphans();
  await ensureBinaries(["etcd", "kube-apiserver", "kube-controller-manager"]);
  return async () => {
    const swept: SweptDirectory[] = [];
    const killed = await sweepOrphans({ mine: true, onSwept: (s) => swept.push(s) });
    const report = leakReport(swept);
    if (report.length > 0 || killed > 0) {
      process.stderr.write(
        `${(report.length > 0 ? report : [`[test/env] teardown killed ${killed} stray process(es); the run fails`]).join("\n")}\n`,
      );
      process.exitCode = 1;
    }
  };
}
