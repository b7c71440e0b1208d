import { Readable } from "node:stream";
import { text } from "node:stream/consumers";
import { describe, expect, it } from "vitest";
import { DefinerRewrite, rewriteDefinerLine } from "./mysql-definer-rewrite.js";

const DUMP = [
  "/*!40101 SET NAMES utf8mb4 */;",
  "CREATE DEFINER=`app`@`%` PROCEDURE `p`()",
  "/*!50013 DEFINER=`app`@`10.0.%` SQL SECURITY DEFINER */",
  "/*!50003 CREATE*/ /*!50017 DEFINER=`we``ird`@`localhost`*/ /*!50003 trigger t after insert on o for each row set @x = 1 */;;",
  "/*!50106 CREATE*/ /*!50117 DEFINER=`a_role`*/ /*!50106 EVENT `e` ON SCHEDULE EVERY 1 DAY DO delete from audit */ ;;",
  "INSERT INTO `notes` VALUES (1,'DEFINER=`app`@`%` stays as written'),(2,'ü');",
  "",
].join("\n");

const EXPECTED = [
  "/*!40101 SET NAMES utf8mb4 */;",
  "CREATE DEFINER=CURRENT_USER PROCEDURE `p`()",
  "/*!50013 DEFINER=CURRENT_USER SQL SECURITY DEFINER */",
  "/*!50003 CREATE*/ /*!50017 DEFINER=CURRENT_USER*/ /*!50003 trigger t after insert on o for each row set @x = 1 */;;",
  "/*!50106 CREATE*/ /*!50117 DEFINER=CURRENT_USER*/ /*!50106 EVENT `e` ON SCHEDULE EVERY 1 DAY DO delete from audit */ ;;",
  "INSERT INTO `notes` VALUES (1,'DEFINER=`app`@`%` stays as written'),(2,'ü');",
  "",
].join("\n");

async function rewrite(chunks: Buffer[]): Promise<string> {
  return text(Readable.from(chunks).pipe(new DefinerRewrite()));
}

describe("DefinerRewrite", () => {
  it("rewrites every definer clause to CURRENT_USER and leaves row lines as they are", async () => {
    expect(await rewrite([Buffer.from(DUMP)])).toBe(EXPECTED);
  });

  it("gives the same result however the dump is cut into chunks", async () => {
    const bytes = Buffer.from(DUMP);
    for (const size of [1, 2, 3, 7, 16, 64]) {
      const chunks: Buffer[] = [];
      for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.subarray(i, i + size));
      expect(await rewrite(chunks), `chunks of ${size} bytes`).toBe(EXPECTED);
    }
  });

  it("keeps bytes that are not valid UTF-8 unchanged", () => {
    const line = Buffer.concat([
      Buffer.from("CREATE DEFINER=`app`@`%` VIEW v AS SELECT '"),
      Buffer.from([0xff, 0xfe]),
      Buffer.from("'\n"),
    ]);
    const out = rewriteDefinerLine(line);
    expect(out.subarray(out.length - 4)).toEqual(Buffer.from([0xff, 0xfe, 0x27, 0x0a]));
    expect(out.toString("latin1")).toContain("DEFINER=CURRENT_USER VIEW");
  });

  it("passes a last line without a newline through the same rewrite", async () => {
    expect(await rewrite([Buffer.from("CREATE DEFINER=`app`@`%` FUNCTION f()")])).toBe(
      "CREATE DEFINER=CURRENT_USER FUNCTION f()",
    );
  });
});
