// The target's environment as a sidecar agent sees it, with no API access: the sidecar
// template copies the target's envFrom and env into the agent container under a prefix
// (proto/sidecar-target.ts), so the kubelet resolves them exactly as for the app. The
// answer is the service-link variables of the agent's own environment (the kubelet gives
// every container of a pod the same ones) overlaid by the prefixed variables with the
// prefix stripped, which win as the app's own entries do.
import { OptionError } from "../../../../lib/option-error.js";
import { SERVICE_LINK_NAME } from "../../../../proto/sidecar-target.js";
import type { ResolvedEnv } from "./env-resolver.js";

const PREFIX_SHAPE = /^[A-Za-z_][A-Za-z0-9_]*$/;

export class PodEnv {
  /**
   * @param prefix the prefix of the target's variables (`--target-env-prefix`).
   * @param environment the agent's own environment (default: process.env), read on every call.
   */
  constructor(
    private readonly prefix: string,
    private readonly environment: Readonly<Record<string, string | undefined>> = process.env,
  ) {
    if (!PREFIX_SHAPE.test(prefix))
      throw new OptionError(
        "--target-env-prefix",
        `must be a variable-name prefix (letters, digits, _; e.g. SWITCHYARD_TARGET_ENV_), got ${JSON.stringify(prefix)}`,
      );
  }

  /**
   * The template points the copies' `$(VAR)` references at `$(<prefix>VAR)`; one the kubelet
   * could not resolve stays in the value verbatim, so it is pointed back at the name the
   * app's value has (the app sees `$(VAR)` there). A literal `$(<prefix>…)` in a target's
   * value would be read the same way; the prefix makes that practically impossible.
   */
  private unprefixReferences(value: string): string {
    return value.includes("$(") ? value.replaceAll(`$(${this.prefix}`, "$(") : value;
  }

  env(): ResolvedEnv {
    const out: ResolvedEnv = new Map();
    const own = Object.entries(this.environment).filter((e): e is [string, string] => e[1] !== undefined);
    // Copies (the prefix) and the agent's own settings (SWITCHYARD_AGENT_<FLAG>) may look
    // like service links too; they are not the kubelet's.
    const serviceLink = (k: string) =>
      SERVICE_LINK_NAME.test(k) && !k.startsWith(this.prefix) && !k.startsWith("SWITCHYARD_AGENT_");
    for (const [k, v] of own) if (serviceLink(k)) out.set(k, v);
    for (const [k, v] of own) {
      if (k.startsWith(this.prefix) && k.length > this.prefix.length)
        out.set(k.slice(this.prefix.length), this.unprefixReferences(v));
    }
    return out;
  }
}
