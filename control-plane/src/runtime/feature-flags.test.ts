import { describe, expect, it } from "vitest";
import { OptionError } from "../../../lib/option-error.js";
import { parseFeatureFlags, parseListen, secondsFlag, type FeatureFlags } from "./feature-flags.js";

describe("parseListen", () => {
  it.each([
    [":9443", { host: "0.0.0.0", port: 9443 }],
    ["127.0.0.1:0", { host: "127.0.0.1", port: 0 }],
    ["[::1]:80", { host: "::1", port: 80 }],
  ])("%s", (v, want) => expect(parseListen("--x", v)).toEqual(want));

  it.each(["9443x", "host:70000", "a:b:1"])("refuses %s, naming the flag", (v) => {
    expect(() => parseListen("--x-listen", v)).toThrow(/^--x-listen: .* is not host:port/);
  });
});

describe("secondsFlag", () => {
  it("gives ms, and refuses what is not a positive number", () => {
    expect(secondsFlag("--s", "1.5")).toBe(1500);
    expect(() => secondsFlag("--s", "0")).toThrow(OptionError);
    expect(() => secondsFlag("--s", "soon")).toThrow(/--s: must be a positive number of seconds/);
  });
});

describe("parseFeatureFlags", () => {
  const flags: FeatureFlags<{ on: boolean; mode: string }> = {
    add: (cmd) => cmd.option("--on", "turn it on", false),
    parse: (values, mode) => ({ on: values.on === true, mode }),
  };

  it("parses one feature's flags alone, with the mode", () => {
    expect(parseFeatureFlags(flags, ["--on"], "member")).toEqual({ on: true, mode: "member" });
    expect(parseFeatureFlags(flags, [], "both")).toEqual({ on: false, mode: "both" });
  });

  it("refuses a flag the feature does not have", () => {
    expect(() => parseFeatureFlags(flags, ["--other"], "member")).toThrow(
      /arguments: unknown option '--other'/,
    );
  });
});
