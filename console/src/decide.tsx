// The decision on one waiting call, as the CLI sends it: approve, always allow, reject with
// a reason, or run it with edited arguments: a labelled field for each argument the tool
// takes (from its schema, when the server knows it: one the model left out too, with its
// description), else for each argument given; the JSON itself a click away. Each is one
// signal to the run; the buttons are disabled once it is sent, so a decision goes once.

import { useEffect, useRef, useState } from "preact/hooks";
import { sendSignal, toolInput, type PauseReason } from "./api";
import type { OnError } from "./app";
import { argumentsOf, initialValues, schemaFields, valueFields, withEdits, type Field, type FieldValue } from "./fields";

export function Decide({
  runId,
  target,
  reason,
  onError,
  onDecided,
}: {
  runId: string;
  /** The run's agent or team, whose tools' schemas the server may know. */
  target?: string;
  reason: PauseReason;
  onError: OnError;
  onDecided?: () => void;
}) {
  const [mode, setMode] = useState<"choose" | "reject" | "edit">("choose");
  const [why, setWhy] = useState("");
  const [args, setArgs] = useState(JSON.stringify(reason.arguments ?? {}, null, 2));
  const [fields, setFields] = useState<Field[] | null>(valueFields(reason.arguments));
  const [values, setValues] = useState<Record<string, FieldValue>>(() => initialValues(fields ?? [], reason.arguments));
  const [touched, setTouched] = useState<Set<string>>(new Set());
  const [asJson, setAsJson] = useState(fields === null);
  const [sent, setSent] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  // What became of the tool's schema: asked for, used, used around a person's edits, or none.
  const [schemaState, setSchemaState] = useState<"asked" | "used" | "kept-edits" | "none">("asked");
  const callId = reason.call_id ?? "";
  const id = `decide-${callId.replace(/[^a-zA-Z0-9_-]/g, "_")}`;
  // The form as last drawn, for the schema arriving later.
  const drawn = useRef({ fields, values, touched, args, initialArgs: args });
  drawn.current = { ...drawn.current, fields, values, touched, args };

  // The tool's schema, when the server knows it: a field for every argument it takes. What
  // a person typed before it arrived stays as typed.
  useEffect(() => {
    if (!target || !reason.tool) {
      setSchemaState("none");
      return;
    }
    let gone = false;
    toolInput(target, reason.tool).then((schema) => {
      if (gone) return;
      const known = schemaFields(schema);
      if (!known) {
        setSchemaState("none");
        return;
      }
      const now = drawn.current;
      if (now.touched.size === 0 && now.args === now.initialArgs) {
        setFields(known);
        setValues(initialValues(known, reason.arguments));
        setAsJson(false);
        setSchemaState("used");
        return;
      }
      // Edited already: the schema's fields around the person's values; the JSON, when
      // that is what they edit, stays in front of them.
      const merged = withEdits(known, now.fields ?? [], now.values, now.touched, reason.arguments);
      setFields(merged.fields);
      setValues(merged.values);
      setSchemaState("kept-edits");
    });
    return () => {
      gone = true;
    };
  }, [target, reason.tool]);

  const send = async (label: string, decision: unknown) => {
    setSent(`${label}…`);
    setFailure(null);
    try {
      await sendSignal(runId, { type: "approval", call_id: callId, decision });
      setSent(label);
      onDecided?.();
    } catch (error) {
      onError(error);
      setSent(null);
      setFailure(error instanceof Error ? error.message : String(error));
    }
  };

  /** The arguments as edited (the fields', or the JSON's); null, the reason shown, when
   * they cannot be made. */
  const edited = (): { args: unknown } | null => {
    let why = "the arguments are not JSON";
    if (!asJson && fields !== null) {
      const made = argumentsOf(fields, values, reason.arguments, touched);
      if (made.ok) return { args: made.args };
      why = made.error;
    } else {
      try {
        return { args: JSON.parse(args) };
      } catch {
        // `why` says so.
      }
    }
    setFailure(why);
    return null;
  };

  if (sent) return <p class="decided" role="status">Decision sent: {sent}</p>;
  return (
    <div class="decide" data-call={callId} data-schema={schemaState}>
      {failure && <p role="alert" class="error">{failure}</p>}
      {mode === "choose" && (
        <div class="buttons">
          <button type="button" onClick={() => send("approved", { type: "approve" })}>Approve</button>
          <button type="button" onClick={() => send("always allowed", { type: "always_allow" })}>Always allow {reason.tool}</button>
          <button type="button" onClick={() => setMode("reject")}>Reject…</button>
          <button type="button" onClick={() => setMode("edit")}>Edit arguments…</button>
        </div>
      )}
      {mode === "reject" && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            send("rejected", why.trim() ? { type: "reject", reason: why.trim() } : { type: "reject" });
          }}
        >
          <label for={`${id}-reason`}>Reason for the model</label>
          <input id={`${id}-reason`} value={why} onInput={(e) => setWhy(e.currentTarget.value)} />
          <div class="buttons">
            <button type="submit">Reject</button>
            <button type="button" onClick={() => setMode("choose")}>Back</button>
          </div>
        </form>
      )}
      {mode === "edit" && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            const made = edited();
            if (made) send("run with edited arguments", { type: "modify", arguments: made.args });
          }}
        >
          {!asJson && fields !== null ? (
            <fieldset class="fields">
              <legend>Arguments</legend>
              {fields.map((field) => (
                <FieldInput
                  key={field.name}
                  field={field}
                  id={`${id}-arg-${field.name.replace(/[^a-zA-Z0-9_-]/g, "_")}`}
                  value={values[field.name] ?? ""}
                  onChange={(value) => {
                    setValues({ ...values, [field.name]: value });
                    setTouched(new Set(touched).add(field.name));
                  }}
                />
              ))}
            </fieldset>
          ) : (
            <>
              <label for={`${id}-args`}>Arguments (JSON)</label>
              <textarea id={`${id}-args`} rows={6} value={args} onInput={(e) => setArgs(e.currentTarget.value)} />
            </>
          )}
          <div class="buttons">
            <button type="submit">Run with these arguments</button>
            {fields !== null && (
              <button
                type="button"
                onClick={() => {
                  const made = edited();
                  if (!made) return;
                  const current = made.args;
                  setFailure(null);
                  if (asJson) {
                    // Back to the fields, with what the JSON says.
                    setValues(initialValues(fields, current));
                    setTouched(new Set(fields.map((f) => f.name).filter((name) => typeof current === "object" && current !== null && name in current)));
                  } else setArgs(JSON.stringify(current, null, 2));
                  setAsJson(!asJson);
                }}
              >
                {asJson ? "Edit as fields" : "Edit as JSON"}
              </button>
            )}
            <button type="button" onClick={() => setMode("choose")}>Back</button>
          </div>
        </form>
      )}
    </div>
  );
}

/** One argument's label, control and description. */
function FieldInput({ field, id, value, onChange }: { field: Field; id: string; value: FieldValue; onChange: (value: FieldValue) => void }) {
  const about = field.description ? `${id}-about` : undefined;
  const text = typeof value === "string" ? value : "";
  let control;
  if (field.kind === "boolean") {
    control = <input id={id} type="checkbox" checked={value === true} aria-describedby={about} onChange={(e) => onChange(e.currentTarget.checked)} />;
  } else if (field.kind === "choice") {
    control = (
      <select id={id} value={text} required={field.required} aria-describedby={about} onChange={(e) => onChange(e.currentTarget.value)}>
        {!field.required && <option value="">—</option>}
        {(field.choices ?? []).map((choice) => (
          <option key={choice} value={choice}>{choice}</option>
        ))}
      </select>
    );
  } else if (field.kind === "number" || field.kind === "integer") {
    control = (
      <input id={id} type="number" step={field.kind === "integer" ? 1 : "any"} value={text} aria-describedby={about} onInput={(e) => onChange(e.currentTarget.value)} />
    );
  } else if (field.kind === "json" || text.includes("\n") || text.length > 80) {
    control = <textarea id={id} rows={field.kind === "json" ? 4 : 6} value={text} aria-describedby={about} onInput={(e) => onChange(e.currentTarget.value)} />;
  } else {
    control = <input id={id} value={text} aria-describedby={about} onInput={(e) => onChange(e.currentTarget.value)} />;
  }
  return (
    <div class="field">
      <label for={id}>{field.name}</label>
      {control}
      {about && (
        <small id={about} class="muted">
          {field.description}
          {field.kind === "json" ? " (JSON)" : ""}
        </small>
      )}
    </div>
  );
}

/** What a waiting call asks, in words. */
export function Asking({ reason }: { reason: PauseReason }) {
  if (reason.type === "input") return <p>The agent asks: {reason.prompt}</p>;
  return (
    <>
      <p>
        <strong>{reason.tool}</strong> <code>{reason.call_id}</code>
        {reason.type === "uncertain_action" ? " was interrupted and may or may not have run" : ` needs approval: ${reason.reason ?? ""}`}
      </p>
      <pre class="args">{JSON.stringify(reason.arguments ?? {}, null, 2)}</pre>
    </>
  );
}
