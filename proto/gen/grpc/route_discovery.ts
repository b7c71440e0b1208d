import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { DiscoveryRequest as _switchyard_routes_v1_DiscoveryRequest, DiscoveryRequest__Output as _switchyard_routes_v1_DiscoveryRequest__Output } from './switchyard/routes/v1/DiscoveryRequest.js';
import type { DiscoveryResponse as _switchyard_routes_v1_DiscoveryResponse, DiscoveryResponse__Output as _switchyard_routes_v1_DiscoveryResponse__Output } from './switchyard/routes/v1/DiscoveryResponse.js';
import type { ErrorDetail as _switchyard_routes_v1_ErrorDetail, ErrorDetail__Output as _switchyard_routes_v1_ErrorDetail__Output } from './switchyard/routes/v1/ErrorDetail.js';
import type { LiveSessions as _switchyard_routes_v1_LiveSessions, LiveSessions__Output as _switchyard_routes_v1_LiveSessions__Output } from './switchyard/routes/v1/LiveSessions.js';
import type { RouteDiscoveryClient as _switchyard_routes_v1_RouteDiscoveryClient, RouteDiscoveryDefinition as _switchyard_routes_v1_RouteDiscoveryDefinition } from './switchyard/routes/v1/RouteDiscovery.js';
import type { SessionRoute as _switchyard_routes_v1_SessionRoute, SessionRoute__Output as _switchyard_routes_v1_SessionRoute__Output } from './switchyard/routes/v1/SessionRoute.js';
import type { Upstream as _switchyard_routes_v1_Upstream, Upstream__Output as _switchyard_routes_v1_Upstream__Output } from './switchyard/routes/v1/Upstream.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  switchyard: {
    routes: {
      v1: {
        DiscoveryRequest: MessageTypeDefinition<_switchyard_routes_v1_DiscoveryRequest, _switchyard_routes_v1_DiscoveryRequest__Output>
        DiscoveryResponse: MessageTypeDefinition<_switchyard_routes_v1_DiscoveryResponse, _switchyard_routes_v1_DiscoveryResponse__Output>
        ErrorDetail: MessageTypeDefinition<_switchyard_routes_v1_ErrorDetail, _switchyard_routes_v1_ErrorDetail__Output>
        LiveSessions: MessageTypeDefinition<_switchyard_routes_v1_LiveSessions, _switchyard_routes_v1_LiveSessions__Output>
        /**
         * buf:lint:ignore SERVICE_SUFFIX
         */
        RouteDiscovery: SubtypeConstructor<typeof grpc.Client, _switchyard_routes_v1_RouteDiscoveryClient> & { service: _switchyard_routes_v1_RouteDiscoveryDefinition }
        SessionRoute: MessageTypeDefinition<_switchyard_routes_v1_SessionRoute, _switchyard_routes_v1_SessionRoute__Output>
        SessionState: EnumTypeDefinition
        Upstream: MessageTypeDefinition<_switchyard_routes_v1_Upstream, _switchyard_routes_v1_Upstream__Output>
      }
    }
  }
}

