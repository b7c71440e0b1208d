// The typed Switchyard SDK: the CLI is built on it, and tests drive sessions with it.
// Kubernetes side (kube/), router side (session/), local plumbing for `exec` (local/).
export * from "./cli-errors.js";
export * from "./kube/kube-access.js";
export * from "./kube/operator-info.js";
export * from "./kube/kube-sessions.js";
export * from "./kube/open-session.js";
export * from "./kube/kube-branches.js";
export * from "./kube/branch-wait.js";
export * from "./kube/session-branches.js";
export * from "./kube/session-queues.js";
export * from "./kube/kube-queues.js";
export * from "./session/reconnect-policy.js";
export * from "./session/router-dial.js";
export * from "./session/frame-sink.js";
export * from "./session/http-filter.js";
export * from "./session/incoming-traffic.js";
export * from "./session/outgoing-tcp-stream.js";
export * from "./session/udp-channel.js";
export * from "./session/session-client.js";
export * from "./local/local-proxy.js";
export * from "./local/traffic-delivery.js";
export * from "./local/session-config.js";
export * from "./local/branch-config.js";
export * from "./local/branch-forward.js";
export * from "./local/queue-config.js";
