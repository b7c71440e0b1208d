// The operator-level session allow-list, checked by the Primary and by every member.
export { ALLOW_LIST_REFUSALS, SessionAllowList } from "./session-allow-list.js";
export type {
  AllowListField,
  AllowListRefusal,
  AllowListVerdict,
  SessionAllowListOptions,
} from "./session-allow-list.js";
export { refusalGauge, refusalReasons } from "./refusal-gauge.js";
export { parseTargetPattern } from "./target-pattern.js";
export type { TargetPattern } from "./target-pattern.js";
