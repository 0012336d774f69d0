// Costs: what the ended runs the server knows cost, by agent or team, by model and by day, as bars
// (SVG, each with its figure in words) and as a table.

import { useEffect, useState } from "preact/hooks";
import { getJson, totalTokens, type RunView } from "./api";
import type { OnError } from "./app";
import { money } from "./format";

interface Total {
  name: string;
  runs: number;
  tokens: number;
  cost: number;
}

function totals(runs: RunView[], key: (run: RunView) => string): Total[] {
  const by = new Map<string, Total>();
  for (const run of runs) {
    if (!run.end) continue;
    const name = key(run);
    const total = by.get(name) ?? { name, runs: 0, tokens: 0, cost: 0 };
    total.runs += 1;
    total.tokens += totalTokens(run.end.usage);
    total.cost += run.end.cost_usd;
    by.set(name, total);
  }
  return [...by.values()];
}

function day(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export function Costs({ onError }: { onError: OnError }) {
  const [runs, setRuns] = useState<RunView[] | null>(null);
  useEffect(() => {
    getJson<{ runs: RunView[] }>("/v1/runs")
      .then((body) => setRuns(body.runs))
      .catch(onError);
  }, []);
  if (runs === null) return <p class="muted">Loading…</p>;
  const byTarget = totals(runs, (r) => r.target).sort((a, b) => b.cost - a.cost || b.tokens - a.tokens);
  const byModel = totals(runs, (r) => r.model ?? "(unknown)").sort((a, b) => b.cost - a.cost || b.tokens - a.tokens);
  const byDay = totals(runs, (r) => day(r.started_ms)).sort((a, b) => a.name.localeCompare(b.name));
  const all = byTarget.reduce((sum, t) => ({ ...sum, runs: sum.runs + t.runs, tokens: sum.tokens + t.tokens, cost: sum.cost + t.cost }), {
    name: "all",
    runs: 0,
    tokens: 0,
    cost: 0,
  });
  return (
    <section aria-labelledby="costs-title">
      <h1 id="costs-title">Costs</h1>
      <p>
        {all.runs} ended {all.runs === 1 ? "run" : "runs"}: {money(all.cost)}, {all.tokens} tokens.
      </p>
      <h2 id="by-target">By agent or team</h2>
      <Bars labelledBy="by-target" totals={byTarget} />
      <h2 id="by-model">By model</h2>
      <Bars labelledBy="by-model" totals={byModel} />
      <h2 id="by-day">By day</h2>
      <Bars labelledBy="by-day" totals={byDay} />
      <div class="table-wrap">
        <table class="runs costs">
          <caption class="muted">By agent or team</caption>
          <thead>
            <tr>
              <th scope="col">Agent or team</th>
              <th scope="col">Runs</th>
              <th scope="col">Tokens</th>
              <th scope="col">Cost</th>
            </tr>
          </thead>
          <tbody>
            {byTarget.map((t) => (
              <tr key={t.name} data-target={t.name}>
                <td>{t.name}</td>
                <td>{t.runs}</td>
                <td>{t.tokens}</td>
                <td>{money(t.cost)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

/** Horizontal bars of cost (tokens when nothing has a price), one per total. */
function Bars({ totals, labelledBy }: { totals: Total[]; labelledBy: string }) {
  if (!totals.length) return <p class="muted">Nothing ended yet.</p>;
  const priced = totals.some((t) => t.cost > 0);
  const value = (t: Total) => (priced ? t.cost : t.tokens);
  const most = Math.max(...totals.map(value), 1e-9);
  const row = 26;
  return (
    <svg class="bars" role="img" aria-labelledby={labelledBy} viewBox={`0 0 600 ${totals.length * row}`} width="100%" height={totals.length * row}>
      {totals.map((t, i) => (
        <g key={t.name} transform={`translate(0 ${i * row})`}>
          <title>{`${t.name}: ${money(t.cost)}, ${t.tokens} tokens, ${t.runs} runs`}</title>
          <text x="0" y="17" class="bar-label">
            {t.name}
          </text>
          <rect x="160" y="4" height="18" width={Math.max(1, (value(t) / most) * 330)} class="bar" />
          <text x={170 + (value(t) / most) * 330} y="17" class="bar-value">
            {priced ? money(t.cost) : `${t.tokens} tokens`}
          </text>
        </g>
      ))}
    </svg>
  );
}
