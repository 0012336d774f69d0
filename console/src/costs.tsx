// Costs: what the runs of the last 30 days cost, over the whole store (the server sums them:
// `/v1/costs`), by agent, by team, by model and by day, as bars (SVG, each with its figure in
// words) and as a table.

import { useEffect, useState } from "preact/hooks";
import { getJson } from "./api";
import type { OnError } from "./app";
import { money } from "./format";

interface Total {
  name: string;
  runs: number;
  tokens: number;
  cost_usd: number;
}

/** `GET /v1/costs`. */
interface CostsView {
  since_ms: number;
  total: Total;
  by_agent: Total[];
  by_team: Total[];
  by_model: Total[];
  by_day: Total[];
}

export function Costs({ onError }: { onError: OnError }) {
  const [costs, setCosts] = useState<CostsView | null>(null);
  useEffect(() => {
    getJson<CostsView>("/v1/costs?days=30")
      .then(setCosts)
      .catch(onError);
  }, []);
  if (costs === null) return <p class="muted">Loading…</p>;
  const all = costs.total;
  return (
    <section aria-labelledby="costs-title" data-loaded="">
      <h1 id="costs-title">Costs</h1>
      <p class="costs-total">
        The last 30 days: {all.runs} agent {all.runs === 1 ? "run" : "runs"}, {money(all.cost_usd)}, {all.tokens} tokens.
      </p>
      <h2 id="by-target">By agent</h2>
      <Bars labelledBy="by-target" totals={costs.by_agent} />
      {costs.by_team.length > 0 && (
        <>
          <h2 id="by-team">By team</h2>
          <Bars labelledBy="by-team" totals={costs.by_team} />
        </>
      )}
      <h2 id="by-model">By model</h2>
      <Bars labelledBy="by-model" totals={costs.by_model} />
      <h2 id="by-day">By day</h2>
      <Bars labelledBy="by-day" totals={costs.by_day} />
      <div class="table-wrap">
        <table class="runs costs">
          <caption class="muted">By agent and by team</caption>
          <thead>
            <tr>
              <th scope="col">Agent or team</th>
              <th scope="col">Runs</th>
              <th scope="col">Tokens</th>
              <th scope="col">Cost</th>
            </tr>
          </thead>
          <tbody>
            {[...costs.by_agent, ...costs.by_team].map((t) => (
              <tr key={t.name} data-target={t.name}>
                <td>{t.name}</td>
                <td>{t.runs}</td>
                <td>{t.tokens}</td>
                <td>{money(t.cost_usd)}</td>
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
  const priced = totals.some((t) => t.cost_usd > 0);
  const value = (t: Total) => (priced ? t.cost_usd : t.tokens);
  const most = Math.max(...totals.map(value), 1e-9);
  const row = 26;
  return (
    <svg class="bars" role="img" aria-labelledby={labelledBy} viewBox={`0 0 600 ${totals.length * row}`} width="100%" height={totals.length * row}>
      {totals.map((t, i) => (
        <g key={t.name} transform={`translate(0 ${i * row})`}>
          <title>{`${t.name}: ${money(t.cost_usd)}, ${t.tokens} tokens, ${t.runs} runs`}</title>
          <text x="0" y="17" class="bar-label">
            {t.name}
          </text>
          <rect x="160" y="4" height="18" width={Math.max(1, (value(t) / most) * 330)} class="bar" />
          <text x={170 + (value(t) / most) * 330} y="17" class="bar-value">
            {priced ? money(t.cost_usd) : `${t.tokens} tokens`}
          </text>
        </g>
      ))}
    </svg>
  );
}
