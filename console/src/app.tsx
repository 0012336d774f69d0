// The console: a header with the views, the token form when the API asks for one, and the
// view the address's fragment names (`#/`, `#/runs/ID`, `#/approvals`, `#/costs`, `#/start`).

import { useEffect, useState } from "preact/hooks";
import { Unauthorized, setToken } from "./api";
import { Approvals } from "./approvals";
import { Costs } from "./costs";
import { RunPage } from "./run";
import { RunsList } from "./runs";
import { StartRun } from "./start";

type Route = { view: "runs" } | { view: "run"; id: string } | { view: "approvals" } | { view: "start" } | { view: "costs" };

function route(): Route {
  const hash = location.hash.replace(/^#/, "");
  const run = /^\/runs\/([^/]+)$/.exec(hash);
  if (run) return { view: "run", id: decodeURIComponent(run[1]) };
  if (hash === "/approvals") return { view: "approvals" };
  if (hash === "/start") return { view: "start" };
  if (hash === "/costs") return { view: "costs" };
  return { view: "runs" };
}

/** What a view calls with any error: a 401 asks for the token. */
export type OnError = (error: unknown) => void;

export function App() {
  const [current, setCurrent] = useState<Route>(route());
  const [needsToken, setNeedsToken] = useState<string | null>(null);
  const [generation, setGeneration] = useState(0);

  useEffect(() => {
    const onHash = () => setCurrent(route());
    addEventListener("hashchange", onHash);
    return () => removeEventListener("hashchange", onHash);
  }, []);

  const onError: OnError = (error) => {
    if (error instanceof Unauthorized) setNeedsToken(error.message);
  };

  const link = (href: string, label: string, active: boolean) => (
    <a href={href} aria-current={active ? "page" : undefined}>
      {label}
    </a>
  );

  return (
    <>
      <header>
        <span class="brand">troupe</span>
        <nav aria-label="Views">
          {link("#/", "Runs", current.view === "runs" || current.view === "run")}
          {link("#/approvals", "Approvals", current.view === "approvals")}
          {link("#/costs", "Costs", current.view === "costs")}
          {link("#/start", "Start a run", current.view === "start")}
        </nav>
      </header>
      <main>
        {needsToken !== null ? (
          <TokenForm
            why={needsToken}
            onToken={(value) => {
              setToken(value);
              setNeedsToken(null);
              setGeneration(generation + 1);
            }}
          />
        ) : current.view === "run" ? (
          <RunPage key={`${current.id}:${generation}`} id={current.id} onError={onError} />
        ) : current.view === "approvals" ? (
          <Approvals key={generation} onError={onError} />
        ) : current.view === "costs" ? (
          <Costs key={generation} onError={onError} />
        ) : current.view === "start" ? (
          <StartRun key={generation} onError={onError} />
        ) : (
          <RunsList key={generation} onError={onError} />
        )}
      </main>
    </>
  );
}

function TokenForm({ why, onToken }: { why: string; onToken: (token: string) => void }) {
  const [value, setValue] = useState("");
  return (
    <form
      class="token-form"
      aria-labelledby="token-title"
      onSubmit={(event) => {
        event.preventDefault();
        if (value.trim()) onToken(value.trim());
      }}
    >
      <h1 id="token-title">This server needs a token</h1>
      <p class="muted">{why}</p>
      <label for="token">Bearer token</label>
      <input id="token" name="token" type="password" autocomplete="off" value={value} onInput={(e) => setValue(e.currentTarget.value)} />
      <button type="submit">Open the console</button>
    </form>
  );
}
