import { describe, expect, it } from "vitest";
import { BRANCH_KINDS } from "../../../proto/api/v1alpha1/index.js";
import {
  generateBranchIdentifiers,
  generateBranchPassword,
  GENERATED_DATABASE_MAX_LENGTH,
  GENERATED_USER_MAX_LENGTH,
  isGeneratedBranchName,
  sanitizeBranchLabel,
} from "./branch-identifiers.js";

const HOSTILE = [
  "orders",
  "Ünïcödé-Ñame.ß",
  "日本語のブランチ",
  "!!!@@@###$$$%%%^^^&&&***",
  "-",
  "a".repeat(253),
  "my.branch-" + "x9".repeat(120),
  "robert'); DROP TABLE students;--",
  "tab\tnew\nline\u0000nul",
  "",
];

/** Always returns `fill` bytes: every call draws the same suffix. */
const constant =
  (fill: number) =>
  (n: number): Uint8Array =>
    new Uint8Array(n).fill(fill);

describe("sanitizeBranchLabel", () => {
  it("keeps [a-z0-9_] only, folding accents and runs of other characters", () => {
    expect(sanitizeBranchLabel("My-Branch.v2")).toBe("my_branch_v2");
    expect(sanitizeBranchLabel("Ünïcödé-Ñame")).toBe("unicode_name");
    expect(sanitizeBranchLabel("日本語")).toBe("");
    expect(sanitizeBranchLabel("--a--b--")).toBe("a_b");
  });
});

describe("generateBranchIdentifiers", () => {
  for (const kind of BRANCH_KINDS) {
    it(`${kind}: valid names within the engine's limits for hostile CR names`, () => {
      for (const name of HOSTILE) {
        const ids = generateBranchIdentifiers(kind, name);
        for (const [what, value, max] of [
          ["database", ids.database, GENERATED_DATABASE_MAX_LENGTH[kind]],
          ["user", ids.user, GENERATED_USER_MAX_LENGTH[kind]],
        ] as const) {
          expect(value, `${what} of ${JSON.stringify(name)}`).toMatch(/^sy_[a-z0-9_]*[a-z0-9]$/);
          expect(Buffer.byteLength(value)).toBeLessThanOrEqual(max);
          expect(value).not.toContain("__");
          expect(isGeneratedBranchName(kind, value, what)).toBe(true);
        }
      }
    });
  }

  it("keeps a readable prefix and shares the suffix between database and user", () => {
    const ids = generateBranchIdentifiers("PgBranchDatabase", "Checkout-Flow");
    expect(ids.database).toMatch(/^sy_checkout_flow_[a-z2-7]{12}$/);
    expect(ids.user).toBe(ids.database);
  });

  it("keeps MySQL users at 32 characters, truncating the label but never the suffix", () => {
    const ids = generateBranchIdentifiers("MysqlBranchDatabase", "a-rather-long-branch-name-for-mysql");
    expect(ids.user).toHaveLength(32);
    expect(ids.user).toMatch(/^sy_a_rather_long_br_[a-z2-7]{12}$/);
    expect(ids.database.endsWith(ids.user.slice(-12))).toBe(true);
    expect(ids.database.length).toBeGreaterThan(32);
  });

  it("never collides: 2 000 branches of one CR name get 2 000 names", () => {
    const names = new Set<string>();
    for (let i = 0; i < 2000; i++) names.add(generateBranchIdentifiers("PgBranchDatabase", "same").database);
    expect(names.size).toBe(2000);
  });

  it("draws the suffix from the random source (an unlucky source collides, which is why it is random)", () => {
    const a = generateBranchIdentifiers("PgBranchDatabase", "x", constant(3));
    const b = generateBranchIdentifiers("PgBranchDatabase", "x", constant(3));
    expect(a.database).toBe(b.database);
    expect(a.database).toBe("sy_x_dddddddddddd");
  });

  it("uses a name of symbols only as the suffix alone", () => {
    expect(generateBranchIdentifiers("PgBranchDatabase", "%%%", constant(0)).database).toBe(
      "sy_aaaaaaaaaaaa",
    );
  });
});

describe("generateBranchPassword", () => {
  it("is 40 characters that never need quoting in a URL, a shell or SQL", () => {
    for (let i = 0; i < 200; i++) {
      const p = generateBranchPassword();
      expect(p).toMatch(/^[A-Za-z0-9]{40}$/);
      expect(encodeURIComponent(p)).toBe(p);
    }
  });

  it("skips bytes that would bias the alphabet", () => {
    // 248..255 are rejected; 0 maps to "A".
    let calls = 0;
    const random = (n: number) => new Uint8Array(n).fill(calls++ === 0 ? 250 : 0);
    expect(generateBranchPassword(random)).toBe("A".repeat(40));
    expect(calls).toBe(2);
  });

  it("differs every time", () => {
    expect(generateBranchPassword()).not.toBe(generateBranchPassword());
  });
});

describe("isGeneratedBranchName", () => {
  it("refuses names this module would not generate", () => {
    expect(isGeneratedBranchName("PgBranchDatabase", "postgres", "database")).toBe(false);
    expect(isGeneratedBranchName("PgBranchDatabase", "sy_Upper", "database")).toBe(false);
    expect(isGeneratedBranchName("PgBranchDatabase", 'sy_a"; drop', "database")).toBe(false);
    expect(isGeneratedBranchName("MysqlBranchDatabase", "sy_" + "a".repeat(30), "user")).toBe(false);
    expect(isGeneratedBranchName("MysqlBranchDatabase", "sy_" + "a".repeat(30), "database")).toBe(true);
  });
});
