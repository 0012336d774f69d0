// The web console in a real browser: Chromium driven by playwright-core, against a real
// `troupe serve` started by the Rust test (tests/all/console.rs). Takes one JSON plan as
// its argument: {modules, chromium, url, token, scenario, ...}; prints what it saw as JSON
// lines ({"saw": name, ...}) and ends with {"done": true}; on a failed expectation it
// prints {"error": message} and exits 1.
import { createRequire } from "node:module";
import path from "node:path";

const plan = JSON.parse(process.argv[2]);
const require = createRequire(path.join(plan.modules, "noop.js"));
const { chromium } = require("playwright-core");

const say = (line) => console.log(JSON.stringify(line));
const expect = (condition, message) => {
  if (!condition) throw new Error(message);
};
const TIMEOUT = 20000;

async function shot(page, name, fullPage = true) {
  if (plan.screenshots && !plan.noScreenshots) await page.screenshot({ path: path.join(plan.screenshots, `${name}.png`), fullPage });
}

/** A page that records CSP violations, dialogs and page errors, and any marker an injection would set. */
async function newPage(browser, viewport = { width: 1100, height: 800 }) {
  const context = await browser.newContext({ viewport });
  await context.addInitScript(() => {
    window.__violations = [];
    document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  const page = await context.newPage();
  page.on("dialog", (dialog) => {
    say({ saw: "dialog", message: dialog.message() });
    dialog.dismiss();
  });
  page.on("pageerror", (error) => say({ saw: "pageerror", message: String(error) }));
  return { context, page };
}

/** The console opened on `hash` with the token given by the fragment, as `troupe serve` prints it. */
async function openWithToken(page, hash) {
  const t0 = Date.now();
  await page.goto(`${plan.url}/#token=${encodeURIComponent(plan.token)}`);
  await page.waitForSelector("section[data-loaded]", { timeout: TIMEOUT });
  const firstPaintMs = Date.now() - t0;
  if (hash) {
    await page.evaluate((h) => (location.hash = h), hash);
  }
  return firstPaintMs;
}

async function runStatus(page) {
  return (await page.textContent('[data-testid="run-status"]'))?.trim();
}

async function waitStatus(page, wanted) {
  await page.waitForFunction(
    (w) => document.querySelector('[data-testid="run-status"]')?.textContent?.trim() === w,
    wanted,
    { timeout: TIMEOUT },
  );
}

const scenarios = {
  /** No token: the token form, no run data; a wrong token: the form again; the right one: the runs. */
  async auth(browser) {
    const { page } = await newPage(browser);
    const dataResponses = [];
    page.on("response", (r) => {
      if (new URL(r.url()).pathname.startsWith("/v1/")) dataResponses.push({ path: new URL(r.url()).pathname, status: r.status() });
    });
    const shell = await page.goto(`${plan.url}/`);
    const headers = shell.headers();
    say({ saw: "shell", status: shell.status(), csp: headers["content-security-policy"], nosniff: headers["x-content-type-options"] });
    await page.waitForSelector("#token", { timeout: TIMEOUT });
    const label = await page.textContent('label[for="token"]');
    const body = await page.textContent("body");
    say({ saw: "token_form", label, shows_run: body.includes(plan.runId), data: dataResponses });
    await shot(page, "console-token");

    await page.fill("#token", "not-the-token");
    await page.click('button[type="submit"]');
    await page.waitForTimeout(500);
    await page.waitForSelector("#token", { timeout: TIMEOUT });
    say({ saw: "wrong_token", shows_run: (await page.textContent("body")).includes(plan.runId) });

    // By keyboard alone: Tab to the labelled field, type, Enter.
    await page.evaluate(() => document.activeElement?.blur());
    let tabs = 0;
    while ((await page.evaluate(() => document.activeElement?.id)) !== "token" && tabs < 10) {
      await page.keyboard.press("Tab");
      tabs += 1;
    }
    await page.fill("#token", "");
    await page.keyboard.type(plan.token);
    await page.keyboard.press("Enter");
    await page.waitForSelector(`tr[data-run="${plan.runId}"]`, { timeout: TIMEOUT });
    say({
      saw: "right_token",
      tabs,
      stored: await page.evaluate(() => sessionStorage.getItem("troupe.token") !== null),
      row: await page.locator(`tr[data-run="${plan.runId}"] td`).allTextContents(),
    });

    // The URL troupe serve prints: the token in the fragment, taken out of the address bar.
    const fresh = await newPage(browser);
    await openWithToken(fresh.page, null);
    await fresh.page.waitForSelector(`tr[data-run="${plan.runId}"]`, { timeout: TIMEOUT });
    say({ saw: "fragment_token", address: fresh.page.url() });
    await shot(fresh.page, "console-runs");
  },

  /** A tool result holding HTML is shown as text, and nothing of it runs. */
  async inject(browser) {
    const { page } = await newPage(browser);
    await openWithToken(page, `#/runs/${plan.runId}`);
    await waitStatus(page, "completed");
    const result = page.locator("pre.result").first();
    await page.locator(".entry-tool summary").first().click();
    await result.waitFor({ timeout: TIMEOUT });
    await page.waitForTimeout(300);
    say({
      saw: "injected",
      result: await result.textContent(),
      timeline_imgs: await page.locator("main img").count(),
      timeline_scripts: await page.locator("main script").count(),
      scripts: await page.evaluate(() => [...document.scripts].map((s) => s.src)),
      marker: await page.evaluate(() => window.__injected ?? null),
      violations: await page.evaluate(() => window.__violations),
    });
    await shot(page, "console-run");
  },

  /** Start a run from the browser, watch it wait, approve its call, see it finish. */
  async approve(browser) {
    const { page } = await newPage(browser);
    await openWithToken(page, "#/start");
    await page.waitForSelector("#start-target option", { state: "attached", timeout: TIMEOUT });
    await page.selectOption("#start-target", plan.agent);
    await page.fill("#start-task", plan.task);
    await page.click('form.start button[type="submit"]');
    await page.waitForURL(/#\/runs\//, { timeout: TIMEOUT });
    const runId = decodeURIComponent(page.url().split("#/runs/")[1]);
    await waitStatus(page, "waiting");
    await page.waitForSelector(".waiting button:has-text('Approve')", { timeout: TIMEOUT });
    say({
      saw: "waiting",
      run_id: runId,
      asking: await page.textContent(".waiting"),
      tree: await page.locator(".tree li").evaluateAll((items) => items.map((li) => li.firstChild.textContent + " " + li.querySelector(":scope > .muted").textContent)),
    });
    await shot(page, "console-approval", false);
    await page.click(".waiting button:has-text('Approve')");
    await waitStatus(page, "completed");
    await shot(page, "console-team", false);
    say({
      saw: "finished",
      answer: await page.textContent('[data-testid="answer"]'),
      tree: await page.locator(".tree button").allTextContents(),
    });
    await page.evaluate(() => (location.hash = "#/costs"));
    const row = page.locator(`tr[data-target="${plan.agent}"]`);
    await row.waitFor({ timeout: TIMEOUT });
    say({
      saw: "costs",
      cells: await row.locator("td").allTextContents(),
      writer: await page.locator('tr[data-target="writer"] td').allTextContents(),
      bars: await page.locator("svg.bars rect").count(),
      models: await page.locator('svg[aria-labelledby="by-model"] .bar-label').allTextContents(),
      total: await page.textContent(".costs-total"),
    });
    await shot(page, "console-costs", false);
  },

  /**
   * A start whose answer is lost (the server started the run; the browser's connection
   * broke before it heard so), tried again unchanged, then a changed start: the key each
   * sent, and where each landed.
   */
  async lost_start(browser) {
    const { page } = await newPage(browser);
    const sent = [];
    await page.route("**/v1/runs", async (route) => {
      const request = route.request();
      if (request.method() !== "POST") return route.continue();
      const response = await route.fetch();
      const headers = response.headers();
      sent.push({ key: request.headers()["idempotency-key"] ?? null, run_id: headers["x-troupe-run-id"], replayed: headers["idempotent-replayed"] ?? null });
      if (sent.length === 1) return route.abort("connectionreset");
      return route.fulfill({ response });
    });
    await openWithToken(page, "#/start");
    await page.waitForSelector("#start-target option", { state: "attached", timeout: TIMEOUT });
    await page.selectOption("#start-target", plan.agent);
    await page.fill("#start-task", plan.task);
    await page.click('form.start button[type="submit"]');
    const alert = page.locator('form.start [role="alert"]');
    await alert.waitFor({ timeout: TIMEOUT });
    say({ saw: "lost", alert: await alert.textContent(), address: page.url() });
    await page.click('form.start button[type="submit"]');
    await page.waitForURL(/#\/runs\//, { timeout: TIMEOUT });
    const again = decodeURIComponent(page.url().split("#/runs/")[1]);
    await waitStatus(page, "completed");

    await page.evaluate(() => (location.hash = "#/start"));
    await page.waitForSelector("#start-target option", { state: "attached", timeout: TIMEOUT });
    await page.selectOption("#start-target", plan.agent);
    await page.fill("#start-task", plan.otherTask);
    await page.click('form.start button[type="submit"]');
    await page.waitForURL((url) => url.hash.startsWith("#/runs/") && !url.hash.endsWith(encodeURIComponent(again)), { timeout: TIMEOUT });
    const other = decodeURIComponent(page.url().split("#/runs/")[1]);
    await waitStatus(page, "completed");
    say({ saw: "started", again, other, sent });
  },

  /** Reject a waiting call with a reason, from the Approvals view. */
  async reject(browser) {
    const { page } = await newPage(browser, { width: 390, height: 800 });
    await openWithToken(page, "#/approvals");
    const item = page.locator(`.approval:has(a[href="#/runs/${plan.runId}"])`);
    await item.waitFor({ timeout: TIMEOUT });
    await item.locator("button:has-text('Reject…')").click();
    const reason = item.getByLabel("Reason for the model");
    await reason.fill(plan.reason);
    await shot(page, "console-reject-narrow");
    await item.locator('button[type="submit"]').click();
    await item.locator(".decided").waitFor({ timeout: TIMEOUT }).catch(() => {});
    await page.evaluate((id) => (location.hash = `#/runs/${id}`), plan.runId);
    await waitStatus(page, "completed");
    await page.locator(".entry-tool summary").first().click();
    say({ saw: "rejected", result: await page.locator("pre.result").first().textContent() });
  },

  /** Edit a waiting call's argument in its field, from the Approvals view, and run it;
   * whether the fields came from the tool's schema, and what they say. */
  async edit(browser) {
    const { page } = await newPage(browser);
    await openWithToken(page, "#/approvals");
    const item = page.locator(`.approval:has(a[href="#/runs/${plan.runId}"])`);
    await item.waitFor({ timeout: TIMEOUT });
    await item.locator("button:has-text('Edit arguments…')").click();
    await item.locator(".decide:not([data-schema='asked'])").waitFor({ timeout: TIMEOUT });
    const schema = await item.locator(".decide").getAttribute("data-schema");
    const fields = await item.locator(".field").allTextContents();
    const path = item.getByLabel("path", { exact: true });
    const before = await path.inputValue();
    await path.fill(plan.path);
    if (plan.shot !== false) await shot(page, "console-edit-arguments", false);
    await item.locator('button[type="submit"]').click();
    await item.locator(".decided").waitFor({ timeout: TIMEOUT }).catch(() => {});
    await page.evaluate((id) => (location.hash = `#/runs/${id}`), plan.runId);
    await waitStatus(page, "completed");
    say({ saw: "edited", before, schema, fields });
  },

  /** A waiting call's argument edited before the tool's schema arrives: the schema's
   * fields come, and the edit stays as typed. */
  async lateSchema(browser) {
    const { page } = await newPage(browser);
    let release;
    const held = new Promise((resolve) => (release = resolve));
    await page.route("**/v1/agents", async (route) => {
      await held;
      await route.continue();
    });
    await openWithToken(page, "#/approvals");
    const item = page.locator(`.approval:has(a[href="#/runs/${plan.runId}"])`);
    await item.waitFor({ timeout: TIMEOUT });
    await item.locator("button:has-text('Edit arguments…')").click();
    const path = item.getByLabel("path", { exact: true });
    await path.fill(plan.path);
    const before = await item.locator(".decide").getAttribute("data-schema");
    release();
    await item.locator(".decide:not([data-schema='asked'])").waitFor({ timeout: TIMEOUT });
    const schema = await item.locator(".decide").getAttribute("data-schema");
    const after = await path.inputValue();
    const labels = await item.locator(".field label").allTextContents();
    await item.locator('button[type="submit"]').click();
    await item.locator(".decided").waitFor({ timeout: TIMEOUT }).catch(() => {});
    await page.evaluate((id) => (location.hash = `#/runs/${id}`), plan.runId);
    await waitStatus(page, "completed");
    say({ saw: "late_schema", before, schema, after, labels });
  },

  /** A waiting call's argument the model left out, given in its field from the tool's schema. */
  async schema(browser) {
    const { page } = await newPage(browser);
    await openWithToken(page, "#/approvals");
    const item = page.locator(`.approval:has(a[href="#/runs/${plan.runId}"])`);
    await item.waitFor({ timeout: TIMEOUT });
    await item.locator("button:has-text('Edit arguments…')").click();
    const all = item.getByLabel("replace_all", { exact: true });
    await all.waitFor({ timeout: TIMEOUT });
    const about = await item.locator(`[id="${await all.getAttribute("aria-describedby")}"]`).textContent();
    const labels = await item.locator(".field label").allTextContents();
    await all.check();
    await item.locator('button[type="submit"]').click();
    await item.locator(".decided").waitFor({ timeout: TIMEOUT }).catch(() => {});
    await page.evaluate((id) => (location.hash = `#/runs/${id}`), plan.runId);
    await waitStatus(page, "completed");
    say({ saw: "schema", labels, about });
  },

  /** The runs list, told of a new run by the server rather than finding it at a poll. */
  async live(browser) {
    const { page } = await newPage(browser);
    // The list's reads of its first page, from the moment the page opens.
    let reads = 0;
    page.on("request", (request) => {
      if (request.url().includes("/v1/runs?offset=0")) reads += 1;
    });
    await openWithToken(page, "#/");
    await page.waitForSelector("section[data-loaded][data-live]", { timeout: TIMEOUT });
    // Long enough for a second read to have been asked, had there been one.
    await page.waitForTimeout(1000);
    const rows = () => page.locator("table.runs tbody tr").count();
    const before = await rows();
    say({ saw: "listing", rows: before, reads });
    // The test starts a run, then tells us; the next poll is ten seconds away.
    await new Promise((resolve) => process.stdin.once("data", resolve));
    const told = Date.now();
    await page.waitForFunction((n) => document.querySelectorAll("table.runs tbody tr").length > n, before, {
      timeout: 5000,
    });
    say({ saw: "listed", ms: Date.now() - told, first: await page.getAttribute("table.runs tbody tr", "data-run") });
  },

  /** The runs list without the server's announcements: refused, or held back unanswered. */
  async unannounced(browser) {
    const seen = {};
    for (const how of ["refused", "held"]) {
      const { page, context } = await newPage(browser);
      await page.route("**/v1/runs/changes", (route) => (how === "refused" ? route.abort() : new Promise(() => {})));
      let reads = 0;
      page.on("request", (request) => {
        if (request.url().includes("/v1/runs?offset=0")) reads += 1;
      });
      await openWithToken(page, "#/");
      seen[how] = {
        rows: await page.locator("table.runs tbody tr").count(),
        live: await page.locator("section[data-live]").count(),
        reads,
      };
      await context.close();
    }
    say({ saw: "unannounced", ...seen });
  },

  /** A typed answer, shown by its fields. */
  async typed(browser) {
    const { page } = await newPage(browser, { width: 390, height: 800 });
    await openWithToken(page, `#/runs/${plan.runId}`);
    await waitStatus(page, "completed");
    const answer = page.locator('[data-testid="typed-answer"]');
    await answer.waitFor({ timeout: TIMEOUT });
    const fields = await answer.locator(":scope > div").evaluateAll((rows) =>
      rows.map((row) => [row.querySelector("dt").textContent, row.querySelector("dd").textContent, row.querySelector("dd.about")?.textContent ?? null]),
    );
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
    say({ saw: "typed", fields, json: await page.textContent('[data-testid="answer"]'), overflow });
  },

  /** Watch a waiting run; the test restarts the server; the page follows the run on. */
  async follow(browser) {
    const { page } = await newPage(browser);
    await openWithToken(page, `#/runs/${plan.runId}`);
    await waitStatus(page, "waiting");
    say({ saw: "waiting" });
    // The test restarts the server now and tells us on stdin when it listens again.
    await new Promise((resolve) => process.stdin.once("data", resolve));
    await page.waitForSelector(".waiting button:has-text('Approve')", { timeout: TIMEOUT });
    await page.click(".waiting button:has-text('Approve')");
    await waitStatus(page, "completed");
    say({ saw: "finished", answer: await page.textContent('[data-testid="answer"]') });
  },

  /** A team's run: what its firewall withheld, listed and in the timeline. */
  async withheld(browser) {
    const { page } = await newPage(browser);
    await openWithToken(page, `#/runs/${plan.runId}`);
    await waitStatus(page, "completed");
    await page.waitForSelector(".withheld li", { timeout: TIMEOUT });
    await page.waitForSelector(".evidence[data-verified]", { timeout: TIMEOUT });
    say({
      saw: "withheld",
      listed: await page.locator(".withheld li").allTextContents(),
      entries: await page.locator(".withheld-entry").allTextContents(),
      evidence: await page.textContent(".evidence"),
      verified: await page.getAttribute(".evidence", "data-verified"),
    });
    // The test changes a member's evidence in the store now, then tells us to look again.
    await new Promise((resolve) => process.stdin.once("data", resolve));
    await page.reload();
    await page.waitForSelector('.evidence[data-verified="false"]', { timeout: TIMEOUT });
    say({ saw: "evidence_broken", evidence: await page.textContent(".evidence") });
    await shot(page, "console-evidence-broken", false);
  },

  /** The first paint of the runs list of a large store. */
  async paint(browser) {
    // Three first paints, each in a fresh context (no cache, no storage): the machine is
    // shared with other tests, so the best of three is the console's own time.
    const paints = [];
    for (let i = 0; i < 2; i++) {
      const fresh = await newPage(browser);
      paints.push(await openWithToken(fresh.page, null));
      await fresh.context.close();
    }
    const { page } = await newPage(browser);
    paints.push(await openWithToken(page, null));
    const rows = await page.locator("table.runs tbody tr").count();
    say({ saw: "painted", ms: Math.min(...paints), paints, rows });
    await page.click("button.older");
    await page.waitForFunction((n) => document.querySelectorAll("table.runs tbody tr").length > n, rows, { timeout: TIMEOUT });
    say({
      saw: "older",
      rows: await page.locator("table.runs tbody tr").count(),
      last: await page.locator("table.runs tbody tr:last-child td a").textContent(),
    });
    // A search goes to the server, through the whole store: an old run by its id.
    const rowsNow = () => page.locator("table.runs tbody tr").count();
    await page.fill('input[type="search"]', "run_000043");
    await page.waitForFunction(() => {
      const rows = document.querySelectorAll("table.runs tbody tr");
      return rows.length === 1 && rows[0].textContent.includes("run_000043");
    }, null, { timeout: TIMEOUT });
    say({ saw: "by id", rows: await rowsNow(), first: await page.locator("table.runs tbody tr td a").first().textContent() });
    // By part of a team's name, in another case: only its runs.
    await page.fill('input[type="search"]', "ROJ");
    await page.waitForFunction(() => {
      const cells = [...document.querySelectorAll("table.runs tbody tr td:nth-child(2)")];
      return cells.length > 0 && cells.every((cell) => cell.textContent === "project");
    }, null, { timeout: TIMEOUT });
    const agents = await page.locator("table.runs tbody tr td:nth-child(2)").allTextContents();
    say({ saw: "by agent", rows: agents.length, agents: [...new Set(agents)] });
    // By a status no run has: nothing matches.
    await page.selectOption(".filters select", "failed");
    await page.waitForSelector("text=No runs match", { timeout: TIMEOUT });
    say({ saw: "by status", rows: await rowsNow() });
    // The costs of the whole store, summed by the server.
    const asked = Date.now();
    await page.evaluate(() => (location.hash = "#/costs"));
    await page.waitForSelector(".costs-total", { timeout: TIMEOUT });
    say({
      saw: "costs",
      ms: Date.now() - asked,
      total: await page.textContent(".costs-total"),
      project: await page.locator('tr[data-target="project"] td').allTextContents(),
    });
  },
};

const browser = await chromium.launch({ executablePath: plan.chromium, args: ["--no-sandbox"], headless: true });
try {
  await scenarios[plan.scenario](browser);
  say({ done: true });
} catch (error) {
  say({ error: String(error?.stack ?? error) });
  process.exitCode = 1;
} finally {
  await browser.close();
}
