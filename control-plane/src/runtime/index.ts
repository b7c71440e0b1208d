// The controller runtime every reconciler uses: informers, the work queue, the
// Controller, error kinds and metrics, installCrds, and the seam features plug into: their
// flags, the roles they run in, leadership terms. See README.md for the contract.
export { Controller, ControllerStartedError } from "./controller.js";
export type {
  ControllerOptions,
  EventPredicate,
  KeyMapper,
  ReconcileResult,
  Reconciler,
  WatchOptions,
} from "./controller.js";
export { ControllerMetrics } from "./controller-metrics.js";
export { OwnWrites } from "./own-writes.js";
export type { ReconcileOutcome } from "./controller-metrics.js";
export { installCrds } from "./crd-installer.js";
export type { InstallCrdsOptions } from "./crd-installer.js";
export { CrdInstallError, CrdNotEstablishedError, UnknownCrdKindError } from "./crd-install-errors.js";
export { keyOf, keyString, parseKeyString } from "./object-key.js";
export type { ObjectKey } from "./object-key.js";
export {
  ConflictReconcileError,
  ReconcileError,
  reconcileErrorKind,
  TerminalReconcileError,
  TransientReconcileError,
  withContext,
} from "./reconcile-errors.js";
export type { ReconcileErrorKind } from "./reconcile-errors.js";
export {
  configMapInformer,
  customResourceInformer,
  deploymentInformer,
  podInformer,
  ResourceInformer,
  secretInformer,
  statefulSetInformer,
} from "./resource-informer.js";
export type {
  InformerEvent,
  InformerHandler,
  KindInformerOptions,
  ResourceInformerOptions,
} from "./resource-informer.js";
export { WorkQueue } from "./work-queue.js";
export type { BackoffOptions } from "./work-queue.js";
export { featureRuns, runFeatures } from "./feature.js";
export type { Feature, FeatureRuntime, RunningFeature } from "./feature.js";
export {
  DNS_LABEL,
  DNS_SUBDOMAIN,
  parseFeatureFlags,
  parseListen,
  readFlagFile,
  secondsFlag,
} from "./feature-flags.js";
export type { FeatureFlags, FlagValues, ListenAddress } from "./feature-flags.js";
export { LeadershipTerms } from "./leadership-terms.js";
export type { TermWork } from "./leadership-terms.js";
export { playsRole } from "./process-mode.js";
export type { ControlPlaneMode, ProcessRole } from "./process-mode.js";
