// A run's events folded into the entries its timeline shows: each model message with its
// streamed text and reasoning, each tool call with its arguments and result, each pause,
// retry, fallback and the end. Pure: the same events give the same entries.

import type { AgentEvent, PauseReason, Usage } from "./api";

export type Entry =
  | { kind: "start"; key: string; agent: string; runId: string; instruction: string; model: string; at: number }
  | { kind: "message"; key: string; agent: string; role: string; text: string; reasoning: string; done: boolean; at: number }
  | {
      kind: "tool";
      key: string;
      agent: string;
      callId: string;
      tool: string;
      args: string;
      result: string | null;
      isError: boolean;
      at: number;
    }
  | { kind: "paused"; key: string; agent: string; reason: PauseReason; at: number }
  | { kind: "finished"; key: string; agent: string; runId: string; outcome: string; output: string | null; usage: Usage; cost: number; at: number }
  | { kind: "note"; key: string; agent: string; title: string; detail: string; at: number }
  | { kind: "withheld"; key: string; agent: string; withheld: Withheld; at: number };

/** A run of the tree: the top run, or a member's. */
export interface TreeNode {
  runId: string;
  agent: string;
  parent: string | null;
  outcome: string | null;
}

/** A message the team's firewall withheld from its recipient. */
export interface Withheld {
  from: string;
  to: string;
  what: string;
  reason: string;
}

export interface Timeline {
  entries: Entry[];
  tree: TreeNode[];
  /** What the team's firewall withheld. */
  withheld: Withheld[];
  /** The tokens and cost of every model call so far. */
  tokens: number;
  cost: number;
}

export function emptyTimeline(): Timeline {
  return { entries: [], tree: [], withheld: [], tokens: 0, cost: 0 };
}

/** The run (top or member) an entry belongs to. */
export function entryRun(entry: Entry): string {
  return (entry as { run?: string }).run ?? "";
}

/** Folds `event` into `timeline` (mutating it; the caller copies for rendering). */
export function fold(timeline: Timeline, event: AgentEvent, position: number): void {
  const before = timeline.entries.length;
  foldKind(timeline, event, position);
  for (let i = before; i < timeline.entries.length; i++) (timeline.entries[i] as { run?: string }).run = event.run_id;
}

function foldKind(timeline: Timeline, event: AgentEvent, position: number): void {
  const at = event.timestamp_ms;
  const agent = event.agent_id;
  const entries = timeline.entries;
  const key = `${position}`;
  const str = (name: string) => (typeof event[name] === "string" ? (event[name] as string) : "");
  switch (event.type) {
    case "run_started":
      entries.push({ kind: "start", key, agent, runId: event.run_id, instruction: str("instruction"), model: str("model"), at });
      if (!timeline.tree.some((n) => n.runId === event.run_id)) {
        timeline.tree.push({ runId: event.run_id, agent, parent: event.parent_run_id ?? null, outcome: null });
      }
      return;
    case "message_start":
      entries.push({ kind: "message", key: `m:${event.run_id}:${str("message_id")}`, agent, role: str("role"), text: "", reasoning: "", done: false, at });
      return;
    case "message_delta":
    case "reasoning_delta": {
      const message = findMessage(entries, `m:${event.run_id}:${str("message_id")}`);
      if (!message) return;
      if (event.type === "message_delta") message.text += str("delta");
      else message.reasoning += str("delta");
      return;
    }
    case "message_end": {
      const message = findMessage(entries, `m:${event.run_id}:${str("message_id")}`);
      if (message) message.done = true;
      return;
    }
    case "tool_call_start":
      entries.push({ kind: "tool", key: `t:${event.run_id}:${str("call_id")}`, agent, callId: str("call_id"), tool: str("tool"), args: "", result: null, isError: false, at });
      return;
    case "tool_call_args": {
      const call = findCall(entries, `t:${event.run_id}:${str("call_id")}`);
      if (call) call.args += str("delta");
      return;
    }
    case "tool_call_end":
      return;
    case "tool_call_result": {
      const call = findCall(entries, `t:${event.run_id}:${str("call_id")}`);
      if (call) {
        call.result = str("content");
        call.isError = event.is_error === true;
      } else {
        entries.push({ kind: "tool", key: `t:${event.run_id}:${str("call_id")}`, agent, callId: str("call_id"), tool: "", args: "", result: str("content"), isError: event.is_error === true, at });
      }
      return;
    }
    case "run_paused":
      entries.push({ kind: "paused", key, agent, reason: event.reason as PauseReason, at });
      return;
    case "run_finished": {
      const usage = (event.usage as Usage) ?? {};
      entries.push({
        kind: "finished",
        key,
        agent,
        runId: event.run_id,
        outcome: str("outcome"),
        output: typeof event.output === "string" ? event.output : null,
        usage,
        cost: typeof event.cost_usd === "number" ? event.cost_usd : 0,
        at,
      });
      const node = timeline.tree.find((n) => n.runId === event.run_id);
      if (node) node.outcome = str("outcome");
      return;
    }
    case "usage": {
      const usage = (event.usage as Usage) ?? {};
      timeline.tokens += (usage.input_tokens ?? 0) + (usage.output_tokens ?? 0);
      if (typeof event.cost_usd === "number") timeline.cost += event.cost_usd;
      return;
    }
    case "step_started":
    case "step_finished":
      return;
    case "run_error":
      entries.push({ kind: "note", key, agent, title: "error", detail: str("message"), at });
      return;
    case "retrying":
      entries.push({ kind: "note", key, agent, title: `retry ${event.attempt} in ${event.delay_ms} ms`, detail: str("reason"), at });
      return;
    case "model_fallback":
      entries.push({ kind: "note", key, agent, title: `fallback ${str("from")} → ${str("to")}`, detail: str("reason"), at });
      return;
    case "config_changed":
      entries.push({ kind: "note", key, agent, title: `configuration revision ${event.revision}`, detail: JSON.stringify(event.changed), at });
      return;
    case "custom":
      if (foldTeamEvent(timeline, event, key)) return;
      break;
        case "artifact":
      entries.push({ kind: "note", key, agent, title: `artifact ${str("name")} (${str("mime_type")})`, detail: str("content"), at });
      return;
    default:
      break;
  }
  const { type, agent_id: _a, run_id: _r, seq: _s, timestamp_ms: _t, parent_run_id: _p, conversation_id: _c, ...rest } = event;
  const detail = type === "custom" ? event.value : rest;
  entries.push({ kind: "note", key, agent, title: type === "custom" ? String(event.name) : type, detail: JSON.stringify(detail, null, 2), at });
}

/** A team's own events: briefs, reports and what its firewall withheld; false for others. */
function foldTeamEvent(timeline: Timeline, event: AgentEvent, key: string): boolean {
  const value = (event.value ?? {}) as Record<string, unknown>;
  const text = (name: string) => (typeof value[name] === "string" ? (value[name] as string) : "");
  const at = event.timestamp_ms;
  const agent = event.agent_id;
  const withhold = (withheld: Withheld) => {
    if (!timeline.withheld.some((w) => w.from === withheld.from && w.to === withheld.to && w.what === withheld.what)) {
      timeline.withheld.push(withheld);
      timeline.entries.push({ kind: "withheld", key, agent, withheld, at });
    }
  };
  switch (event.name) {
    case "firewall_drop":
      withhold({ from: text("from"), to: text("to"), what: text("kind") || "message", reason: text("reason").replace(/_/g, " ") });
      return true;
    case "team.brief":
      timeline.entries.push({ kind: "note", key, agent, title: `brief from ${text("from")}`, detail: text("brief"), at });
      return true;
    case "team.report":
      if (value.withheld === true) {
        withhold({ from: text("member"), to: text("to"), what: "report", reason: "undeclared channel" });
      } else {
        timeline.entries.push({ kind: "note", key, agent, title: `report to ${text("to")}`, detail: text("report"), at });
      }
      return true;
    default:
      return false;
  }
}

function findMessage(entries: Entry[], key: string) {
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i];
    if (entry.kind === "message" && entry.key === key) return entry;
  }
  return undefined;
}

function findCall(entries: Entry[], key: string) {
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i];
    if (entry.kind === "tool" && entry.key === key) return entry;
  }
  return undefined;
}

/** Pretty JSON when `text` is JSON, else `text` itself. */
export function pretty(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
