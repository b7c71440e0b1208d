// The routing-table upstreams of a session's agents: what the member's routers dial for one
// session, one upstream per agent serving a ready pod of the target.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { UpstreamSchema } from "../../../proto/gen/route_discovery_pb.js";
import { sessionUrl } from "../../../proto/session-endpoint.js";
import type { AgentEndpoint } from "./agent-provisioner.js";

/**
 * The routing-table upstreams of a session's agents, the preferred one (first) the default.
 * wss:// agents carry the CA and the name their certificate is verified against: routers
 * dial them by pod IP, which no certificate issued in advance can name.
 */
export function agentUpstreams(
  agents: readonly Pick<AgentEndpoint, "id" | "baseUrl">[],
  sessionId: string,
  secret: string,
  tls: { agentCaPem?: string; agentServerName?: string },
): MessageInitShape<typeof UpstreamSchema>[] {
  return agents.map((a, i) => {
    const secure = a.baseUrl.startsWith("wss:");
    return {
      cluster: a.id,
      url: sessionUrl(a.baseUrl, sessionId),
      secret,
      isDefault: i === 0,
      caPem: tls.agentCaPem ?? "",
      serverName: secure ? (tls.agentServerName ?? "") : "",
      // Agent ids change with every pod: one bounded label for all of them in router metrics.
      metricsCluster: "agent",
    };
  });
}
