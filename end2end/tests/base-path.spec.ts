import { test, expect, type Page } from "@playwright/test";
import { connected, createSession, send, signIn } from "./helpers";

// Hero served under /hero behind Debian's nginx (serve-behind-nginx.sh), through a proxy
// that strips the prefix (reference 000's layout) and one that passes it on: every page,
// file, server function, event stream, WebSocket, redirect and the sign-in cookie live
// under /hero, and the chat works as at a host's root.
const proxies: [string, string][] = [
  ["strips the prefix", process.env.HERO_E2E_STRIPPING ?? "http://127.0.0.1:3212"],
  ["passes the prefix on", process.env.HERO_E2E_PASSING ?? "http://127.0.0.1:3213"],
];

function card(page: Page, fn: string) {
  return page.locator(`.call[data-function="${fn}"]`).last();
}

for (const [[how, origin], user] of proxies.map((p, i) => [p, ["alice", "bob"][i]] as const)) {
  test(`behind a proxy that ${how}, Hero lives under /hero`, async ({ page, context }) => {
    test.setTimeout(60_000);
    const hero = `${origin}/hero`;
    // Anything outside /hero goes nowhere near Hero: the page must never ask for it.
    const outside: string[] = [];
    page.on("request", (r) => {
      if (!r.url().startsWith(`${hero}/`)) outside.push(r.url());
    });

    // Signed out, the workspace sends the browser to the sign-in page under /hero.
    await page.goto(`${hero}/`);
    await expect(page).toHaveURL(`${hero}/login`);
    await signIn(page, user, `${user}-password`, { at: hero });
    await expect(page).toHaveURL(`${hero}/`);
    const cookies = await context.cookies(hero);
    expect(cookies.find((c) => c.name === "hero_token")?.path).toBe("/hero");

    // A session made by the sidebar's form (a server function), its feed connected.
    const a = await createSession(page, `Prefixed ${user}`);
    await expect(page).toHaveURL(`${hero}/s/${a}`);
    await connected(page);

    // The offline demo's reply streams in, and its calls are decided through the prefix.
    const parts: string[] = [];
    page.on("response", (r) => {
      if (/\/pkg\/split_[^/]+\.wasm$/.test(r.url()) && r.ok()) parts.push(r.url());
    });
    await send(page, "Hello from behind the proxy");
    await expect(page.locator(".msg-user").last()).toHaveText(/Hello from behind the proxy/);
    await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("waiting for your approval", { timeout: 20_000 });
    await card(page, "websearch").getByRole("button", { name: "Approve" }).click();
    await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
    // The markdown parser's part of the wasm came from under /hero too: the reply is parsed.
    await expect(page.locator(".msg-agent").last().locator(".code-block").first()).toBeVisible();
    expect(parts.length).toBeGreaterThan(0);
    expect(parts.every((u) => u.startsWith(`${hero}/pkg/`))).toBe(true);

    // Moving between sessions swaps the page in place, the address bar under /hero.
    const b = await createSession(page, `Second ${user}`);
    await page.evaluate(() => ((window as any).__heroMark = 1));
    await page.locator(`.session-list li[data-session-id="${a}"] a`).click();
    await expect(page).toHaveURL(`${hero}/s/${a}`);
    await expect(page.getByTestId("session-title")).toHaveText(`Prefixed ${user}`);
    expect(await page.evaluate(() => (window as any).__heroMark)).toBe(1);
    await connected(page);
    await page.goBack();
    await expect(page).toHaveURL(`${hero}/s/${b}`);
    await connected(page);

    // The Agents page opens its WebSocket under /hero, and the socket stays open.
    const socket = page.waitForEvent("websocket");
    await page.getByRole("link", { name: "Manage agents" }).click();
    await expect(page).toHaveURL(`${hero}/agents`);
    const ws = await socket;
    expect(ws.url()).toBe(`${hero.replace("http", "ws")}/ws`);
    await page.waitForTimeout(300);
    expect(ws.isClosed()).toBe(false);

    // Signing out clears the cookie under /hero and lands on its sign-in page.
    await page.goto(`${hero}/`);
    await page.getByRole("button", { name: "Sign out" }).click();
    await expect(page).toHaveURL(`${hero}/login`);
    expect((await context.cookies(hero)).find((c) => c.name === "hero_token")).toBeUndefined();
    expect(outside, "requests outside /hero").toEqual([]);
  });
}
