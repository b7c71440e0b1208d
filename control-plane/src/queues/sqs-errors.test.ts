import { describe, expect, it } from "vitest";
import { QueueDoesNotExist, SQSServiceException } from "@aws-sdk/client-sqs";
import { isQueueMissing, isTransient, sqsErrorCode } from "./sqs-errors.js";

const meta = (httpStatusCode: number) => ({ $metadata: { httpStatusCode } });

describe("SQS errors", () => {
  it("knows a missing queue by the SDK's class or the query protocol's code", () => {
    const missing = new QueueDoesNotExist({ message: "gone", ...meta(400) });
    expect(isQueueMissing(missing)).toBe(true);
    expect(isTransient(missing)).toBe(false);
    const legacy = Object.assign(new Error("gone"), { Code: "AWS.SimpleQueueService.NonExistentQueue" });
    expect(isQueueMissing(legacy)).toBe(true);
    expect(sqsErrorCode(legacy)).toBe("AWS.SimpleQueueService.NonExistentQueue");
    const typed = Object.assign(new Error("gone"), { Code: "com.amazonaws.sqs#QueueDoesNotExist" });
    expect(isQueueMissing(typed)).toBe(true);
    expect(sqsErrorCode(typed)).toBe("QueueDoesNotExist");
  });

  it("retries throttling, server faults and lost connections, not client faults", () => {
    const fault = (name: string, $fault: "client" | "server", status: number) =>
      new SQSServiceException({ name, $fault, message: name, ...meta(status) });
    expect(isTransient(fault("RequestThrottled", "client", 400))).toBe(true);
    expect(isTransient(fault("InternalError", "server", 500))).toBe(true);
    expect(isTransient(fault("AccessDenied", "client", 403))).toBe(false);
    expect(isTransient(fault("InvalidParameterValue", "client", 400))).toBe(false);
    expect(isTransient(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }))).toBe(
      true,
    );
    expect(sqsErrorCode(Object.assign(new Error("x"), { code: "ECONNREFUSED" }))).toBe("ECONNREFUSED");
  });
});
