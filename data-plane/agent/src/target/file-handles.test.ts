// The FILE family's MOUNTS request, frame in and frame out: the target's mount paths with the
// resolver config read from disk on every request; no target pod answers ENOTSUP like every
// other file request.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { decodeFrame, encodeFrame } from "../../../../proto/frame-codec.js";
import * as pb from "../../../../proto/gen/session_pb.js";
import { testScratchDir } from "../../../../test/support/scratch-dir.js";
import { FileHandles } from "./file-handles.js";
import { PodEnv } from "./pod-env.js";
import { PodFiles } from "./pod-files.js";
import { TargetView } from "./target-view.js";

const F = pb.FrameFamily;

async function ask(handles: FileHandles, requestId = 7): Promise<pb.FileResult> {
  const frame = encodeFrame({ family: F.FILE, kind: pb.FileKind.MOUNTS, requestId }, pb.FileMountsSchema, {});
  const sent: Buffer[] = [];
  await handles.answer(frame, pb.FileKind.MOUNTS, requestId, (f) => sent.push(f));
  expect(sent).toHaveLength(1);
  const { header, message } = decodeFrame(sent[0]!);
  expect(header).toMatchObject({ family: F.FILE, kind: pb.FileKind.RESULT, requestId });
  return message as pb.FileResult;
}

function sidecarView(root: string, mounts: string[]): TargetView {
  return new TargetView(undefined, { namespace: "shop", name: "shop-0" }, 10_000, {
    env: new PodEnv("SWITCHYARD_TARGET_ENV_", {}),
    files: new PodFiles(root, mounts),
  });
}

describe("FileHandles MOUNTS", () => {
  it("answers the target's mount paths and the resolver config as it is now", async () => {
    const dir = testScratchDir("sy-file-mounts-");
    const resolvConfPath = join(dir, "resolv.conf");
    const conf =
      "search shop.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n";
    writeFileSync(resolvConfPath, conf);
    const root = join(dir, "root");
    mkdirSync(root);
    const handles = new FileHandles(sidecarView(root, ["/data", "/etc/shop/", "/etc/shop/app.yaml"]), {
      resolvConfPath,
    });
    const r = await ask(handles);
    expect(r.error).toBe("");
    expect(r.result.case).toBe("mounts");
    expect(r.result.value).toMatchObject({
      paths: ["/etc/shop/app.yaml", "/etc/shop", "/data"],
      resolvConf: conf,
    });

    // Read again on the next request: the kubelet may rewrite it.
    writeFileSync(resolvConfPath, "nameserver 10.96.0.53\n");
    expect((await ask(handles, 8)).result.value).toMatchObject({ resolvConf: "nameserver 10.96.0.53\n" });
    // A file that cannot be read is "" (unknown), and the paths still come.
    rmSync(resolvConfPath);
    const gone = await ask(handles, 9);
    expect(gone.error).toBe("");
    expect(gone.result.value).toMatchObject({
      paths: ["/etc/shop/app.yaml", "/etc/shop", "/data"],
      resolvConf: "",
    });
    expect(handles.size).toBe(0);
  });

  it("answers ENOTSUP without a target pod, as the other file requests do", async () => {
    const handles = new FileHandles(new TargetView(undefined, undefined), { resolvConfPath: "/nonexistent" });
    const r = await ask(handles);
    expect(r.result.case).toBeUndefined();
    expect(r.error).toBe("ENOTSUP");
    expect(r.message).toMatch(/serves no target pod.*--pod <namespace>\/<name>/);
    expect((await handles.stat("/etc/shop")).error).toBe(r.error);
  });
});
