// One run: its live timeline (read from the run's event stream, replayed from the start
// and followed), the calls it waits for with their decisions, its members when it is a
// team's, and its final answer.

import { useEffect, useRef, useState } from "preact/hooks";
import { ApiFailure, Unauthorized, getJson, readEvents, totalTokens, type EvidenceReport, type RunView } from "./api";
import type { OnError } from "./app";
import { Asking, Decide } from "./decide";
import { duration, money, status, when } from "./format";
import { emptyTimeline, entryRun, fold, pretty, type Entry, type Timeline, type TreeNode } from "./timeline";
import { TypedAnswer, typedAnswer } from "./typed";

const RETRY_MS = 1000;

export function RunPage({ id, onError }: { id: string; onError: OnError }) {
  const [view, setView] = useState<RunView | null>(null);
  const [timeline, setTimeline] = useState<Timeline>(emptyTimeline());
  const [note, setNote] = useState<string | null>(null);
  const [live, setLive] = useState(false);
  const [focus, setFocus] = useState<string | null>(null);
  const refreshView = useRef<() => void>(() => {});

  useEffect(() => {
    const controller = new AbortController();
    const signal = controller.signal;
    let working = emptyTimeline();
    let lastId: number | null = null;
    let frame = 0;
    const paint = () => {
      if (frame) return;
      frame = requestAnimationFrame(() => {
        frame = 0;
        setTimeline({ ...working, entries: [...working.entries], tree: [...working.tree] });
      });
    };
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    const loadView = async (): Promise<RunView | null> => {
      try {
        const fresh = await getJson<RunView>(`/v1/runs/${encodeURIComponent(id)}`, signal);
        setView(fresh);
        return fresh;
      } catch (error) {
        if (error instanceof Unauthorized) onError(error);
        throw error;
      }
    };
    refreshView.current = () => void loadView().catch(() => {});

    const follow = async () => {
      let replay = false;
      while (!signal.aborted) {
        try {
          await loadView();
        } catch (error) {
          if (error instanceof Unauthorized || signal.aborted) return;
          if (error instanceof ApiFailure && error.status === 404) {
            setNote(error.message);
            return;
          }
          setLive(false);
          setNote("The server does not answer; trying again…");
          replay = true;
          await sleep(RETRY_MS);
          continue;
        }
        if (replay) {
          // Another server (or the same, restarted) holds the run now: its positions
          // start again, so the timeline is read again from the start.
          working = emptyTimeline();
          lastId = null;
          replay = false;
        }
        setNote(null);
        try {
          setLive(true);
          await readEvents(
            `/v1/runs/${encodeURIComponent(id)}/events`,
            lastId,
            (event) => {
              fold(working, event.data, event.position);
              lastId = event.position;
              if (event.type === "run_paused" || event.type === "tool_call_result" || event.type === "run_finished") {
                refreshView.current();
              }
              paint();
            },
            signal,
          );
          setLive(false);
          const after = await loadView().catch(() => null);
          if (after?.phase === "ended") return;
          replay = true;
        } catch (error) {
          setLive(false);
          if (signal.aborted) return;
          if (error instanceof Unauthorized) return onError(error);
          if (error instanceof ApiFailure && error.code === "run_elsewhere") {
            // Another process holds it: its state is polled from the store.
            setNote(error.message);
            await sleep(2000);
            continue;
          }
          replay = true;
          await sleep(RETRY_MS);
        }
      }
    };
    follow();
    return () => {
      controller.abort();
      cancelAnimationFrame(frame);
    };
  }, [id]);

  const [evidence, setEvidence] = useState<EvidenceReport | string | null>(null);
  const phase = view?.phase;
  useEffect(() => {
    if (!phase) return;
    getJson<EvidenceReport>(`/v1/runs/${encodeURIComponent(id)}/evidence`)
      .then(setEvidence)
      .catch((error) => {
        onError(error);
        // A server that records nothing has no evidence to show.
        setEvidence(error instanceof ApiFailure && error.code === "not_recorded" ? null : String(error?.message ?? error));
      });
  }, [id, phase]);

  const ended = view?.end;
  const started = timeline.entries.find((e) => e.kind === "start");
  const lastAt = timeline.entries.length ? timeline.entries[timeline.entries.length - 1].at : 0;
  const shown = focus ? timeline.entries.filter((e) => entryRun(e) === focus) : timeline.entries;
  return (
    <section aria-labelledby="run-title" class="run">
      <p>
        <a href="#/">← Runs</a>
      </p>
      <h1 id="run-title">
        Run <code>{id}</code>
      </h1>
      {note && <p role="status" class="note">{note}</p>}
      {view && (
        <dl class="facts">
          <div><dt>Agent or team</dt><dd>{view.target}</dd></div>
          <div><dt>Status</dt><dd aria-live="polite"><span class={`status status-${status(view.phase, ended?.outcome)}`} data-testid="run-status">{status(view.phase, ended?.outcome)}</span>{live && <span class="live"> · live</span>}</dd></div>
          {(view.model || (started?.kind === "start" && started.model)) && <div><dt>Model</dt><dd>{view.model || (started?.kind === "start" ? started.model : "")}</dd></div>}
          <div><dt>Started</dt><dd>{when(view.started_ms)}</dd></div>
          {(view.ended_ms ?? lastAt) > view.started_ms && <div><dt>Duration</dt><dd>{duration((view.ended_ms ?? lastAt) - view.started_ms)}</dd></div>}
          <div><dt>Cost</dt><dd>{money(ended ? ended.cost_usd : timeline.cost)}</dd></div>
          <div><dt>Tokens</dt><dd>{ended ? totalTokens(ended.usage) : timeline.tokens}</dd></div>
        </dl>
      )}
      {view && view.pending.length > 0 && (
        <section aria-labelledby="waiting-title" class="waiting">
          <h2 id="waiting-title">Waiting for you</h2>
          {view.pending.map((reason) => (
            <div key={reason.call_id ?? reason.prompt} class="approval">
              <Asking reason={reason} />
              {reason.call_id && <Decide runId={view.run_id} target={view.target} reason={reason} onError={onError} onDecided={() => refreshView.current()} />}
            </div>
          ))}
        </section>
      )}
      {ended && (
        <section aria-labelledby="answer-title" class="answer">
          <h2 id="answer-title">{ended.outcome === "completed" ? "Answer" : `Ended: ${ended.outcome}`}</h2>
          {ended.output &&
            (typedAnswer(ended.output) ? (
              <TypedAnswer value={typedAnswer(ended.output)!} json={pretty(ended.output)} schema={view?.output_schema} />
            ) : (
              <pre class="output" data-testid="answer">{pretty(ended.output)}</pre>
            ))}
          {ended.error && <p class="error">{ended.error}</p>}
        </section>
      )}
      {evidence !== null && <Evidence report={evidence} />}
      {timeline.tree.length > 1 && <Tree nodes={timeline.tree} focus={focus} onFocus={setFocus} />}
      {timeline.withheld.length > 0 && (
        <section aria-labelledby="withheld-title" class="withheld">
          <h2 id="withheld-title">Withheld by the firewall</h2>
          <ul>
            {timeline.withheld.map((w) => (
              <li key={`${w.from}:${w.to}:${w.what}`}>
                the {w.what} of <strong>{w.from}</strong> to <strong>{w.to}</strong> ({w.reason})
              </li>
            ))}
          </ul>
        </section>
      )}
      <section aria-labelledby="timeline-title">
        <h2 id="timeline-title">Timeline{focus ? ` of ${focus}` : ""}</h2>
        <ol class="timeline">
          {shown.map((entry) => (
            <li key={entry.key} class={`entry entry-${entry.kind}`}>
              <EntryView entry={entry} />
            </li>
          ))}
        </ol>
      </section>
    </section>
  );
}

function Evidence({ report }: { report: EvidenceReport | string }) {
  if (typeof report === "string") {
    return (
      <section aria-labelledby="evidence-title" class="evidence">
        <h2 id="evidence-title">Evidence</h2>
        <p class="muted">Not checked: {report}</p>
      </section>
    );
  }
  const entries = report.runs.reduce((sum, run) => sum + run.entries, 0);
  const broken = report.runs.filter((run) => run.problem);
  return (
    <section aria-labelledby="evidence-title" class="evidence" data-verified={String(report.verified)}>
      <h2 id="evidence-title">Evidence</h2>
      {report.verified ? (
        <p class="ok">
          Verified: {entries} entries over {report.runs.length} {report.runs.length === 1 ? "run" : "runs"}, every hash chain intact.
        </p>
      ) : (
        <>
          <p class="error">Does not verify: changed or cut after it was written.</p>
          <ul>
            {broken.map((run) => (
              <li key={run.run_id}>
                <strong>{run.agent}</strong> <code>{run.run_id}</code>: {run.problem}
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}

function Tree({ nodes, focus, onFocus }: { nodes: TreeNode[]; focus: string | null; onFocus: (run: string | null) => void }) {
  const render = (node: TreeNode) => (
    <li key={node.runId}>
      <button type="button" aria-pressed={focus === node.runId} onClick={() => onFocus(focus === node.runId ? null : node.runId)}>
        {node.agent}
      </button>{" "}
      <code>{node.runId}</code> <span class="muted">{node.outcome ?? "going"}</span>
      {nodes.some((n) => n.parent === node.runId) && <ul>{nodes.filter((n) => n.parent === node.runId).map(render)}</ul>}
    </li>
  );
  return (
    <section aria-labelledby="tree-title" class="tree">
      <h2 id="tree-title">Delegation tree</h2>
      <ul>{nodes.filter((n) => n.parent === null || !nodes.some((m) => m.runId === n.parent)).map(render)}</ul>
    </section>
  );
}

function EntryView({ entry }: { entry: Entry }) {
  const who = <span class="who">{entry.agent}</span>;
  switch (entry.kind) {
    case "start":
      return (
        <details>
          <summary>{who} started{entry.model ? ` on ${entry.model}` : ""}</summary>
          <pre>{entry.instruction}</pre>
        </details>
      );
    case "message":
      return (
        <details open>
          <summary>
            {who} {entry.role === "assistant" ? "says" : entry.role}
            {!entry.done && <span class="muted"> (writing…)</span>}
          </summary>
          {entry.reasoning && (
            <details class="reasoning">
              <summary>Reasoning</summary>
              <pre>{entry.reasoning}</pre>
            </details>
          )}
          <pre class="text">{entry.text}</pre>
        </details>
      );
    case "tool":
      return (
        <details>
          <summary>
            {who} calls <strong>{entry.tool}</strong> <code>{entry.callId}</code>{" "}
            {entry.result === null ? <span class="muted">waiting</span> : entry.isError ? <span class="error">failed</span> : <span>done</span>}
          </summary>
          <h3>Arguments</h3>
          <pre class="args">{pretty(entry.args)}</pre>
          {entry.result !== null && (
            <>
              <h3>Result</h3>
              <pre class="result" data-call={entry.callId}>{entry.result}</pre>
            </>
          )}
        </details>
      );
    case "paused":
      return (
        <details>
          <summary>{who} waits for a person{entry.reason.tool ? `: ${entry.reason.tool}` : ""}</summary>
          <Asking reason={entry.reason} />
        </details>
      );
    case "finished":
      return (
        <details>
          <summary>
            {who} finished: {entry.outcome} · {money(entry.cost)} · {totalTokens(entry.usage)} tokens
          </summary>
          {entry.output && <pre>{pretty(entry.output)}</pre>}
        </details>
      );
    case "withheld":
      return (
        <p class="withheld-entry">
          firewall withheld the {entry.withheld.what} of {entry.withheld.from} to {entry.withheld.to} ({entry.withheld.reason})
        </p>
      );
    case "note":
      return (
        <details>
          <summary>
            {who} {entry.title}
          </summary>
          <pre>{entry.detail}</pre>
        </details>
      );
  }
}
