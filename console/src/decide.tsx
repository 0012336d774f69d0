// The decision on one waiting call, as the CLI sends it: approve, always allow, reject with
// a reason, or run it with edited arguments. Each is one signal to the run; the buttons are
// disabled once it is sent, so a decision goes once.

import { useState } from "preact/hooks";
import { sendSignal, type PauseReason } from "./api";
import type { OnError } from "./app";

export function Decide({ runId, reason, onError, onDecided }: { runId: string; reason: PauseReason; onError: OnError; onDecided?: () => void }) {
  const [mode, setMode] = useState<"choose" | "reject" | "edit">("choose");
  const [why, setWhy] = useState("");
  const [args, setArgs] = useState(JSON.stringify(reason.arguments ?? {}, null, 2));
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
            let parsed: unknown;
            try {
              parsed = JSON.parse(args);
            } catch {
              setFailure("the arguments are not JSON");
              return;
            }
            send("run with edited arguments", { type: "modify", arguments: parsed });
          }}
        >
          <label for={`${id}-args`}>Arguments (JSON)</label>
          <textarea id={`${id}-args`} rows={6} value={args} onInput={(e) => setArgs(e.currentTarget.value)} />
          <div class="buttons">
            <button type="submit">Run with these arguments</button>
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
