// Errors of the member control plane, each with a stable code and a message that says
// what was wrong and what to do about it.

export class MemberOptionError extends Error {
  readonly code = "SWITCHYARD_MEMBER_OPTION";
  constructor(option: string, message: string) {
    super(`invalid member option ${option}: ${message}`);
    this.name = "MemberOptionError";
  }
}

export class AgentLaunchError extends Error {
  readonly code = "SWITCHYARD_AGENT_LAUNCH";
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = "AgentLaunchError";
  }
}
