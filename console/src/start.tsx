// Start a run: pick one of the served agents or teams, type the task.

import { useEffect, useState } from "preact/hooks";
import { getJson, postJson, type Target } from "./api";
import type { OnError } from "./app";

export function StartRun({ onError }: { onError: OnError }) {
  const [targets, setTargets] = useState<Target[] | null>(null);
  const [chosen, setChosen] = useState("");
  const [task, setTask] = useState("");
  const [failure, setFailure] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

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
            const started = await postJson<{ run_id: string }>("/v1/runs", body);
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
