// Every call waiting for a person, across the runs the server knows (a team's members'
// included: their calls wait in the team's run), each with its decision.

import { useEffect, useState } from "preact/hooks";
import { getJson, type RunView } from "./api";
import type { OnError } from "./app";
import { Asking, Decide } from "./decide";

export function Approvals({ onError }: { onError: OnError }) {
  const [runs, setRuns] = useState<RunView[] | null>(null);

  useEffect(() => {
    let stopped = false;
    let timer: number | undefined;
    const load = async () => {
      try {
        const body = await getJson<{ runs: RunView[] }>("/v1/runs");
        if (!stopped) setRuns(body.runs.filter((run) => run.phase === "waiting"));
      } catch (error) {
        if (!stopped) onError(error);
      }
      if (!stopped) timer = window.setTimeout(load, 2000);
    };
    load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);

  const waiting = (runs ?? []).flatMap((run) => run.pending.filter((p) => p.call_id).map((reason) => ({ run, reason })));
  return (
    <section aria-labelledby="approvals-title">
      <h1 id="approvals-title">Approvals</h1>
      {runs === null && <p class="muted">Loading…</p>}
      {runs !== null && waiting.length === 0 && <p class="muted">Nothing waits for a decision.</p>}
      <ul class="approvals">
        {waiting.map(({ run, reason }) => (
          <li key={`${run.run_id}:${reason.call_id}`} class="approval">
            <p>
              Run <a href={`#/runs/${encodeURIComponent(run.run_id)}`}>{run.run_id}</a> of {run.target}
            </p>
            <Asking reason={reason} />
            <Decide runId={run.run_id} target={run.target} reason={reason} onError={onError} />
          </li>
        ))}
      </ul>
    </section>
  );
}
