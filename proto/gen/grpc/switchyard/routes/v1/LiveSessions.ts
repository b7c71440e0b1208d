// Original file: proto/route_discovery.proto


export interface LiveSessions {
  'sessionIds'?: (string)[];
}

export interface LiveSessions__Output {
  'sessionIds': (string)[];
}
