import type { Schemas } from "./dist/types";

export type { Identity, Schemas, TextPayload } from "./dist/types";

/** The name of a published schema; `<name>.schema.json` is its file and the last segment of its `$id`. */
export type SchemaName = keyof Schemas;

/** One way in which a value breaks a schema (the same fields as Python's `schemas.Violation`). */
export interface Violation {
  /** JSON pointer (RFC 6901) to the offending value; `""` is the value itself, where missing and unexpected properties are reported. */
  path: string;
  /** Human-readable explanation, as worded by Ajv. */
  message: string;
  /** The JSON Schema keyword that failed (`required`, `pattern`, `minItems` ...). */
  validator: string;
}

/** Thrown for a schema name that is not in `SCHEMA_NAMES`; the message lists the known ones. */
export declare class UnknownSchema extends RangeError {
  readonly schemaName: string;
}

/** Every published schema name, sorted. */
export declare const SCHEMA_NAMES: readonly SchemaName[];

/** Every violation of schema `name` by `value`, sorted by path, keyword, then message; empty when valid. */
export declare function validate(name: SchemaName, value: unknown): Violation[];

/** Whether `value` satisfies schema `name`, narrowing it to that schema's type. */
export declare function isValid<N extends SchemaName>(name: N, value: unknown): value is Schemas[N];

/** The parsed schema file, `$schema` and `$id` included; a fresh copy on each call. */
export declare function schema(name: SchemaName): Record<string, unknown>;
