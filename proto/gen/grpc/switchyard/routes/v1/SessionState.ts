// Original file: proto/route_discovery.proto

export const SessionState = {
  SESSION_STATE_UNSPECIFIED: 0,
  /**
   * The session exists but is not ready yet: the router answers clients "retry".
   */
  SESSION_STATE_CREATING: 1,
  SESSION_STATE_READY: 2,
} as const;

export type SessionState =
  | 'SESSION_STATE_UNSPECIFIED'
  | 0
  /**
   * The session exists but is not ready yet: the router answers clients "retry".
   */
  | 'SESSION_STATE_CREATING'
  | 1
  | 'SESSION_STATE_READY'
  | 2

export type SessionState__Output = typeof SessionState[keyof typeof SessionState]
