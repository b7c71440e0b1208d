import { describe, expect, it } from "vitest";
import { copiedAttributes, TEMP_QUEUE_PREFIX, tempQueueName } from "./temp-queues.js";

describe("tempQueueName", () => {
  it("is sy-<role>-<8 hex>-<original>, different each time", () => {
    const a = tempQueueName("t", "orders");
    expect(a).toMatch(/^sy-t-[0-9a-f]{8}-orders$/);
    expect(a.startsWith(TEMP_QUEUE_PREFIX)).toBe(true);
    expect(tempQueueName("o", "orders")).toMatch(/^sy-o-[0-9a-f]{8}-orders$/);
    expect(new Set(Array.from({ length: 50 }, () => tempQueueName("t", "orders"))).size).toBe(50);
  });

  it("truncates the original to fit 80 characters and keeps .fifo", () => {
    const long = "x".repeat(80);
    const n = tempQueueName("t", long);
    expect(n).toHaveLength(80);
    expect(n).toMatch(/^sy-t-[0-9a-f]{8}-x+$/);
    const f = tempQueueName("o", `${"y".repeat(75)}.fifo`);
    expect(f).toHaveLength(80);
    expect(f).toMatch(/^sy-o-[0-9a-f]{8}-y+\.fifo$/);
    expect(tempQueueName("t", "o.fifo")).toMatch(/^sy-t-[0-9a-f]{8}-o\.fifo$/);
  });
});

describe("copiedAttributes", () => {
  const counters = {
    QueueArn: "arn:aws:sqs:eu-west-1:1:orders",
    ApproximateNumberOfMessages: "4",
    CreatedTimestamp: "1",
    LastModifiedTimestamp: "2",
    Policy: '{"Statement":[]}',
    RedriveAllowPolicy: '{"redrivePermission":"allowAll"}',
  };

  it("copies what shapes message behaviour, never the policy, ARN, counters or timestamps", () => {
    expect(
      copiedAttributes({
        ...counters,
        DelaySeconds: "3",
        MaximumMessageSize: "1024",
        MessageRetentionPeriod: "600",
        ReceiveMessageWaitTimeSeconds: "2",
        VisibilityTimeout: "45",
        RedrivePolicy: '{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:1:dlq","maxReceiveCount":"3"}',
        SqsManagedSseEnabled: "true",
      }),
    ).toEqual({
      DelaySeconds: "3",
      MaximumMessageSize: "1024",
      MessageRetentionPeriod: "600",
      ReceiveMessageWaitTimeSeconds: "2",
      VisibilityTimeout: "45",
      RedrivePolicy: '{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:1:dlq","maxReceiveCount":"3"}',
      SqsManagedSseEnabled: "true",
    });
  });

  it("copies FIFO settings of a FIFO queue only, and one kind of encryption", () => {
    const fifo = {
      FifoQueue: "true",
      ContentBasedDeduplication: "true",
      DeduplicationScope: "messageGroup",
      FifoThroughputLimit: "perMessageGroupId",
    };
    expect(copiedAttributes(fifo)).toEqual(fifo);
    expect(copiedAttributes({ FifoQueue: "false", ContentBasedDeduplication: "false" })).toEqual({});
    expect(
      copiedAttributes({
        KmsMasterKeyId: "alias/aws/sqs",
        KmsDataKeyReusePeriodSeconds: "300",
        SqsManagedSseEnabled: "false",
      }),
    ).toEqual({ KmsMasterKeyId: "alias/aws/sqs", KmsDataKeyReusePeriodSeconds: "300" });
  });
});
