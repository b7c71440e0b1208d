// The typed Switchyard SDK: the CLI is built on it, and tests drive sessions with it.
export * from "./cli-errors.js";
export * from "./kube-access.js";
export * from "./operator-info.js";
export * from "./kube-sessions.js";
export * from "./reconnect-backoff.js";
export * from "./router-dial.js";
export * from "./frame-sink.js";
export * from "./http-filter.js";
export * from "./incoming-traffic.js";
export * from "./outgoing-tcp-stream.js";
export * from "./udp-channel.js";
export * from "./session-client.js";
export * from "./local-proxy.js";
export * from "./traffic-delivery.js";
export * from "./session-config.js";
export * from "./open-session.js";
