import { test, expect, type Page } from "@playwright/test";
import { createSession, ready, signIn } from "./helpers";

// The Content-Security-Policy holds on every page: nothing Hero itself renders or runs is
// refused by it (so it can stay strict), and model text that tries is.

/** Collects the page's policy violations, from the DOM event and from the console. */
async function watchViolations(page: Page): Promise<() => Promise<string[]>> {
  const fromConsole: string[] = [];
  page.on("console", (m) => {
    if (/Content Security Policy/i.test(m.text())) fromConsole.push(m.text());
  });
  await page.addInitScript(() => {
    (window as any).__csp = [];
    document.addEventListener("securitypolicyviolation", (e) => {
      (window as any).__csp.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`);
    });
  });
  return async () => [...fromConsole, ...((await page.evaluate(() => (window as any).__csp)) as string[])];
}

test("no page, nor the showcase, breaks the content security policy", async ({ page }) => {
  const violations = await watchViolations(page);
  const visited: string[] = [];
  const check = async (what: string) => {
    visited.push(what);
    expect(await violations(), `violations on ${what}`).toEqual([]);
  };
  await page.goto("/login");
  await ready(page);
  const policy = (await page.request.get("/login")).headers()["content-security-policy"];
  expect(policy).toContain("'nonce-");
  expect(policy).not.toContain("unsafe-inline");
  await check("the sign-in page");

  await signIn(page, "dave", "dave-password");
  await check("the start page");
  const id = await createSession(page, "Showcase");
  await expect(page.locator(".chat")).toHaveAttribute("data-connected", "true");
  // The offline demo's reply shows every HML element.
  const box = page.getByLabel("Message", { exact: true });
  await box.fill("Show me everything");
  await box.press("Enter");
  const reply = page.locator(".msg-agent:not(.live)").last();
  await expect(reply.locator('[data-hml="progress"]').first()).toBeVisible({ timeout: 15_000 });
  await check("the showcase, live");
  // A sub-session (indented by class, not by an inline style).
  const sub = await page.request.post("/api/sessions", { data: { name: "Sub", parent_session_id: id } });
  expect(sub.status()).toBe(201);
  await page.reload();
  await ready(page);
  await expect(page.locator(".msg-agent [data-hml='progress']").first()).toBeVisible();
  await check("the showcase, reloaded, with a sub-session");

  await page.goto("/agents");
  await ready(page);
  await check("the agents page");
  await page.goto("/skills?skill=writing-skills&tier=builtin&file=SKILL.md&q=skill");
  await ready(page);
  await expect(page.locator(".skill-body h1, .skill-body h2").first()).toBeVisible();
  await check("the skills page, a skill opened and a search");
  const agent = (await (await page.request.get("/api/agents")).json())[0].id;
  const memory = await page.request.put(`/api/agents/${agent}/memory/files/MEMORY.md`, {
    data: { content: "# Facts\nDave drinks **tea**.\n" },
  });
  expect(memory.status()).toBe(200);
  await page.goto(`/agents/${agent}/memory?file=MEMORY.md&scope=user&q=tea`);
  await ready(page);
  await expect(page.locator("#memory-preview strong")).toHaveText("tea");
  await expect(page.getByRole("list", { name: "Search results" }).getByRole("listitem")).toHaveCount(1);
  await check("the memory page, a file opened and a search");
  await page.goto("/no-such-page");
  await ready(page);
  await check("a missing page");
  expect(visited.length).toBe(8);
});

test("markup that slips into the page is refused by the policy", async ({ page }) => {
  await signIn(page, "dave", "dave-password");
  // Were the renderer ever to let markup through, the policy is the second wall: an
  // inline script, an inline handler and an inline style put into the page do nothing.
  const ran = await page.evaluate(async () => {
    (window as any).__ran = 0;
    const d = document.createElement("div");
    d.innerHTML = '<img src="/favicon.svg" onload="window.__ran = 1"><p style="color: rgb(255, 0, 0)">x</p>';
    document.body.appendChild(d);
    const s = document.createElement("script");
    s.textContent = "window.__ran = 2";
    document.body.appendChild(s);
    await new Promise((r) => setTimeout(r, 300));
    return { ran: (window as any).__ran, color: getComputedStyle(d.querySelector("p")!).color };
  });
  expect(ran.ran).toBe(0);
  expect(ran.color).not.toBe("rgb(255, 0, 0)");
});
