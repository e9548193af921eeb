import { expect, type Page } from "@playwright/test";

/** Waits until the wasm has taken the page over: before that, clicks reach no handler. */
export async function ready(page: Page) {
  try {
    await expect(page.locator("body")).toHaveAttribute("data-ready", "true");
  } catch (e) {
    // A page that never starts says what the browser saw: its errors, its console, and how
    // its script and wasm were fetched.
    const errors = (await page.pageErrors()).map((err) => `page error: ${err.message}`);
    const consoled = (await page.consoleMessages()).map((m) => `console ${m.type()}: ${m.text()}`);
    const fetched = await page
      .evaluate(() =>
        performance
          .getEntriesByType("resource")
          .filter((r) => /\/pkg\//.test(r.name))
          .map((r) => {
            const t = r as PerformanceResourceTiming;
            return `${t.name}: status ${t.responseStatus}, ${t.transferSize} bytes, from ${Math.round(t.startTime)} to ${Math.round(t.responseEnd)} ms`;
          }),
      )
      .catch((err) => [`timings unreadable: ${err}`]);
    const state = await page.evaluate(() => document.readyState).catch(() => "unknown");
    const seen = [`document ${state}`, ...errors, ...consoled, ...fetched].join("\n  ");
    throw new Error(`${page.url()} never became ready:\n  ${seen}\n${e}`);
  }
}

/** Signs in. The offline demo starts with its first-run ritual; unless `ritual` is asked
 * for, it is ended at once (an empty BOOTSTRAP.md), so that the demo plays its showcase.
 * `at` is where Hero is served (a proxy's URL and base path), else the test's own Hero. */
export async function signIn(page: Page, user: string, password: string, opts: { ritual?: boolean; at?: string } = {}) {
  await page.goto(`${opts.at ?? ""}/login`);
  await ready(page);
  await page.getByLabel("Username").fill(user);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("whoami")).toHaveText(user);
  await ready(page);
  if (!opts.ritual) await endRitual(page, opts.at);
}

/** Ends the demo agent's first-run ritual through the files API. */
export async function endRitual(page: Page, at = "") {
  const agents = await (await page.request.get(`${at}/api/agents`)).json();
  for (const a of agents.filter((a: any) => a.provider === "scripted")) {
    const r = await page.request.put(`${at}/api/agents/${a.id}/files/BOOTSTRAP.md`, { data: { content: "" } });
    expect(r.status()).toBe(200);
  }
}

export async function createSession(page: Page, name: string): Promise<number> {
  await page.getByLabel("New session name").fill(name);
  await page.getByRole("button", { name: "New session" }).click();
  await expect(page.getByTestId("session-title")).toHaveText(name);
  const m = /\/s\/(\d+)$/.exec(page.url());
  expect(m, `URL ${page.url()} names a session`).not.toBeNull();
  return Number(m![1]);
}

export function sidebarItem(page: Page, id: number) {
  return page.locator(`.session-list li[data-session-id="${id}"]`);
}

/** Hydrated, with the session's event stream connected. */
export async function connected(page: Page) {
  await ready(page);
  await expect(page.locator(".chat")).toHaveAttribute("data-connected", "true");
}

/** Types a message and sends it with Enter. */
export async function send(page: Page, text: string) {
  const box = page.getByLabel("Message", { exact: true });
  await box.fill(text);
  await box.press("Enter");
}

export const mock = process.env.HERO_E2E_MOCK ?? "http://127.0.0.1:3211";

/** A session whose agent is an Anthropic-format agent at the mock LLM. */
export async function mockSession(page: Page, name: string): Promise<number> {
  const agent = await page.request.post("/api/agents", {
    data: { name: `Mock ${name}`, provider: "anthropic", model: "mock-model", base_url: mock, api_key: "e2e-key-123456" },
  });
  expect(agent.status()).toBe(201);
  const id = await createSession(page, name);
  const patch = await page.request.patch(`/api/sessions/${id}`, { data: { agent_id: (await agent.json()).id } });
  expect(patch.status()).toBe(200);
  await page.reload();
  await connected(page);
  return id;
}

/** A directive making the mock answer `text`, then `then` once given the results of its
 * calls. `<` is escaped, so that the user's own message holds no element. */
export function mockSays(text: string, then?: string) {
  const esc = (t: string) => JSON.stringify(t).replace(/</g, "\\u003c");
  return `[[mock text=${esc(text)}${then === undefined ? "" : ` then=${esc(then)}`}]]`;
}
