// A typed answer shown by its fields: each field's name and value, lists as lists, nested
// objects within; the JSON itself a click away. Every value is text: nothing in it runs.

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

export function TypedAnswer({ value, json }: { value: Record<string, Json>; json: string }) {
  return (
    <>
      <Fields value={value} depth={0} />
      <details class="json">
        <summary>JSON</summary>
        <pre class="output" data-testid="answer">{json}</pre>
      </details>
    </>
  );
}

function Fields({ value, depth }: { value: Record<string, Json>; depth: number }) {
  return (
    <dl class="typed" data-testid={depth === 0 ? "typed-answer" : undefined}>
      {Object.entries(value).map(([name, field]) => (
        <div key={name}>
          <dt>{name}</dt>
          <dd>
            <Value value={field} depth={depth + 1} />
          </dd>
        </div>
      ))}
    </dl>
  );
}

function Value({ value, depth }: { value: Json; depth: number }) {
  if (value === null) return <span class="muted">none</span>;
  if (Array.isArray(value)) {
    if (!value.length) return <span class="muted">none</span>;
    return (
      <ul>
        {value.map((item, i) => (
          <li key={i}>
            <Value value={item} depth={depth + 1} />
          </li>
        ))}
      </ul>
    );
  }
  if (typeof value === "object") {
    // Deeply nested documents are shown as JSON past a few levels.
    return depth > 4 ? <code>{JSON.stringify(value)}</code> : <Fields value={value} depth={depth} />;
  }
  if (typeof value === "boolean") return <span>{value ? "yes" : "no"}</span>;
  return <span>{String(value)}</span>;
}
