// A TLS server's certificate and key as files that change under it (a kubernetes.io/tls Secret
// volume that cert-manager renews: the kubelet swaps the files atomically): `watchServingCert`
// re-reads them every `intervalMs` and hands a pair that differs from the one in use — and that
// makes a valid secure context, so a half-written or mismatched pair is never applied — to
// `apply`. A failed read or a bad pair is reported once per distinct message and tried again
// next time; the server keeps the pair it has.
import { readFile } from "node:fs/promises";
import { createSecureContext } from "node:tls";

export interface ServingCertPem {
  certPem: string;
  keyPem: string;
}

export interface ServingCertWatch {
  /** Reads the files now (what the timer does); resolves once done. */
  check(): Promise<void>;
  stop(): void;
}

export function watchServingCert(
  files: { certFile: string; keyFile: string },
  current: ServingCertPem,
  apply: (pem: ServingCertPem) => void,
  opts: { intervalMs?: number; onError?: (message: string) => void } = {},
): ServingCertWatch {
  let inUse = current;
  let lastError = "";
  let checking: Promise<void> | undefined;
  const check = () =>
    (checking ??= (async () => {
      try {
        const [certPem, keyPem] = await Promise.all([
          readFile(files.certFile, "utf8"),
          readFile(files.keyFile, "utf8"),
        ]);
        if (certPem === inUse.certPem && keyPem === inUse.keyPem) return;
        try {
          createSecureContext({ cert: certPem, key: keyPem });
        } catch (err) {
          throw new Error(
            `${files.certFile} and ${files.keyFile} do not make a serving certificate: ${(err as Error).message}`,
            { cause: err },
          );
        }
        apply({ certPem, keyPem });
        inUse = { certPem, keyPem };
        lastError = "";
      } catch (err) {
        const message = (err as Error).message;
        if (message !== lastError) opts.onError?.(message);
        lastError = message;
      }
    })().finally(() => (checking = undefined)));
  const timer = setInterval(() => void check(), opts.intervalMs ?? 30_000);
  timer.unref();
  return { check, stop: () => clearInterval(timer) };
}
