// Pinned versions of the third-party binaries the test environment builds.
// kube-apiserver, kube-controller-manager and etcd come from the wrapper module in
// test/env/go (regenerate its go.mod with test/env/go/gen-gomod.sh when bumping
// `kubernetes`); k6 and helm are `go install`ed at these versions.
export const versions = {
  kubernetes: "1.36.3",
  etcd: "3.6.8",
  k6: "1.8.1",
  helm: "4.3.1",
  /** Oldest Go that builds all of the above (Kubernetes 1.36 needs Go 1.26). */
  minimumGo: "1.26.0",
} as const;
