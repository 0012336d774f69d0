// Drives the real `@ag-ui/client` HttpAgent against a troupe server and prints what the
// client saw, one JSON object per line:
//
//   {"run": n, "event": {...}}     an event the client accepted
//   {"run": n, "done": {...}}      runAgent resolved: its result, the agent's messages,
//                                  its state and its pending interrupts afterwards
//   {"run": n, "error": "..."}     runAgent rejected (an HTTP error, a schema error, an
//                                  ordering error found by the client's verifier)
//   {"warning": "..."}             anything the client printed with console.warn/error
//
// `runAgent` pipes every event through the client's schema check, then `verifyEvents`
// (in dist/index.mjs: `q(…), U(…), L(this.debugLogger)` before `apply`), unconditionally:
// there is no switch to turn verification on or off, so every event printed here passed
// it, and an ordering error rejects the run.
//
// Usage: node client.mjs '<plan>' with plan =
//   {"modules": "<node_modules dir>", "url": "...", "threadId": "...", "state"?: {...},
//    "runs": [{"message"?: "text", "runId"?, "forwardedProps"?, "context"?, "tools"?,
//              "resume"?: {"status": "resolved"|"cancelled", "payload"?, "ids"?},
//              "toolResult"?: {"content": "..."},
//              "abortAfter"?: "<event type>"}]}
// With `abortAfter`, the client calls `abortRun()` (a user's Stop) at the first event of
// that type, after printing {"run": n, "aborted": <ms since the epoch>}.
// A run with `resume` answers the interrupts `ids`, by default every interrupt the
// previous run left pending. A run with `toolResult` answers the client tool call the
// previous run left pending as CopilotKit does: it adds a `tool` message with the result
// for that call to the thread and runs again, without `resume`.

import { createRequire } from "node:module";
import path from "node:path";

const print = (value) => process.stdout.write(JSON.stringify(value) + "\n");
for (const level of ["warn", "error"]) {
  console[level] = (...args) =>
    print({ warning: args.map((a) => (a instanceof Error ? a.message : typeof a === "string" ? a : JSON.stringify(a))).join(" ") });
}

const plan = JSON.parse(process.argv[2]);
const require = createRequire(path.join(plan.modules, "noop.js"));
const { HttpAgent, verifyEvents } = require("@ag-ui/client");
if (typeof verifyEvents !== "function") {
  print({ error: "this @ag-ui/client has no verifyEvents" });
  process.exit(1);
}

const agent = new HttpAgent({
  url: plan.url,
  threadId: plan.threadId,
  headers: plan.headers ?? {},
  ...(plan.state === undefined ? {} : { initialState: plan.state }),
});
for (const [n, step] of plan.runs.entries()) {
  if (step.message !== undefined) {
    agent.addMessage({ id: `user-${n}`, role: "user", content: step.message });
  }
  if (step.toolResult !== undefined) {
    const pending = agent.pendingInterrupts.find((interrupt) => interrupt.reason === "client_tool");
    const toolCallId = step.toolResult.toolCallId ?? pending?.toolCallId;
    agent.addMessage({ id: `tool-${n}`, role: "tool", toolCallId, content: step.toolResult.content });
    // CopilotKit runs a frontend tool from the call in its thread and answers with the
    // tool message alone; it keeps no interrupt to resume (HttpAgent would refuse to run
    // with one unaddressed), so this client lets go of it as well.
    agent.pendingInterrupts = [];
  }
  const parameters = {};
  for (const key of ["runId", "forwardedProps", "context", "tools"]) {
    if (step[key] !== undefined) parameters[key] = step[key];
  }
  if (step.resume !== undefined) {
    const ids = step.resume.ids ?? agent.pendingInterrupts.map((interrupt) => interrupt.id);
    parameters.resume = ids.map((id) => ({
      interruptId: id,
      status: step.resume.status,
      ...(step.resume.payload === undefined ? {} : { payload: step.resume.payload }),
    }));
  }
  try {
    let aborted = false;
    const result = await agent.runAgent(parameters, {
      onEvent: ({ event }) => {
        print({ run: n, event });
        // The user presses Stop: the client aborts its request.
        if (step.abortAfter === event.type && !aborted) {
          aborted = true;
          print({ run: n, aborted: Date.now() });
          agent.abortRun();
        }
      },
    });
    print({
      run: n,
      done: {
        result: result.result ?? null,
        messages: agent.messages,
        state: agent.state,
        pendingInterrupts: agent.pendingInterrupts,
      },
    });
  } catch (error) {
    print({ run: n, error: error instanceof Error ? error.message : String(error) });
    break;
  }
}
