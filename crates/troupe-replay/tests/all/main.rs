//! Replays of runs recorded in a real SQLite store, against the mock model server over
//! loopback HTTP: a replay that changes nothing is identical and calls nothing; a changed
//! system prompt, a changed tool result or a changed approval policy is found at its step.

mod fork;
mod replay;
