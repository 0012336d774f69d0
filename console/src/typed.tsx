// A typed answer shown by its fields: each field's name and value, lists as lists, nested
// objects within; with the run's output schema, its fields in the schema's order (the
// required ones as it requires them) and each with its description. The JSON itself is a
// click away. Every value is text: nothing in it runs.

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The answer as a JSON object, when it is one. */
export function typedAnswer(output: string): Record<string, Json> | null {
  try {
    const value: Json = JSON.parse(output);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

export function TypedAnswer({ value, json, schema }: { value: Record<string, Json>; json: string; schema?: unknown }) {
  return (
    <>
      <Fields value={value} depth={0} schema={schema} />
      <details class="json">
        <summary>JSON</summary>
        <pre class="output" data-testid="answer">{json}</pre>
      </details>
    </>
  );
}

type Schema = { [key: string]: unknown };

function isSchema(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The schema of the property `name` of an object schema, when it says. */
function propertyOf(schema: unknown, name: string): Schema | undefined {
  if (!isSchema(schema) || !isSchema(schema.properties)) return undefined;
  const property = schema.properties[name];
  return isSchema(property) ? property : undefined;
}

/** `value`'s fields in the schema's order: the required ones as it requires them, then the
 * rest of its properties, then any it does not name, as the answer gives them. */
function ordered(value: Record<string, Json>, schema: unknown): [string, Json][] {
  const entries = Object.entries(value);
  if (!isSchema(schema)) return entries;
  const required = Array.isArray(schema.required) ? (schema.required as unknown[]) : [];
  const listed = isSchema(schema.properties) ? Object.keys(schema.properties) : [];
  const rank = (name: string) => {
    const r = required.indexOf(name);
    if (r >= 0) return r;
    const l = listed.indexOf(name);
    return l >= 0 ? required.length + l : required.length + listed.length;
  };
  return entries.map((entry, i) => ({ entry, i })).sort((a, b) => rank(a.entry[0]) - rank(b.entry[0]) || a.i - b.i).map(({ entry }) => entry);
}

function Fields({ value, depth, schema }: { value: Record<string, Json>; depth: number; schema?: unknown }) {
  return (
    <dl class="typed" data-testid={depth === 0 ? "typed-answer" : undefined}>
      {ordered(value, schema).map(([name, field]) => {
        const property = propertyOf(schema, name);
        const about = typeof property?.description === "string" ? property.description : null;
        return (
          <div key={name}>
            <dt>{name}</dt>
            <dd>
              <Value value={field} depth={depth + 1} schema={property} />
            </dd>
            {about && <dd class="about">{about}</dd>}
          </div>
        );
      })}
    </dl>
  );
}

function Value({ value, depth, schema }: { value: Json; depth: number; schema?: unknown }) {
  if (value === null) return <span class="muted">none</span>;
  if (Array.isArray(value)) {
    if (!value.length) return <span class="muted">none</span>;
    const items = isSchema(schema) ? schema.items : undefined;
    return (
      <ul>
        {value.map((item, i) => (
          <li key={i}>
            <Value value={item} depth={depth + 1} schema={items} />
          </li>
        ))}
      </ul>
    );
  }
  if (typeof value === "object") {
    // Deeply nested documents are shown as JSON past a few levels.
    return depth > 4 ? <code>{JSON.stringify(value)}</code> : <Fields value={value} depth={depth} schema={schema} />;
  }
  if (typeof value === "boolean") return <span>{value ? "yes" : "no"}</span>;
  return <span>{String(value)}</span>;
}
