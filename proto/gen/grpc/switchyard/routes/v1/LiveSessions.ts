// Original file: proto/route_discovery.proto


export interface LiveSessions {
  /**
   * session_id of each SessionRoute with a live client ("<namespace>:<name>").
   */
  'sessionIds'?: (string)[];
}

export interface LiveSessions__Output {
  /**
   * session_id of each SessionRoute with a live client ("<namespace>:<name>").
   */
  'sessionIds': (string)[];
}
