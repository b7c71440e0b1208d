import { describe, expect, it } from "vitest";
import { nodeAddresses } from "./node-network.js";

describe("nodeAddresses", () => {
  it("gives each node its own subnet, host address and pod range inside the set's block", () => {
    expect(nodeAddresses(201, 2)).toEqual({
      index: 2,
      hostInterface: "sy201n2",
      hostIp: "10.201.2.1",
      nodeIp: "10.201.2.2",
      nodeSubnets: "10.201.0.0/16",
      podCidr: "10.201.102.0/24",
    });
    expect(() => nodeAddresses(201, 100)).toThrow(/out of range/);
  });
});
