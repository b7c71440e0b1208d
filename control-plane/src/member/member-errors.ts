// Errors of the member control plane, each with a stable code and a message that says
// what was wrong and what to do about it. Invalid options are `OptionError`s
// (lib/option-error.ts).

export class AgentLaunchError extends Error {
  readonly code = "SWITCHYARD_AGENT_LAUNCH";
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = "AgentLaunchError";
  }
}
