import { describe, expect, it } from "vitest";
import type { Message } from "@aws-sdk/client-sqs";
import { forwardEntry } from "./forward-batch.js";
import { splitMessage } from "./splitter.js";

const received: Message = {
  MessageId: "5fea7756-0ea4-451a-a703-a558b933e274",
  ReceiptHandle: "r",
  Body: '{"order":1}',
  MessageAttributes: {
    tenant: { DataType: "String", StringValue: "dev" },
    qty: { DataType: "Number.int", StringValue: "12" },
    blob: { DataType: "Binary", BinaryValue: Uint8Array.from([0, 1, 255]) },
  },
  Attributes: {
    AWSTraceHeader: "Root=1-5759e988-bd862e3fe1be46a994272793",
    SenderId: "AIDA",
    SentTimestamp: "1",
  },
};

describe("forwardEntry", () => {
  it("keeps body, every attribute with its type, and the trace header; no delay on a standard queue", () => {
    expect(forwardEntry(received, "m0", false)).toEqual({
      Id: "m0",
      MessageBody: '{"order":1}',
      MessageAttributes: {
        tenant: { DataType: "String", StringValue: "dev" },
        qty: { DataType: "Number.int", StringValue: "12" },
        blob: { DataType: "Binary", BinaryValue: Uint8Array.from([0, 1, 255]) },
      },
      MessageSystemAttributes: {
        AWSTraceHeader: { DataType: "String", StringValue: "Root=1-5759e988-bd862e3fe1be46a994272793" },
      },
      DelaySeconds: 0,
    });
  });

  it("keeps a FIFO message's group and deduplication id, else deduplicates by MessageId", () => {
    const fifo: Message = { ...received, Attributes: { MessageGroupId: "g1", MessageDeduplicationId: "d1" } };
    expect(forwardEntry(fifo, "m1", true)).toMatchObject({
      MessageGroupId: "g1",
      MessageDeduplicationId: "d1",
    });
    expect(forwardEntry(fifo, "m1", true)).not.toHaveProperty("DelaySeconds");
    const noDedup: Message = { ...received, Attributes: { MessageGroupId: "g1" } };
    expect(forwardEntry(noDedup, "m2", true)).toMatchObject({ MessageDeduplicationId: received.MessageId });
  });
});

describe("splitMessage", () => {
  it("gives decide String and Number values as strings and Binary as base64", () => {
    expect(splitMessage(received)).toEqual({
      messageId: received.MessageId,
      body: '{"order":1}',
      attributes: { tenant: "dev", qty: "12", blob: "AAH/" },
    });
  });
});
