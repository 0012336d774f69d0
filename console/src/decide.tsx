// The decision on one waiting call, as the CLI sends it: approve, always allow, reject with
// a reason, or run it with edited arguments (a labelled field for each text, number or yes/no
// argument; the JSON itself for anything else). Each is one signal to the run; the buttons
// are disabled once it is sent, so a decision goes once.

import { useState } from "preact/hooks";
import { sendSignal, type PauseReason } from "./api";
import type { OnError } from "./app";

type Scalar = string | number | boolean;

/** The arguments as fields, when each is a text, a number or a yes/no; else null. */
function fieldsOf(args: unknown): Record<string, Scalar> | null {
  if (typeof args !== "object" || args === null || Array.isArray(args)) return null;
  const entries = Object.entries(args as Record<string, unknown>);
  if (!entries.length) return null;
  return entries.every(([, v]) => ["string", "number", "boolean"].includes(typeof v)) ? (args as Record<string, Scalar>) : null;
}

export function Decide({ runId, reason, onError, onDecided }: { runId: string; reason: PauseReason; onError: OnError; onDecided?: () => void }) {
  const [mode, setMode] = useState<"choose" | "reject" | "edit">("choose");
  const [why, setWhy] = useState("");
  const [args, setArgs] = useState(JSON.stringify(reason.arguments ?? {}, null, 2));
  const [fields, setFields] = useState<Record<string, Scalar> | null>(fieldsOf(reason.arguments));
  const [asJson, setAsJson] = useState(fields === null);
  const [sent, setSent] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const callId = reason.call_id ?? "";
  const id = `decide-${callId.replace(/[^a-zA-Z0-9_-]/g, "_")}`;

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

  if (sent) return <p class="decided" role="status">Decision sent: {sent}</p>;
  return (
    <div class="decide" data-call={callId}>
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
            let parsed: unknown = fields;
            if (asJson || fields === null) {
              try {
                parsed = JSON.parse(args);
              } catch {
                setFailure("the arguments are not JSON");
                return;
              }
            }
            send("run with edited arguments", { type: "modify", arguments: parsed });
          }}
        >
          {!asJson && fields !== null ? (
            <fieldset class="fields">
              <legend>Arguments</legend>
              {Object.entries(fields).map(([name, value]) => {
                const fieldId = `${id}-arg-${name.replace(/[^a-zA-Z0-9_-]/g, "_")}`;
                const set = (v: Scalar) => setFields({ ...fields, [name]: v });
                return (
                  <div class="field" key={name}>
                    <label for={fieldId}>{name}</label>
                    {typeof value === "boolean" ? (
                      <input id={fieldId} type="checkbox" checked={value} onChange={(e) => set(e.currentTarget.checked)} />
                    ) : typeof value === "number" ? (
                      <input id={fieldId} type="number" value={value} onInput={(e) => set(Number(e.currentTarget.value))} />
                    ) : value.includes("\n") || value.length > 80 ? (
                      <textarea id={fieldId} rows={6} value={value} onInput={(e) => set(e.currentTarget.value)} />
                    ) : (
                      <input id={fieldId} value={value} onInput={(e) => set(e.currentTarget.value)} />
                    )}
                  </div>
                );
              })}
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
                  if (!asJson) setArgs(JSON.stringify(fields, null, 2));
                  else {
                    try {
                      setFields(fieldsOf(JSON.parse(args)) ?? fields);
                    } catch {
                      setFailure("the arguments are not JSON");
                      return;
                    }
                  }
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
