import { describe, expect, it } from "vitest";
import { loopbackListeners } from "./host-listeners.js";

const TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1538 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0200007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
   2: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0
   3: 0A00000A:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1 0000000000000000 100 0 0 10 0
   4: 0100007F:1538 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 5 1 0000000000000000 100 0 0 10 0
`;
const TCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue
   0: 00000000000000000000000001000000:1388 00000000000000000000000000000000:0000 0A 00000000:00000000
   1: 0000000000000000FFFF00000100007F:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000
   2: 20010DB8000000000000000000000001:0050 00000000000000000000000000000000:0000 0A 00000000:00000000
`;

describe("loopback listeners", () => {
  it("keeps listeners on loopback addresses and the wildcard, at their address", () => {
    const byHost = (a: { host: string; port: number }, b: { host: string; port: number }) =>
      a.port - b.port || (a.host < b.host ? -1 : 1);
    expect(loopbackListeners(TCP).sort(byHost)).toEqual([
      { host: "127.0.0.1", port: 80 },
      { host: "::1", port: 80 },
      { host: "127.0.0.1", port: 5432 },
      { host: "127.0.0.2", port: 8080 },
    ]);
  });

  it("reads tcp6: ::1 and IPv4-mapped loopback; not other addresses", () => {
    expect(loopbackListeners(TCP6)).toEqual([
      { host: "127.0.0.1", port: 3000 },
      { host: "::1", port: 5000 },
    ]);
  });
});
