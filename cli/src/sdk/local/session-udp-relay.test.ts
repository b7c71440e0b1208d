// sessionUdpRelay over real UdpChannels writing into a recording FrameSink: one channel per
// flow bound to the first datagram's destination, datagrams queued (bounded) while the
// bind is in flight and then sent with their own addresses, answers passed on with their
// source, a failed bind or a remote close ending the flow, and close() closing the channel.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import * as pb from "../../../../proto/gen/session_pb.js";
import { decodePayload, readHeader } from "../../../../proto/frame-codec.js";
import { UdpChannel } from "../session/udp-channel.js";
import type { FrameSink } from "../session/frame-sink.js";
import { sessionUdpRelay, UDP_BIND_QUEUE } from "./session-udp-relay.js";

class RecordingSink implements FrameSink {
  readonly frames: Buffer[] = [];
  send(frame: Buffer): boolean {
    this.frames.push(frame);
    return true;
  }
  whenWritable(cb: () => void): void {
    cb();
  }
  /** The DATA frames' datagrams as "address:port data". */
  datagrams(): string[] {
    return this.frames
      .filter((f) => readHeader(f).kind === pb.OutgoingKind.DATA)
      .map((f) => decodePayload(f, pb.UdpDatagramSchema))
      .map((d) => `${d.address}:${d.port} ${Buffer.from(d.data).toString()}`);
  }
  closes(): number {
    return this.frames.filter((f) => readHeader(f).kind === pb.OutgoingKind.CLOSE).length;
  }
}

/** A client whose binds stay in flight until the test settles them. */
function fakeClient() {
  const sink = new RecordingSink();
  const binds: Array<{ target: string; resolve: () => UdpChannel; reject: (e: Error) => void }> = [];
  const client = {
    bindUdp(host: string, port: number): Promise<UdpChannel> {
      return new Promise((res, rej) => {
        const ch = new UdpChannel(binds.length + 1, sink, () => {});
        binds.push({ target: `${host}:${port}`, resolve: () => (res(ch), ch), reject: rej });
      });
    },
  };
  return { sink, binds, client };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("sessionUdpRelay", () => {
  it("binds once to the first destination and sends what was queued meanwhile, bounded", async () => {
    const { sink, binds, client } = fakeClient();
    const flow = sessionUdpRelay(client).open();
    flow.send("dns.kube-system.svc", 53, Buffer.from("q0"));
    for (let i = 1; i < UDP_BIND_QUEUE + 10; i++) flow.send("10.0.0.2", 53, Buffer.from(`q${i}`));
    expect(binds.map((b) => b.target)).toEqual(["dns.kube-system.svc:53"]);
    expect(sink.frames).toHaveLength(0);
    const ch = binds[0]!.resolve();
    await tick();
    const sent = sink.datagrams();
    expect(sent).toHaveLength(UDP_BIND_QUEUE);
    expect(sent[0]).toBe("dns.kube-system.svc:53 q0");
    expect(sent.at(-1)).toBe(`10.0.0.2:53 q${UDP_BIND_QUEUE - 1}`);

    flow.send("10.0.0.3", 5353, Buffer.from("later"));
    expect(sink.datagrams().at(-1)).toBe("10.0.0.3:5353 later");
    expect(binds).toHaveLength(1);

    const got: string[] = [];
    flow.onMessage((from, data) => got.push(`${from.host}:${from.port} ${data.toString()}`));
    ch.remoteDatagram(
      create(pb.UdpDatagramSchema, { data: Buffer.from("answer"), address: "10.0.0.10", port: 53 }),
    );
    expect(got).toEqual(["10.0.0.10:53 answer"]);

    const closes: string[] = [];
    flow.onClose((e) => closes.push(e));
    flow.close();
    expect(sink.closes()).toBe(1);
    expect(closes).toEqual([]);
    flow.send("10.0.0.3", 5353, Buffer.from("after close"));
    expect(sink.datagrams().at(-1)).toBe("10.0.0.3:5353 later");
  });

  it("ends the flow with the error when the bind fails", async () => {
    const { sink, binds, client } = fakeClient();
    const errors: string[] = [];
    const flow = sessionUdpRelay(client, (t, e) => errors.push(`${t}: ${e.message}`)).open();
    const closed = new Promise<string>((r) => flow.onClose(r));
    flow.send("nowhere.svc", 53, Buffer.from("q"));
    flow.send("nowhere.svc", 53, Buffer.from("q2"));
    binds[0]!.reject(new Error("SWITCHYARD_NO_DEFAULT_CLUSTER: no default cluster is connected"));
    expect(await closed).toMatch(
      /cannot open UDP to nowhere\.svc:53 from the cluster: SWITCHYARD_NO_DEFAULT/,
    );
    expect(errors).toEqual([
      "nowhere.svc:53: SWITCHYARD_NO_DEFAULT_CLUSTER: no default cluster is connected",
    ]);
    flow.send("nowhere.svc", 53, Buffer.from("q3"));
    expect(binds).toHaveLength(1);
    expect(sink.frames).toHaveLength(0);
  });

  it("ends the flow when the cluster closes the channel, and closes a channel bound after close()", async () => {
    const { sink, binds, client } = fakeClient();
    const flow = sessionUdpRelay(client).open();
    const closed = new Promise<string>((r) => flow.onClose(r));
    flow.send("10.0.0.2", 53, Buffer.from("q"));
    const ch = binds[0]!.resolve();
    await tick();
    ch.remoteClose("ECONNREFUSED: port unreachable");
    expect(await closed).toBe("ECONNREFUSED: port unreachable");

    const late = sessionUdpRelay(client).open();
    late.send("10.0.0.2", 53, Buffer.from("q"));
    late.close();
    binds[1]!.resolve();
    await tick();
    expect(sink.closes()).toBe(1);
    expect(sink.datagrams()).toEqual(["10.0.0.2:53 q"]);
  });
});
