// How a sidecar agent sees its target container without the Kubernetes API, as a contract
// between the control plane's sidecar template and the agent: the template copies the
// target's env under a prefix into the agent container (the kubelet resolves it exactly as
// for the app) and mounts the target's volumes under one root; the agent strips the prefix
// and serves files below the root. Service-link variables are the same in every container
// of a pod, so they are neither copied nor renamed.

/** Prefix of the target's env entries in the agent container (`--target-env-prefix`). */
export const TARGET_ENV_PREFIX = "SWITCHYARD_TARGET_ENV_";

/** Where the agent container mounts the target's volumes: root + the target's mountPath (`--target-root`). */
export const TARGET_ROOT = "/var/run/switchyard/target";

/**
 * Names of the kubelet's service-link variables (`FOO_SERVICE_HOST`, `FOO_SERVICE_PORT`,
 * `FOO_SERVICE_PORT_HTTP`, `FOO_PORT`, `FOO_PORT_80_TCP`, `FOO_PORT_80_TCP_ADDR`, …).
 */
export const SERVICE_LINK_NAME =
  /^[A-Z_][A-Z0-9_]*_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$/;
