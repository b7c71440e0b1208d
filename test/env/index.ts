// The test environment's public surface: real multi-cluster Kubernetes on loopback.
export { startClusterSet, ClusterSetError } from "./clusters/cluster-set.js";
export type { ClusterSet, ClusterSetOptions, TestCluster, ClusterUser } from "./clusters/cluster-set.js";
export { markPodRunning, runPods } from "./clusters/kubelet.js";
export type { PodRunOptions } from "./clusters/kubelet.js";
export { ensureBinaries, binaryPath, binaryCacheDir, BinaryBuildError } from "./binaries.js";
export type { BinaryName } from "./binaries.js";
export { createCertificateAuthority, createServiceAccountSigningKey } from "./pki.js";
export type { CertificateAuthority, KeyPairPem, LeafOptions } from "./pki.js";
export { kubeconfigYaml, writeKubeconfig, loadKubeConfig } from "./clusters/kubeconfig.js";
export { freePorts, isPortListening } from "./ports.js";
export { sweepOrphans, envRoot } from "./processes.js";
