// The runs list: the runs the server holds and the newest page of its store, newest first,
// asked again at once when the server announces a change to its runs
// (`/v1/runs/changes`: the runs it holds, and within a second or two those of other
// processes sharing its store), and every ten seconds all the same (every two without the
// announcements); older pages on request. A status or a search is asked of the
// server, which looks through the whole store: a run id (its first characters), or part of
// an agent's or team's name or of a model, in either case.

import { useEffect, useState } from "preact/hooks";
import { getJson, readEvents, totalTokens, type RunView } from "./api";
import type { OnError } from "./app";
import { duration, money, status, when } from "./format";

const REFRESH_MS = 2000;
/** How often the list is asked for while the server announces its changes. */
const REFRESH_FOLLOWING_MS = 10000;
const SEARCH_DELAY_MS = 250;
/** How long the list waits for the server's first announcement before it reads anyway. */
const FIRST_ANNOUNCEMENT_MS = 500;

/** The query of `/v1/runs` for a status and a search (empty: every run). */
export function listQuery(filter: string, search: string): string {
  const params = new URLSearchParams();
  if (filter !== "all") params.set("status", filter);
  const needle = search.trim();
  if (needle) params.set("q", needle);
  const query = params.toString();
  return query ? `&${query}` : "";
}

export function RunsList({ onError }: { onError: OnError }) {
  const [runs, setRuns] = useState<RunView[] | null>(null);
  const [older, setOlder] = useState<RunView[]>([]);
  // The store's next page: unknown before the first answer, null after the last page.
  const [next, setNext] = useState<number | null | undefined>(undefined);
  const [loadingOlder, setLoadingOlder] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);
  // Whether the server's announcements of changes come: the list follows them live.
  const [live, setLive] = useState(false);
  const [filter, setFilter] = useState("all");
  const [search, setSearch] = useState("");
  // The search as asked of the server: it follows the box once typing pauses.
  const [asked, setAsked] = useState("");

  useEffect(() => {
    const timer = window.setTimeout(() => setAsked(search), SEARCH_DELAY_MS);
    return () => clearTimeout(timer);
  }, [search]);

  const query = listQuery(filter, asked);

  useEffect(() => {
    let stopped = false;
    let timer: number | undefined;
    let following = false;
    let loading = false;
    let again = false;
    const announcements = new AbortController();
    setRuns(null);
    setOlder([]);
    setNext(undefined);
    const load = async () => {
      // An announcement while a load is under way asks for one more after it.
      if (loading) {
        again = true;
        return;
      }
      loading = true;
      clearTimeout(timer);
      try {
        const body = await getJson<{ runs: RunView[]; next_offset: number | null }>(`/v1/runs?offset=0${query}`);
        if (stopped) return;
        setRuns([...body.runs].sort((a, b) => b.started_ms - a.started_ms));
        setNext((current) => (current === undefined ? body.next_offset : current));
        setFailure(null);
      } catch (error) {
        if (stopped) return;
        onError(error);
        setFailure(String(error instanceof Error ? error.message : error));
      } finally {
        loading = false;
      }
      if (stopped) return;
      if (again) {
        again = false;
        load();
        return;
      }
      timer = window.setTimeout(load, following ? REFRESH_FOLLOWING_MS : REFRESH_MS);
    };
    // The server's announcements: each asks for the list again; once they stop (a server
    // without them, a dropped connection), the list is polled as often as before, and
    // they are asked for again a little later. The first comes as soon as the server has
    // taken the subscription, so the list is first read then: no change can fall between
    // the read and the subscription, and the list is read once. Without an announcement
    // soon (a server without them, a proxy that holds the stream back), it is read anyway.
    let announced = false;
    const unannounced = window.setTimeout(() => {
      if (!announced) load();
    }, FIRST_ANNOUNCEMENT_MS);
    const follow = async () => {
      while (!stopped) {
        try {
          await readEvents("/v1/runs/changes", null, () => {
            following = true;
            setLive(true);
            if (!announced) {
              announced = true;
              clearTimeout(unannounced);
            }
            load();
          }, announcements.signal);
        } catch {
          // Polled meanwhile.
        }
        following = false;
        if (!stopped) setLive(false);
        if (!announced && !stopped) {
          // Refused at once: read the list now, not at the timer.
          announced = true;
          clearTimeout(unannounced);
          load();
        }
        if (!stopped) await new Promise((resolve) => setTimeout(resolve, REFRESH_FOLLOWING_MS));
      }
    };
    follow();
    return () => {
      stopped = true;
      announcements.abort();
      clearTimeout(timer);
      clearTimeout(unannounced);
    };
  }, [query]);

  const loadOlder = async () => {
    if (next === null || next === undefined) return;
    setLoadingOlder(true);
    try {
      const body = await getJson<{ runs: RunView[]; next_offset: number | null }>(`/v1/runs?offset=${next}${query}`);
      setOlder((before) => [...before, ...body.runs]);
      setNext(body.next_offset);
    } catch (error) {
      onError(error);
    }
    setLoadingOlder(false);
  };

  const first = new Set((runs ?? []).map((run) => run.run_id));
  const shown = [...(runs ?? []), ...older.filter((run) => !first.has(run.run_id))];

  return (
    <section aria-labelledby="runs-title" data-loaded={runs !== null ? "" : undefined} data-live={live ? "" : undefined}>
      <h1 id="runs-title">
        Runs{live && <span class="live" title="The server announces each change to its runs">{" · live"}</span>}
      </h1>
      <div class="filters">
        <label>
          Status{" "}
          <select value={filter} onChange={(e) => setFilter(e.currentTarget.value)}>
            <option value="all">all</option>
            <option value="running">running</option>
            <option value="paused">waiting</option>
            <option value="completed">completed</option>
            <option value="failed">failed</option>
            <option value="cancelled">cancelled</option>
            <option value="budget_exceeded">budget exceeded</option>
          </select>
        </label>
        <label>
          Search{" "}
          <input type="search" placeholder="run id, or part of a name or model" value={search} onInput={(e) => setSearch(e.currentTarget.value)} />
        </label>
      </div>
      {failure && <p role="alert" class="error">{failure}</p>}
      {runs === null && !failure && <p class="muted">Loading…</p>}
      {runs !== null && shown.length === 0 && <p class="muted">No runs{query ? " match" : " yet"}.</p>}
      {shown.length > 0 && (
        <div class="table-wrap">
          <table class="runs">
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Agent or team</th>
                <th scope="col">Status</th>
                <th scope="col">Model</th>
                <th scope="col">Cost</th>
                <th scope="col">Tokens</th>
                <th scope="col">Events</th>
                <th scope="col">Started</th>
                <th scope="col">Duration</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((run) => (
                <tr key={run.run_id} data-run={run.run_id}>
                  <td>
                    <a href={`#/runs/${encodeURIComponent(run.run_id)}`}>{run.run_id}</a>
                  </td>
                  <td>{run.target}</td>
                  <td>
                    <span class={`status status-${status(run.phase, run.end?.outcome)}`}>{status(run.phase, run.end?.outcome)}</span>
                  </td>
                  <td>{run.model ?? "—"}</td>
                  <td>{run.end ? money(run.end.cost_usd) : "—"}</td>
                  <td>{run.end ? totalTokens(run.end.usage) : "—"}</td>
                  <td>{run.events}</td>
                  <td>{when(run.started_ms)}</td>
                  <td>{run.ended_ms !== undefined && run.started_ms ? duration(Math.max(0, run.ended_ms - run.started_ms)) : "—"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {runs !== null && next !== null && next !== undefined && (
        <button type="button" class="older" disabled={loadingOlder} onClick={loadOlder}>
          {loadingOlder ? "Loading…" : "Show older runs"}
        </button>
      )}
    </section>
  );
}
