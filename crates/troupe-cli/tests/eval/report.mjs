// An eval's HTML report in a real browser: Chromium driven by playwright-core opens the
// page (a file), and prints what it shows as one JSON line: the figures, the table's rows,
// the chart's bars and their drawn widths, and any page error, console error or dialog.
// Arguments: the node_modules directory, Chromium's path, the report's path.
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [modules, executablePath, report] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { chromium } = require("playwright-core");

const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
const problems = [];
try {
  const page = await browser.newPage({ viewport: { width: 390, height: 800 } });
  page.on("pageerror", (error) => problems.push(`pageerror: ${error}`));
  page.on("console", (message) => message.type() === "error" && problems.push(`console: ${message.text()}`));
  page.on("dialog", (dialog) => {
    problems.push(`dialog: ${dialog.message()}`);
    dialog.dismiss();
  });
  await page.goto(pathToFileURL(report).href);
  const seen = await page.evaluate(() => ({
    title: document.title,
    overall: document.querySelector("#overall")?.textContent ?? null,
    rows: [...document.querySelectorAll("tbody tr")].map((row) => row.querySelector("th")?.textContent),
    bars: [...document.querySelectorAll("svg.chart rect.bar")].map((bar) => bar.getBoundingClientRect().width),
    scripts: document.querySelectorAll("script").length,
    overflows: document.documentElement.scrollWidth > window.innerWidth + 1,
  }));
  console.log(JSON.stringify({ ...seen, problems }));
} finally {
  await browser.close();
}
