// A tool's arguments as form fields, made from the JSON schema of its arguments: every
// argument the tool takes has a field (one the model left out too), typed by what it
// holds, with its description; anything else is edited as JSON.

/** What a field holds, and so how it is edited. */
export type FieldKind = "text" | "number" | "integer" | "boolean" | "choice" | "json";

/** One argument of a schema. */
export interface Field {
  name: string;
  kind: FieldKind;
  required: boolean;
  description?: string;
  choices?: string[];
}

/** A field's value as its control holds it: a checkbox's state, else the text typed. */
export type FieldValue = string | boolean;

type Schema = { [key: string]: unknown };

function isObject(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** What one property of a schema holds. */
function kindOf(property: Schema): Pick<Field, "kind" | "choices"> {
  const choices = property.enum;
  if (Array.isArray(choices) && choices.length && choices.every((c) => typeof c === "string")) {
    return { kind: "choice", choices: choices as string[] };
  }
  // `["string", "null"]`: an optional value of one type.
  const types = (Array.isArray(property.type) ? property.type : [property.type]).filter((t) => t !== "null");
  if (types.length !== 1) return { kind: "json" };
  switch (types[0]) {
    case "string":
      return { kind: "text" };
    case "integer":
      return { kind: "integer" };
    case "number":
      return { kind: "number" };
    case "boolean":
      return { kind: "boolean" };
    default:
      return { kind: "json" };
  }
}

/** The fields of the arguments' schema `schema`, one per property; null when it names none. */
export function schemaFields(schema: unknown): Field[] | null {
  if (!isObject(schema) || !isObject(schema.properties)) return null;
  const required = Array.isArray(schema.required) ? schema.required : [];
  const fields = Object.entries(schema.properties).map(([name, property]) => {
    const about = isObject(property) ? property : {};
    const description = typeof about.description === "string" ? about.description : undefined;
    return { name, required: required.includes(name), description, ...kindOf(about) };
  });
  // The required arguments first, in the order the schema requires them (the tool's own),
  // then the others as the schema lists them.
  const rank = (field: Field) => (field.required ? required.indexOf(field.name) : required.length);
  fields.sort((a, b) => rank(a) - rank(b));
  return fields.length ? fields : null;
}

/** Each field's value from the call's `args` (an argument left out: empty). */
export function initialValues(fields: Field[], args: unknown): Record<string, FieldValue> {
  const given = isObject(args) ? args : {};
  const values: Record<string, FieldValue> = {};
  for (const field of fields) {
    const value = given[field.name];
    if (field.kind === "boolean") values[field.name] = value === true;
    else if (value === undefined || value === null) values[field.name] = "";
    else if (field.kind === "json" || typeof value === "object") values[field.name] = JSON.stringify(value, null, 2);
    else values[field.name] = String(value);
  }
  return values;
}

/** The schema's fields `known` for a call whose fields a person has already edited: each
 * argument the person `touched` keeps its value as typed (and its field, when the schema
 * has none for it or would edit it otherwise), every other field starts from `args`. */
export function withEdits(
  known: Field[],
  current: Field[],
  values: Record<string, FieldValue>,
  touched: Set<string>,
  args: unknown,
): { fields: Field[]; values: Record<string, FieldValue> } {
  const fields = [...known];
  const merged = initialValues(known, args);
  for (const name of touched) {
    const own = current.find((field) => field.name === name);
    if (!own || !(name in values)) continue;
    const at = fields.findIndex((field) => field.name === name);
    if (at === -1) fields.push(own);
    else if (typeof merged[name] !== typeof values[name]) fields[at] = own;
    merged[name] = values[name];
  }
  return { fields, values: merged };
}

/** The arguments the fields say: the call's `args` with each field's value in place of its
 * own. An argument left out stays out unless its field was `touched`. A field that does not
 * hold what its argument takes is an error that names it. */
export function argumentsOf(
  fields: Field[],
  values: Record<string, FieldValue>,
  args: unknown,
  touched: Set<string>,
): { ok: true; args: Record<string, unknown> } | { ok: false; error: string } {
  const given = isObject(args) ? args : {};
  const out: Record<string, unknown> = { ...given };
  for (const field of fields) {
    const value = values[field.name];
    const present = field.name in given;
    if (!present && !touched.has(field.name)) continue;
    if (typeof value === "boolean") {
      out[field.name] = value;
      continue;
    }
    if (value.trim() === "" && field.kind !== "text") {
      if (field.required) return { ok: false, error: `\`${field.name}\` is needed` };
      delete out[field.name];
      continue;
    }
    if (value === "" && !present && !field.required) continue;
    switch (field.kind) {
      case "number":
      case "integer": {
        const number = Number(value);
        if (!Number.isFinite(number) || (field.kind === "integer" && !Number.isInteger(number))) {
          return { ok: false, error: `\`${field.name}\` is ${field.kind === "integer" ? "a whole number" : "a number"}` };
        }
        out[field.name] = number;
        break;
      }
      case "json":
        try {
          out[field.name] = JSON.parse(value);
        } catch {
          return { ok: false, error: `\`${field.name}\` is not JSON` };
        }
        break;
      default:
        out[field.name] = value;
    }
  }
  return { ok: true, args: out };
}

/** Fields made from the call's `args` themselves, when its tool's schema is not known: one
 * per argument it gave, typed by its value; null when `args` is not an object with any. */
export function valueFields(args: unknown): Field[] | null {
  if (!isObject(args)) return null;
  const fields = Object.entries(args).map(([name, value]): Field => {
    const kind: FieldKind =
      typeof value === "boolean" ? "boolean" : typeof value === "number" ? "number" : typeof value === "string" ? "text" : "json";
    return { name, kind, required: false };
  });
  return fields.length ? fields : null;
}
