import { afterEach, describe, expect, it } from "vitest";
import { isFifo, queueNameOf, SqsClients, targetOf } from "./sqs-clients.js";

const credentials = { accessKeyId: "test", secretAccessKey: "test" };
let made: SqsClients[] = [];
const clients = (o: ConstructorParameters<typeof SqsClients>[0] = {}) => {
  const c = new SqsClients({ credentials, ...o });
  made.push(c);
  return c;
};
afterEach(() => {
  for (const c of made) c.destroy();
  made = [];
});

describe("targetOf", () => {
  it("takes the region from AWS's queue hosts and keeps AWS's endpoint", () => {
    expect(targetOf("https://sqs.eu-west-1.amazonaws.com/123456789012/orders", "us-east-1")).toEqual({
      region: "eu-west-1",
      endpoint: undefined,
    });
    expect(targetOf("https://ap-south-1.queue.amazonaws.com/123456789012/orders", undefined)).toEqual({
      region: "ap-south-1",
      endpoint: undefined,
    });
    expect(targetOf("https://sqs.cn-north-1.amazonaws.com.cn/1/q", undefined).region).toBe("cn-north-1");
    expect(targetOf("https://queue.amazonaws.com/1/q", "eu-west-1")).toEqual({
      region: "us-east-1",
      endpoint: undefined,
    });
  });

  it("keeps the host of FIPS and dual-stack endpoints with their region", () => {
    expect(targetOf("https://sqs-fips.us-gov-west-1.amazonaws.com/1/q", undefined)).toEqual({
      region: "us-gov-west-1",
      endpoint: "https://sqs-fips.us-gov-west-1.amazonaws.com",
    });
    expect(targetOf("https://sqs.eu-west-1.api.aws/1/q", undefined)).toEqual({
      region: "eu-west-1",
      endpoint: "https://sqs.eu-west-1.api.aws",
    });
  });

  it("sends any other host to its origin, signed with the configured region", () => {
    expect(targetOf("http://localhost:9324/000000000000/orders", "eu-central-1")).toEqual({
      region: "eu-central-1",
      endpoint: "http://localhost:9324",
    });
    expect(
      targetOf("http://sqs.us-east-1.localhost.localstack.cloud:4566/000000000000/q", "us-east-1").endpoint,
    ).toBe("http://sqs.us-east-1.localhost.localstack.cloud:4566");
  });

  it("refuses what is not an http(s) URL", () => {
    expect(() => targetOf("orders", "us-east-1")).toThrow(/not a queue URL/);
    expect(() => targetOf("ftp://host/q", "us-east-1")).toThrow(/not http/);
  });
});

describe("SqsClients", () => {
  it("gives one client per region or endpoint, configured for it", async () => {
    const c = clients({ region: "eu-central-1" });
    const a = c.forQueue("https://sqs.eu-west-1.amazonaws.com/1/a");
    expect(c.forQueue("https://eu-west-1.queue.amazonaws.com/1/b")).toBe(a);
    expect(await a.config.region()).toBe("eu-west-1");
    expect(a.config.isCustomEndpoint).toBe(false);
    expect(a.config.useQueueUrlAsEndpoint).toBe(false);

    const local = c.forQueue("http://127.0.0.1:9324/000000000000/a");
    expect(c.forQueue("http://127.0.0.1:9324/000000000000/other")).toBe(local);
    expect(c.forQueue("http://127.0.0.1:9325/000000000000/a")).not.toBe(local);
    expect(await local.config.region()).toBe("eu-central-1");
    expect(await local.config.endpoint?.()).toMatchObject({
      hostname: "127.0.0.1",
      port: 9324,
      protocol: "http:",
    });
  });

  it("local() is the configured endpoint's client, else the configured region's", async () => {
    const withEndpoint = clients({ region: "eu-central-1", endpoint: "http://127.0.0.1:9324" });
    expect(withEndpoint.local()).toBe(withEndpoint.forQueue("http://127.0.0.1:9324/000000000000/q"));
    const aws = clients({ region: "eu-west-1" });
    expect(aws.local()).toBe(aws.forQueue("https://sqs.eu-west-1.amazonaws.com/1/q"));
    expect(aws.local().config.isCustomEndpoint).toBe(false);
  });

  it("uses the credentials given", async () => {
    const c = clients({ region: "eu-west-1" });
    expect(await c.local().config.credentials()).toMatchObject(credentials);
  });

  it("makes new clients after destroy()", () => {
    const c = clients({ region: "eu-west-1" });
    const before = c.local();
    c.destroy();
    expect(c.local()).not.toBe(before);
  });

  it("names the option that is wrong", () => {
    expect(() => new SqsClients({ endpoint: "elasticmq:9324" })).toThrow(
      /^endpoint: must be an http\(s\) URL/,
    );
    expect(() => new SqsClients({ region: "EU West" })).toThrow(/^region: /);
  });
});

describe("queue names", () => {
  it("reads the name from a URL or takes a name as it is", () => {
    expect(queueNameOf("https://sqs.eu-west-1.amazonaws.com/123/orders.fifo")).toBe("orders.fifo");
    expect(queueNameOf("http://localhost:9324/000000000000/orders/")).toBe("orders");
    expect(queueNameOf("orders")).toBe("orders");
    expect(isFifo("orders.fifo")).toBe(true);
    expect(isFifo("http://localhost:9324/0/orders.fifo")).toBe(true);
    expect(isFifo("http://localhost:9324/0/orders")).toBe(false);
  });
});
