// The console's one way to the server: the native API with `Authorization: Bearer`, the
// token kept in sessionStorage (given once by the `#token=…` fragment troupe serve prints,
// or typed into the token form when the API answers 401).

const TOKEN_KEY = "troupe.token";

/** The API answered 401: the console needs a (new) token. */
export class Unauthorized extends Error {
  constructor(message: string) {
    super(message);
    this.name = "Unauthorized";
  }
}

/** The API answered with one of its JSON errors. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ApiFailure";
  }
}

/** Takes a `#token=…` fragment into sessionStorage and out of the address bar. */
export function adoptFragmentToken(): void {
  const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (!match) return;
  setToken(decodeURIComponent(match[1]));
  history.replaceState(null, "", location.pathname + location.search + "#/");
}

export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value: string | null): void {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(extra?: Record<string, string>): Record<string, string> {
  const all: Record<string, string> = { ...(extra ?? {}) };
  const t = token();
  if (t) all["Authorization"] = `Bearer ${t}`;
  return all;
}

async function failure(response: Response): Promise<Error> {
  let code = "http_error";
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body?.error) {
      code = String(body.error.code ?? body.error.type ?? code);
      message = String(body.error.message ?? message);
    }
  } catch {
    // not JSON: the status says it
  }
  if (response.status === 401) return new Unauthorized(message);
  return new ApiFailure(response.status, code, message);
}

/** `GET path` as JSON. */
export async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  const response = await fetch(path, { headers: headers({ Accept: "application/json" }), signal });
  if (!response.ok) throw await failure(response);
  return (await response.json()) as T;
}

/** `POST path` with a JSON body (and `extra` headers), answered with JSON. */
export async function postJson<T>(path: string, body: unknown, extra?: Record<string, string>): Promise<T> {
  const response = await fetch(path, {
    method: "POST",
    headers: headers({ ...(extra ?? {}), "Content-Type": "application/json", Accept: "application/json" }),
    body: JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  return (await response.json()) as T;
}

/** One Server-Sent Event of a run's stream. */
export interface StreamedEvent {
  position: number;
  type: string;
  data: AgentEvent;
}

/**
 * Reads `path` as Server-Sent Events with fetch (EventSource cannot send the token),
 * calling `onEvent` for each, from after `lastId` (none: from the start). Resolves when the
 * server ends the stream; rejects when it cannot be read.
 */
export async function readEvents(
  path: string,
  lastId: number | null,
  onEvent: (event: StreamedEvent) => void,
  signal: AbortSignal,
): Promise<void> {
  const extra: Record<string, string> = { Accept: "text/event-stream" };
  if (lastId !== null) extra["Last-Event-ID"] = String(lastId);
  const response = await fetch(path, { headers: headers(extra), signal });
  if (!response.ok) throw await failure(response);
  if (!response.body) throw new Error("the stream has no body");
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end: number;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      const frame = parseFrame(block);
      if (frame) onEvent(frame);
    }
  }
}

function parseFrame(block: string): StreamedEvent | null {
  let id: number | null = null;
  let type = "message";
  const data: string[] = [];
  for (const line of block.split(/\r?\n/)) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "id") id = Number(value);
    else if (field === "event") type = value;
    else if (field === "data") data.push(value);
  }
  if (id === null || data.length === 0) return null;
  try {
    return { position: id, type, data: JSON.parse(data.join("\n")) as AgentEvent };
  } catch {
    return null;
  }
}

/** Tokens, as the server counts them. */
export interface Usage {
  input_tokens?: number;
  output_tokens?: number;
  [key: string]: unknown;
}

/** Why a run waits. */
export interface PauseReason {
  type: "approval" | "input" | "uncertain_action";
  call_id?: string;
  tool?: string;
  arguments?: unknown;
  reason?: string;
  prompt?: string;
}

/** How a run ended. */
export interface RunEnd {
  outcome: string;
  output?: string;
  error?: string;
  usage: Usage;
  cost_usd: number;
}

/** `GET /v1/runs/{id}`. */
export interface RunView {
  run_id: string;
  target: string;
  phase: "running" | "waiting" | "ended";
  started_ms: number;
  ended_ms?: number;
  model?: string;
  events: number;
  pending: PauseReason[];
  end?: RunEnd;
  /** The JSON schema its answer must match, when it was given one. */
  output_schema?: unknown;
}

/** One of `/v1/agents`. */
export interface Target {
  name: string;
  description: string;
  kind: "agent" | "team";
  model?: string;
  tools: string[];
  /** Each tool's arguments' JSON schema, by tool, where the server knows it. */
  inputs?: Record<string, unknown>;
}

let targets: Promise<Target[]> | null = null;

/** The schema of `tool`'s arguments in `target`'s runs, when the server knows it (the
 * targets are asked once a page; a failure is asked again next time). */
export async function toolInput(target: string, tool: string): Promise<unknown> {
  targets ??= getJson<{ agents: Target[] }>("/v1/agents").then((body) => body.agents);
  try {
    return (await targets).find((t) => t.name === target)?.inputs?.[tool] ?? null;
  } catch {
    targets = null;
    return null;
  }
}

/** An event of a run (attribution and kind flattened together). */
export interface AgentEvent {
  type: string;
  agent_id: string;
  run_id: string;
  parent_run_id?: string;
  seq: number;
  timestamp_ms: number;
  [field: string]: unknown;
}

/** Sends `signal` to run `runId`. */
export function sendSignal(runId: string, signal: unknown): Promise<unknown> {
  return postJson(`/v1/runs/${encodeURIComponent(runId)}/signals`, signal);
}

/** The total of a usage's tokens. */
export function totalTokens(usage: Usage | undefined): number {
  if (!usage) return 0;
  return (usage.input_tokens ?? 0) + (usage.output_tokens ?? 0);
}

/** `GET /v1/runs/{id}/evidence`: each run's log of the tree, verified. */
export interface EvidenceReport {
  run_id: string;
  verified: boolean;
  runs: { run_id: string; agent: string; parent_run_id?: string; entries: number; problem?: string }[];
}
