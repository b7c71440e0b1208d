// Building blocks of the Switchyard CRD schemas, written once in TypeBox so the same
// definition yields the static TypeScript type (Static<>) and, through
// structural-schema.ts, the OpenAPI v3 schema the API server enforces. Only constructs
// that translate exactly into a Kubernetes structural schema are used here; anything
// else is refused by the translator rather than silently loosened.
import { Type, type TLiteral, type TSchema, type TUnion } from "@sinclair/typebox";

/** One CEL rule for `x-kubernetes-validations`. */
export interface CelRule {
  rule: string;
  message: string;
  /** Field path (relative to the schema node) the API server names in its error. */
  fieldPath?: string;
  reason?: "FieldValueInvalid" | "FieldValueForbidden" | "FieldValueRequired" | "FieldValueDuplicate";
}

/** Attaches `x-kubernetes-validations` to a schema node's options. */
export function cel(...rules: CelRule[]): { "x-kubernetes-validations": CelRule[] } {
  return { "x-kubernetes-validations": rules };
}

/** A rule making a field immutable once set (transition rule: runs on update only). */
export function immutable(field: string): CelRule {
  return { rule: "self == oldSelf", message: `${field} is immutable; create a new session instead` };
}

const LABEL_BODY = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const SUBDOMAIN_BODY = `${LABEL_BODY}(\\.${LABEL_BODY})*`;
// RFC 1123 label: cluster names end up in object names and label values.
export const DNS_LABEL_PATTERN = `^${LABEL_BODY}$`;
// RFC 1123 subdomain: names of Deployments, Pods, custom resources.
export const DNS_SUBDOMAIN_PATTERN = `^${SUBDOMAIN_BODY}$`;

/** Target kinds a session may name, as they appear in the target string. */
export const TARGET_KINDS = ["deployment", "statefulset", "pod"] as const;
export type TargetKind = (typeof TARGET_KINDS)[number];

/** `<kind>/<name>` with an optional `/container/<container>`, e.g. `deployment/myapp/container/app`. */
export const TARGET_PATTERN = `^(${TARGET_KINDS.join("|")})/${SUBDOMAIN_BODY}(/container/${LABEL_BODY})?$`;

// An entry of the operator's target allow-list: `<namespace>/<kind>/<name>`, where `*` in a
// part matches any run of characters within that part: `shop/deployment/web`,
// `shop/deployment/api-*`, `team-*/*/*`. The kind part is `*` or a kind; the container of a
// target is not part of it.
export const ALLOWED_TARGET_PATTERN =
  `^[a-z0-9*]([-a-z0-9*]{0,61}[a-z0-9*])?/(\\*|${TARGET_KINDS.join("|")})/` +
  `[a-z0-9*]([-a-z0-9.*]{0,251}[a-z0-9*])?$`;

/** A closed set of strings: an `enum` in the CRD, a string-literal union in TypeScript. */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: { description?: string; default?: T[number] } = {},
): TUnion<TLiteral<T[number]>[]> {
  return Type.Union(
    values.map((v: T[number]) => Type.Literal(v)),
    options,
  );
}

export const DnsLabel = (description: string) =>
  Type.String({ description, minLength: 1, maxLength: 63, pattern: DNS_LABEL_PATTERN });

export const DnsSubdomain = (description: string) =>
  Type.String({ description, minLength: 1, maxLength: 253, pattern: DNS_SUBDOMAIN_PATTERN });

/** Extra schema options for a builder, e.g. `cel(immutable("spec.target"))`. */
export type ExtraOptions = Record<string, unknown>;

export const Sha256Hex = (description: string, extra: ExtraOptions = {}) =>
  Type.String({ description, minLength: 64, maxLength: 64, pattern: "^[a-f0-9]{64}$", ...extra });

export const TargetRef = (extra: ExtraOptions = {}) =>
  Type.String({
    description:
      "What the session runs against: `deployment/<name>`, `statefulset/<name>` or `pod/<name>`, " +
      "optionally followed by `/container/<container>`. Resolved by each workload cluster.",
    minLength: 1,
    maxLength: 340,
    pattern: TARGET_PATTERN,
    ...extra,
  });

export const Timestamp = (description: string) =>
  Type.String({ description, format: "date-time", maxLength: 64 });

/** ws(s):// or http(s):// URL of a router or gateway. */
export const EndpointUrl = (description: string) =>
  Type.String({ description, minLength: 1, maxLength: 2048, pattern: "^(wss?|https?)://[^\\s]+$" });

export const Message = (description: string, maxLength = 4096) => Type.String({ description, maxLength });

export const NonNegativeInt = (description: string) =>
  Type.Integer({ description, minimum: 0, format: "int64" });

/**
 * A map with validated keys. TypeBox expresses it as `patternProperties` (checked by
 * `Value.Check`); Kubernetes has no `patternProperties`, so the translator turns it into
 * `additionalProperties` and the keys are checked by the CEL rule added here.
 */
export function MapOf<V extends TSchema>(
  keyPattern: string,
  value: V,
  options: {
    description: string;
    maxProperties: number;
    keyMaxLength: number;
    minProperties?: number;
    /** More CEL rules on the map (`self` is the map), e.g. on its values. */
    rules?: CelRule[];
  },
) {
  const keyRule: CelRule = {
    rule: `self.all(k, size(k) <= ${options.keyMaxLength} && k.matches(${JSON.stringify(keyPattern)}))`,
    message: `every key must match ${keyPattern} and be at most ${options.keyMaxLength} characters`,
  };
  return Type.Record(Type.String({ pattern: keyPattern }), value, {
    description: options.description,
    maxProperties: options.maxProperties,
    // Closes the map for Value.Check; the translator drops it (Kubernetes uses the CEL rule).
    additionalProperties: false,
    ...(options.minProperties !== undefined ? { minProperties: options.minProperties } : {}),
    ...cel(keyRule, ...(options.rules ?? [])),
  });
}

export const ConditionStatus = StringEnum(["True", "False", "Unknown"] as const, {
  description: "Status of the condition: True, False or Unknown.",
});

/** metav1.Condition's limit on `message`; setConditions truncates to it. */
export const CONDITION_MESSAGE_MAX_LENGTH = 32768;

/** The standard `metav1.Condition` shape, with the API machinery's own limits. */
export const Condition = Type.Object({
  type: Type.String({
    description: "Type of condition in CamelCase, e.g. Ready, Degraded, Valid.",
    maxLength: 316,
    pattern:
      "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
  }),
  status: ConditionStatus,
  observedGeneration: Type.Optional(NonNegativeInt("The .metadata.generation this condition was set for.")),
  lastTransitionTime: Timestamp("Last time the condition changed status."),
  reason: Type.String({
    description: "Programmatic identifier (CamelCase) of the last transition's cause.",
    minLength: 1,
    maxLength: 1024,
    pattern: "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
  }),
  message: Message("Human-readable details of the transition.", CONDITION_MESSAGE_MAX_LENGTH),
});

/** `status.conditions`: a list-map keyed by type, as `metav1.Condition` lists are. */
export const Conditions = () =>
  Type.Array(Condition, {
    description: "Standard conditions (Ready, Degraded, Valid, ...), one per type.",
    maxItems: 32,
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
  });

export const ObservedGeneration = () =>
  NonNegativeInt("The .metadata.generation the status was computed from.");

export const TTL_SECONDS_DEFAULT = 60;
export const TTL_SECONDS_MIN = 5;
export const TTL_SECONDS_MAX = 3600;

export const TtlSeconds = (description: string) =>
  Type.Integer({
    description: `${description} Default ${TTL_SECONDS_DEFAULT}, from ${TTL_SECONDS_MIN} to ${TTL_SECONDS_MAX}.`,
    minimum: TTL_SECONDS_MIN,
    maximum: TTL_SECONDS_MAX,
    default: TTL_SECONDS_DEFAULT,
    format: "int32",
  });

/** Name of a parent session: `mc-<16 lowercase hex>`; children are `<parent>-<cluster>`. */
export const PARENT_NAME_PATTERN = "^mc-[0-9a-f]{16}$";
