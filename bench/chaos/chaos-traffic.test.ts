import { describe, expect, it } from "vitest";
import { explainFailures, type Disruption, type RequestRecord } from "./chaos-traffic.js";

const req = (
  startAt: number,
  endAt: number,
  outcome: RequestRecord["outcome"],
  extra: Partial<RequestRecord> = {},
) => ({ target: "east", connection: "fresh", startAt, endAt, outcome, ...extra }) as RequestRecord;
const kill: Disruption = { what: "router pod deleted", startAt: 1_000, endAt: 5_000 };

describe("explainFailures", () => {
  it("excuses only a failure in flight at the instant a disruption began, listing it", () => {
    const b = explainFailures(
      [req(900, 1_100, "error", { error: "ECONNRESET", connection: "keep-alive" })],
      [kill],
      0,
    );
    expect(b).toMatchObject({ inFlightAtDisruption: 1, lost: 0 });
    expect(b.inFlightExamples).toEqual([
      "east keep-alive 0.90 s → 1.10 s: error ECONNRESET (at router pod deleted)",
    ]);
  });

  it("counts as lost a failure that started while the disruption was in progress, or with none near it", () => {
    const b = explainFailures(
      [req(2_000, 2_100, "http5xx", { status: 502 }), req(8_000, 8_100, "error")],
      [kill],
      0,
    );
    expect(b).toMatchObject({ inFlightAtDisruption: 0, duringDisruption: 1, unexplained: 1, lost: 2 });
    expect(b.lostExamples).toHaveLength(2);
  });

  it("counts an answer from the app in the pod as lost and as a wrong answerer, during a disruption or not", () => {
    const b = explainFailures(
      [req(2_000, 2_010, "app"), req(9_000, 9_010, "app"), req(9_500, 9_510, "other"), req(10, 20, "local")],
      [kill],
      0,
    );
    expect(b).toMatchObject({ wrongAnswerer: 3, lost: 3, appDuringDisruption: 1, appOutsideDisruption: 1 });
    expect(b.answered).toEqual({ local: 1, app: 2, other: 1 });
  });

  it("never excuses a request left unanswered, even one in flight at a kill", () => {
    const b = explainFailures([req(900, 16_000, "timeout")], [kill], 0);
    expect(b).toMatchObject({ unanswered: 1, inFlightAtDisruption: 0, lost: 1 });
  });
});
