import { describe, expect, it } from "vitest";
import { diffHostState } from "./host-state.js";

describe("diffHostState", () => {
  it("names what appeared and what disappeared, per kind", () => {
    const before = { routes: ["default via 192.0.2.1"], mounts: ["/dev/vda / ext4 rw 0 0"] };
    const after = { routes: ["default via 192.0.2.1", "10.200.1.0/24 dev sy200n1"], mounts: [] };
    expect(diffHostState(before, after)).toEqual([
      "+ routes: 10.200.1.0/24 dev sy200n1",
      "- mounts: /dev/vda / ext4 rw 0 0",
    ]);
  });

  it("leaves out sysctls of interfaces that exist on one side only (the link difference says it)", () => {
    const before = {
      links: ["eth0: <UP> mtu 1500"],
      sysctls: ["net.ipv4.conf.eth0.forwarding = 0", "net.ipv4.ip_forward = 0"],
    };
    const after = {
      links: ["eth0: <UP> mtu 1500", "sy200n1@if2: <UP> mtu 1500"],
      sysctls: [
        "net.ipv4.conf.eth0.forwarding = 0",
        "net.ipv4.conf.sy200n1.forwarding = 1",
        "net.ipv4.ip_forward = 1",
      ],
    };
    expect(diffHostState(before, after)).toEqual([
      "+ links: sy200n1@if2: <UP> mtu 1500",
      "- sysctls: net.ipv4.ip_forward = 0",
      "+ sysctls: net.ipv4.ip_forward = 1",
    ]);
  });
});
