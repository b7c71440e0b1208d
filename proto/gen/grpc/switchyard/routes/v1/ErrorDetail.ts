// Original file: proto/route_discovery.proto


export interface ErrorDetail {
  'message'?: (string);
}

export interface ErrorDetail__Output {
  'message': (string);
}
