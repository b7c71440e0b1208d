// Original file: proto/route_discovery.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { DiscoveryRequest as _switchyard_routes_v1_DiscoveryRequest, DiscoveryRequest__Output as _switchyard_routes_v1_DiscoveryRequest__Output } from '../../../switchyard/routes/v1/DiscoveryRequest.js';
import type { DiscoveryResponse as _switchyard_routes_v1_DiscoveryResponse, DiscoveryResponse__Output as _switchyard_routes_v1_DiscoveryResponse__Output } from '../../../switchyard/routes/v1/DiscoveryResponse.js';

/**
 * buf:lint:ignore SERVICE_SUFFIX
 */
export interface RouteDiscoveryClient extends grpc.Client {
  /**
   * buf:lint:ignore RPC_REQUEST_STANDARD_NAME
   * buf:lint:ignore RPC_RESPONSE_STANDARD_NAME
   * buf:lint:ignore RPC_REQUEST_RESPONSE_UNIQUE
   */
  StreamRoutes(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_switchyard_routes_v1_DiscoveryRequest, _switchyard_routes_v1_DiscoveryResponse__Output>;
  StreamRoutes(options?: grpc.CallOptions): grpc.ClientDuplexStream<_switchyard_routes_v1_DiscoveryRequest, _switchyard_routes_v1_DiscoveryResponse__Output>;
  /**
   * buf:lint:ignore RPC_REQUEST_STANDARD_NAME
   * buf:lint:ignore RPC_RESPONSE_STANDARD_NAME
   * buf:lint:ignore RPC_REQUEST_RESPONSE_UNIQUE
   */
  streamRoutes(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_switchyard_routes_v1_DiscoveryRequest, _switchyard_routes_v1_DiscoveryResponse__Output>;
  streamRoutes(options?: grpc.CallOptions): grpc.ClientDuplexStream<_switchyard_routes_v1_DiscoveryRequest, _switchyard_routes_v1_DiscoveryResponse__Output>;
  
}

/**
 * buf:lint:ignore SERVICE_SUFFIX
 */
export interface RouteDiscoveryHandlers extends grpc.UntypedServiceImplementation {
  /**
   * buf:lint:ignore RPC_REQUEST_STANDARD_NAME
   * buf:lint:ignore RPC_RESPONSE_STANDARD_NAME
   * buf:lint:ignore RPC_REQUEST_RESPONSE_UNIQUE
   */
  StreamRoutes: grpc.handleBidiStreamingCall<_switchyard_routes_v1_DiscoveryRequest__Output, _switchyard_routes_v1_DiscoveryResponse>;
  
}

export interface RouteDiscoveryDefinition extends grpc.ServiceDefinition {
  StreamRoutes: MethodDefinition<_switchyard_routes_v1_DiscoveryRequest, _switchyard_routes_v1_DiscoveryResponse, _switchyard_routes_v1_DiscoveryRequest__Output, _switchyard_routes_v1_DiscoveryResponse__Output>
}
