// Leader election on a coordination.k8s.io/v1 Lease, after client-go's leaderelection:
// the holder renews spec.renewTime every retry period; a candidate takes the Lease over
// only when it has seen the same holder record unchanged for a whole lease duration,
// measured on its own clock (so clock skew between replicas does not matter). Writes use
// the Lease's resourceVersion, so two candidates racing for it cannot both win. A leader
// that cannot renew within `renewDeadlineMs` steps down before the Lease can expire,
// which keeps "only the leader writes" true across a failover.
import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { pino } from "pino";
import { sleep } from "../../../lib/abortable-sleep.js";
import { firstLine } from "../../../lib/api-error.js";
import { OptionError } from "../../../lib/option-error.js";

export interface LeaseElectorOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /** Lease name, e.g. `switchyard-control-plane`. */
  name: string;
  /** This replica's identity (pod name). */
  identity: string;
  /** How long a Lease stays valid without renewal, in ms (default 15 000). */
  leaseDurationMs?: number;
  /** A leader that has not renewed for this long steps down, in ms (default 10 000; < leaseDurationMs). */
  renewDeadlineMs?: number;
  /** Time between attempts, in ms (default 2 000; < renewDeadlineMs). */
  retryPeriodMs?: number;
  logger?: Logger;
  /** Called when this replica becomes leader; the signal aborts when it stops leading. */
  onStartedLeading?: (leading: AbortSignal) => void;
  onStoppedLeading?: () => void;
  onNewLeader?: (identity: string) => void;
  /** Clear the Lease on stop so a successor takes over at once (default true); false simulates a crash. */
  releaseOnStop?: boolean;
}

export class LeaseElector {
  private readonly api: CoordinationV1Api;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly logger: Logger;
  private observed: { holder: string; renewTime: string; resourceVersion: string } | undefined;
  private observedAt = 0;
  private leading: AbortController | undefined;
  private lastRenew = 0;
  private knownLeader: string | undefined;

  constructor(private readonly options: LeaseElectorOptions) {
    if (!options.kubeConfig) throw new OptionError("kubeConfig", "is required");
    if (!options.namespace) throw new OptionError("namespace", "is required");
    if (!options.name) throw new OptionError("name", "is required (the Lease name)");
    if (!options.identity) throw new OptionError("identity", "is required (e.g. the pod name)");
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    if (!(
      this.retryPeriodMs > 0 &&
      this.retryPeriodMs < this.renewDeadlineMs &&
      this.renewDeadlineMs < this.leaseDurationMs
    ))
      throw new OptionError(
        "renewDeadlineMs",
        `need 0 < retryPeriodMs (${this.retryPeriodMs}) < renewDeadlineMs (${this.renewDeadlineMs}) < leaseDurationMs (${this.leaseDurationMs})`,
      );
    this.logger = (options.logger ?? pino({ level: "silent" })).child({
      component: "leader",
      lease: options.name,
      identity: options.identity,
    });
    this.api = options.kubeConfig.makeApiClient(CoordinationV1Api);
  }

  isLeader(): boolean {
    return this.leading !== undefined;
  }

  /** The identity of the current leader as last observed, if any. */
  leader(): string | undefined {
    return this.knownLeader;
  }

  /**
   * Campaigns and leads until `signal` aborts. On abort a leader releases the Lease
   * (clears the holder) so a successor need not wait out the lease duration.
   */
  async start(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let ok = false;
      try {
        ok = await this.tryAcquireOrRenew();
      } catch (err) {
        this.logger.warn({ err: firstLine(err) }, "lease update failed");
      }
      const now = Date.now();
      if (ok) {
        this.lastRenew = now;
        if (!this.leading) this.becomeLeader();
      } else if (this.leading && now - this.lastRenew > this.renewDeadlineMs) {
        this.stepDown("could not renew the lease within the renew deadline");
      }
      await sleep(this.retryPeriodMs, signal);
    }
    if (this.leading && (this.options.releaseOnStop ?? true)) {
      await this.release().catch((err: unknown) =>
        this.logger.warn({ err: firstLine(err) }, "releasing the lease failed"),
      );
    }
    this.stepDown("stopped");
  }

  private becomeLeader(): void {
    this.leading = new AbortController();
    this.setLeader(this.options.identity);
    this.logger.info("became leader");
    this.options.onStartedLeading?.(this.leading.signal);
  }

  private stepDown(why: string): void {
    const l = this.leading;
    if (!l) return;
    this.leading = undefined;
    this.logger.warn({ why }, "stopped leading");
    l.abort();
    this.options.onStoppedLeading?.();
  }

  private setLeader(identity: string): void {
    if (identity && identity !== this.knownLeader) {
      this.knownLeader = identity;
      this.options.onNewLeader?.(identity);
    }
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity } = this.options;
    const now = new Date();
    const durationSeconds = Math.ceil(this.leaseDurationMs / 1000);
    let lease: V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ name, namespace });
    } catch (err) {
      if ((err as { code?: number }).code !== 404) throw err;
      await this.api.createNamespacedLease({
        namespace,
        body: {
          metadata: { name, namespace },
          spec: {
            holderIdentity: identity,
            leaseDurationSeconds: durationSeconds,
            acquireTime: new V1MicroTime(now.getTime()),
            renewTime: new V1MicroTime(now.getTime()),
            leaseTransitions: 0,
          },
        },
      });
      this.observed = { holder: identity, renewTime: now.toISOString(), resourceVersion: "" };
      this.observedAt = Date.now();
      return true;
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? "";
    const record = {
      holder,
      renewTime: spec.renewTime ? new Date(spec.renewTime).toISOString() : "",
      resourceVersion: lease.metadata?.resourceVersion ?? "",
    };
    if (
      !this.observed ||
      this.observed.holder !== record.holder ||
      this.observed.renewTime !== record.renewTime
    ) {
      this.observed = record;
      this.observedAt = Date.now();
    }
    if (holder) this.setLeader(holder);
    // The holder's own lease duration governs expiry, measured from when we saw its record change.
    const holderDurationMs = (spec.leaseDurationSeconds ?? durationSeconds) * 1000;
    if (holder && holder !== identity && Date.now() < this.observedAt + holderDurationMs) return false;
    const taking = holder !== identity;
    const body: V1Lease = {
      ...lease,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds: durationSeconds,
        renewTime: new V1MicroTime(now.getTime()),
        ...(taking
          ? {
              acquireTime: new V1MicroTime(now.getTime()),
              leaseTransitions: (spec.leaseTransitions ?? 0) + (holder ? 1 : 0),
            }
          : {}),
      },
    };
    // replace carries metadata.resourceVersion: a concurrent writer makes this fail with 409.
    const updated = await this.api.replaceNamespacedLease({ name, namespace, body });
    this.observed = {
      holder: identity,
      renewTime: now.toISOString(),
      resourceVersion: updated.metadata?.resourceVersion ?? "",
    };
    this.observedAt = Date.now();
    if (taking) this.logger.info({ previous: holder || undefined }, "acquired the lease");
    return true;
  }

  private async release(): Promise<void> {
    const { namespace, name, identity } = this.options;
    const lease = await this.api.readNamespacedLease({ name, namespace });
    if (lease.spec?.holderIdentity !== identity) return;
    await this.api.replaceNamespacedLease({
      name,
      namespace,
      body: {
        ...lease,
        spec: { ...lease.spec, holderIdentity: undefined, renewTime: undefined, leaseDurationSeconds: 1 },
      },
    });
  }
}
