// The agent's view of its target pod: its environment and its files. As a sidecar they
// come from the pod itself (PodSources: the env the kubelet resolved into the agent
// container, the target's volumes mounted into it), with no API call. Otherwise through the
// API: the environment resolved fresh on every request (ConfigMap/Secret edits show up as
// they would on a restart) and API-backed files (a VolumeFiles snapshot reused for
// `refreshMs`, like the kubelet's periodic volume sync). Without a target pod (a bare local
// process) both answer SWITCHYARD_AGENT_NO_TARGET_POD instead of guessing.
import type { V1Pod } from "@kubernetes/client-node";
import { nonNegative, OptionError } from "../../../../lib/option-error.js";
import { ErrorCode } from "../../../../proto/error-codes.js";
import { AgentError } from "../agent-errors.js";
import { resolveContainerEnv, type EnvSources, type ResolvedEnv } from "./env-resolver.js";
import { VolumeFiles, type DirEntry, type FileStat, type VolumeSources } from "./volume-files.js";

export interface TargetRef {
  namespace: string;
  name: string;
  /** Container whose env and mounts are served; default the pod's first container. */
  container?: string;
  /** Sidecar mode: volume name → the agent's own mount path of that shared volume. */
  sharedVolumes?: ReadonlyMap<string, string>;
}

/** What the view reads; ApiSources implements it against a real API server. */
export interface TargetSources extends VolumeSources {
  pod(namespace: string, name: string): Promise<V1Pod>;
  envSources(): EnvSources;
}

/** Read-only files of the target: VolumeFiles (through the API) or PodFiles (the agent's mounts). */
export interface TargetFiles {
  stat(path: string): Promise<FileStat>;
  readDir(path: string): Promise<DirEntry[]>;
  readFile(path: string): Promise<Buffer>;
  /** The target container's mount paths that are served, normalized, longest first. */
  mounts(): Promise<string[]>;
}

/** Sidecar mode: each part given comes from the pod itself instead of the API. */
export interface PodSources {
  /** PodEnv: the env the kubelet resolved into the agent container. */
  env?: { env(): ResolvedEnv };
  /** PodFiles: the target's volumes mounted into the agent container. */
  files?: TargetFiles;
}

export class TargetView {
  private files: { at: number; value: Promise<TargetFiles> } | undefined;

  /**
   * @param refreshMs how long a files snapshot is reused, milliseconds (default 10 000).
   * @param pod the parts served from the pod itself; the API is not used for them.
   */
  constructor(
    private readonly sources: TargetSources | undefined,
    readonly ref: TargetRef | undefined,
    private readonly refreshMs = 10_000,
    private readonly pod: PodSources = {},
  ) {
    if (ref && !sources && !(pod.env && pod.files))
      throw new OptionError("sources", "a target pod needs API access (--kubeconfig or in-cluster config)");
    nonNegative("refreshMs", refreshMs, 10_000);
  }

  private target(what: string): { sources: TargetSources; ref: TargetRef } {
    if (!this.ref || !this.sources) {
      throw new AgentError(
        ErrorCode.AGENT_NO_TARGET_POD,
        `this agent serves no target pod, so ${what} is not available; start it with --pod <namespace>/<name> (or POD_NAMESPACE/POD_NAME in a cluster)`,
      );
    }
    return { sources: this.sources, ref: this.ref };
  }

  async env(): Promise<ResolvedEnv> {
    if (this.pod.env) return this.pod.env.env();
    const { sources, ref } = this.target("the environment");
    const pod = await sources.pod(ref.namespace, ref.name);
    return resolveContainerEnv(pod, sources.envSources(), ref.container ? { container: ref.container } : {});
  }

  volumeFiles(now = Date.now()): Promise<TargetFiles> {
    if (this.pod.files) return Promise.resolve(this.pod.files);
    const { sources, ref } = this.target("the filesystem");
    if (this.files && now - this.files.at < this.refreshMs) return this.files.value;
    const value = sources.pod(ref.namespace, ref.name).then(
      (pod) =>
        new VolumeFiles(pod, sources, {
          ...(ref.container ? { container: ref.container } : {}),
          ...(ref.sharedVolumes ? { sharedVolumes: ref.sharedVolumes } : {}),
        }),
    );
    // A failed read is not cached: the next request tries again.
    value.catch(() => {
      if (this.files?.value === value) this.files = undefined;
    });
    this.files = { at: now, value };
    return value;
  }
}
