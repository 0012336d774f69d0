// Numbers and times as the console shows them.

export function money(usd: number | undefined): string {
  if (usd === undefined) return "—";
  return `$${usd.toFixed(4)}`;
}

export function when(ms: number): string {
  if (!ms) return "—";
  return new Date(ms).toLocaleString();
}

export function duration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

export function status(phase: string, outcome: string | undefined): string {
  return phase === "ended" ? (outcome ?? "ended") : phase;
}
