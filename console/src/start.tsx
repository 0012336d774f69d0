// Start a run: pick one of the served agents or teams, type the task.

import { useEffect, useRef, useState } from "preact/hooks";
import { getJson, postJson, type Target } from "./api";
import type { OnError } from "./app";

/** A new key naming one start (random; `crypto.randomUUID` needs a secure page). */
function newStartKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return "console-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function StartRun({ onError }: { onError: OnError }) {
  const [targets, setTargets] = useState<Target[] | null>(null);
  const [chosen, setChosen] = useState("");
  const [task, setTask] = useState("");
  const [failure, setFailure] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // The start last tried and the key naming it: tried again unchanged (its answer was
  // lost), it is sent with the same key, and the server answers with the run it started.
  const tried = useRef<{ target: string; task: string; key: string } | null>(null);

  useEffect(() => {
    getJson<{ agents: Target[] }>("/v1/agents")
      .then((body) => {
        setTargets(body.agents);
        if (body.agents.length) setChosen(body.agents[0].name);
      })
      .catch(onError);
  }, []);

  const target = targets?.find((t) => t.name === chosen);
  return (
    <section aria-labelledby="start-title">
      <h1 id="start-title">Start a run</h1>
      <form
        class="start"
        onSubmit={async (e) => {
          e.preventDefault();
          if (!target || !task.trim()) return;
          setBusy(true);
          setFailure(null);
          try {
            const body = { [target.kind === "team" ? "team" : "agent"]: target.name, instruction: task, stream: false };
            const last = tried.current;
            const key = last && last.target === target.name && last.task === task ? last.key : newStartKey();
            tried.current = { target: target.name, task, key };
            const started = await postJson<{ run_id: string }>("/v1/runs", body, { "Idempotency-Key": key });
            location.hash = `#/runs/${encodeURIComponent(started.run_id)}`;
          } catch (error) {
            onError(error);
            setFailure(error instanceof Error ? error.message : String(error));
            setBusy(false);
          }
        }}
      >
        <label for="start-target">Agent or team</label>
        <select id="start-target" value={chosen} onChange={(e) => setChosen(e.currentTarget.value)}>
          {(targets ?? []).map((t) => (
            <option key={t.name} value={t.name}>
              {t.name} ({t.kind})
            </option>
          ))}
        </select>
        {target && <p class="muted">{target.description}{target.model ? ` — ${target.model}` : ""}</p>}
        <label for="start-task">Task</label>
        <textarea id="start-task" rows={4} value={task} onInput={(e) => setTask(e.currentTarget.value)} />
        {failure && <p role="alert" class="error">{failure}</p>}
        <button type="submit" disabled={busy || !target || !task.trim()}>
          Start
        </button>
      </form>
    </section>
  );
}
