// Validate JSON values against the Ragu contract and report every violation, as schemas.errors does in Python.
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const Ajv2020 = require("ajv/dist/2020").default;

const DIST = path.join(__dirname, "dist");
const SUFFIX = ".schema.json";

const SCHEMA_NAMES = Object.freeze(
  fs.readdirSync(DIST).filter((file) => file.endsWith(SUFFIX)).map((file) => file.slice(0, -SUFFIX.length)).sort(),
);

// strict: a schema keyword Ajv does not know (or a format it cannot check) is an error, not ignored.
// unicodeRegExp compiles each pattern with the "u" flag, as ECMA-262 patterns in JSON Schema are meant.
const ajv = new Ajv2020({ allErrors: true, strict: true, unicodeRegExp: true });
const schemas = {};
for (const name of SCHEMA_NAMES) {
  schemas[name] = JSON.parse(fs.readFileSync(path.join(DIST, name + SUFFIX), "utf8"));
  ajv.addSchema(schemas[name], name);
}

class UnknownSchema extends RangeError {
  constructor(name) {
    super(`unknown schema ${JSON.stringify(name)}; known schemas: ${SCHEMA_NAMES.join(", ")}`);
    this.name = "UnknownSchema";
    this.schemaName = name;
  }
}

/** The parsed schema file; a fresh copy, so that editing it cannot change what validate enforces. */
function schema(name) {
  if (!Object.hasOwn(schemas, name)) throw new UnknownSchema(name);
  return structuredClone(schemas[name]);
}

/** Every violation of schema `name` by `value`, sorted by path, keyword, then message; empty when valid. */
function validate(name, value) {
  if (!Object.hasOwn(schemas, name)) throw new UnknownSchema(name);
  const check = ajv.getSchema(name);
  if (check(value)) return [];
  return merged(check.errors).sort((a, b) => comparePaths(value, a.path, b.path) || compare(a.validator, b.validator) || compare(a.message, b.message));
}

/** Whether `value` satisfies schema `name`. */
function isValid(name, value) {
  return validate(name, value).length === 0;
}

// Ajv reports each unexpected property on its own; Python's jsonschema (and jsonschema-rs) report one
// additionalProperties violation naming them all. Merged, every implementation lists the same violations.
function merged(errors) {
  const violations = [];
  const extras = new Map();
  for (const error of errors) {
    if (error.keyword !== "additionalProperties") {
      violations.push({ path: error.instancePath, message: error.message, validator: error.keyword });
    } else if (extras.has(error.instancePath)) {
      extras.get(error.instancePath).push(error.params.additionalProperty);
    } else {
      extras.set(error.instancePath, [error.params.additionalProperty]);
    }
  }
  for (const [where, names] of extras) {
    const listed = names.map((extra) => JSON.stringify(extra)).join(", ");
    violations.push({ path: where, message: `must NOT have additional properties: ${listed}`, validator: "additionalProperties" });
  }
  return violations;
}

const compare = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

// The parts of a JSON pointer as Python's sort key sees them: array indexes as numbers before names.
function pathKey(value, pointer) {
  const key = [];
  let node = value;
  for (const part of pointer.split("/").slice(1).map((raw) => raw.replaceAll("~1", "/").replaceAll("~0", "~"))) {
    key.push(Array.isArray(node) ? [0, Number(part), ""] : [1, 0, part]);
    node = node?.[part];
  }
  return key;
}

function comparePaths(value, a, b) {
  const left = pathKey(value, a);
  const right = pathKey(value, b);
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    const order = compare(left[i][0], right[i][0]) || compare(left[i][1], right[i][1]) || compare(left[i][2], right[i][2]);
    if (order) return order;
  }
  return left.length - right.length;
}

module.exports = { SCHEMA_NAMES, UnknownSchema, isValid, schema, validate };
