import { test, expect, type Page } from "@playwright/test";
import { connected, createSession, hydrated, send, signIn } from "./helpers";

// Erin's agent acts: the offline demo calls `help` (runs at once), `websearch` (asks;
// answered by the mock search service) and `bash` (asks; runs in the sandbox). The cards
// come from the log, in every tab; the agent's follow-up comes once every call is settled.
test.describe.configure({ mode: "serial" });


function card(page: Page, fn: string) {
  return page.locator(`.call[data-function="${fn}"]`).last();
}

async function demoReplyWaiting(page: Page, name: string): Promise<number> {
  const id = await createSession(page, name);
  await connected(page);
  await send(page, `Hello ${name}`);
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("waiting for your approval", { timeout: 20_000 });
  await expect(card(page, "help").getByTestId("call-state")).toHaveText("done");
  return id;
}

test("the approval card shows in two tabs; approving in one updates both", async ({ page, context }) => {
  await signIn(page, "erin", "erin-password");
  const id = await demoReplyWaiting(page, "Two tabs");
  const other = await context.newPage();
  await other.goto(`/s/${id}`);
  await connected(other);
  await expect(card(other, "websearch").getByTestId("call-state")).toHaveText("waiting for your approval");
  // The element in the message says so too.
  await expect(page.locator('[data-hml="websearch"]').last()).toContainText("waiting for your approval");
  await card(other, "websearch").getByRole("button", { name: "Approve" }).click();
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
  // The bash command waits too; approved, it runs in the sandbox and its output shows.
  await expect(card(page, "bash").getByTestId("call-state")).toHaveText("waiting for your approval");
  await card(page, "bash").getByRole("button", { name: "Approve" }).click();
  await expect(card(other, "bash").getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
  await card(other, "bash").locator("summary").click();
  await expect(card(other, "bash").locator(".call-result pre")).toContainText("hello from Hero");
  await expect(card(other, "bash").locator(".call-result pre")).toContainText("exit status 0");
  for (const p of [page, other]) {
    await expect(card(p, "websearch").getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
    await expect(card(p, "websearch").getByRole("button", { name: "Approve" })).toHaveCount(0);
    await expect(p.locator(".msg-agent:not(.live)").last()).toContainText("came back to me", { timeout: 20_000 });
    await expect(p.locator(".msg-agent:not(.live)").last()).toContainText("Result 1 for rust leptos hydration");
  }
  await card(page, "websearch").locator("summary").click();
  await expect(card(page, "websearch").locator(".call-result pre")).toContainText("Result 2 for rust leptos hydration");
});

test("deny tells the agent, which answers accordingly", async ({ page }) => {
  await signIn(page, "erin", "erin-password");
  await demoReplyWaiting(page, "Deny");
  await card(page, "websearch").getByRole("button", { name: "Deny" }).click();
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("denied", { timeout: 20_000 });
  await card(page, "bash").getByRole("button", { name: "Deny" }).click();
  await expect(card(page, "bash").getByTestId("call-state")).toHaveText("denied", { timeout: 20_000 });
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("was denied", { timeout: 20_000 });
});

test("a reload while waiting keeps the card, which still decides", async ({ page }) => {
  await signIn(page, "erin", "erin-password");
  await demoReplyWaiting(page, "Reload");
  await page.reload();
  await connected(page);
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("waiting for your approval");
  await card(page, "websearch").getByRole("button", { name: "Approve" }).click();
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
});

test("always allow: no card waits the next time, and the Permissions page says so", async ({ page }) => {
  await signIn(page, "erin", "erin-password");
  await demoReplyWaiting(page, "Always");
  await card(page, "websearch").getByRole("button", { name: "Always allow websearch" }).click();
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
  await card(page, "bash").getByRole("button", { name: "Deny" }).click();
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("came back to me", { timeout: 20_000 });
  await send(page, "And again");
  await expect(page.locator(".msg-user").last()).toContainText("And again");
  // The new reply's search ran at once; only its bash command waits.
  await expect(card(page, "bash").getByTestId("call-state")).toHaveText("waiting for your approval", { timeout: 30_000 });
  await expect(card(page, "websearch").getByTestId("call-state")).toHaveText("done");
  await expect(page.locator('.call-waiting[data-function="websearch"]')).toHaveCount(0);
  await page.goto("/permissions");
  await hydrated(page);
  const row = page.locator('tr[data-function="websearch"]');
  await expect(row.locator(".level-default")).toHaveText("ask");
  await expect(row.getByLabel("Level of websearch")).toHaveValue("always");
  await expect(page.locator('tr[data-function="help"] .level-default')).toHaveText("always");
  // Back to asking, through the page.
  await row.getByLabel("Level of websearch").selectOption("ask");
  await row.getByRole("button", { name: "Save" }).click();
  await expect.poll(async () => (await (await page.request.get("/api/permissions")).json()).find((p: any) => p.function === "websearch").level).toBe("ask");
});

test("each of the eight prompt types is answered, in every tab, and stays answered after a reload", async ({ page, context }) => {
  await signIn(page, "erin", "erin-password");
  const mock = process.env.HERO_E2E_MOCK ?? "http://127.0.0.1:3211";
  const agent = await page.request.post("/api/agents", {
    data: { name: "Mock prompts", provider: "anthropic", model: "mock-model", base_url: mock, api_key: "e2e-key-123456" },
  });
  expect(agent.status()).toBe(201);
  const id = await createSession(page, "Prompts");
  expect((await page.request.patch(`/api/sessions/${id}`, { data: { agent_id: (await agent.json()).id } })).status()).toBe(200);
  await page.reload();
  await connected(page);
  const prompts = [
    '<hml-prompt id="p-text" type="text">Your name?</hml-prompt>',
    '<hml-prompt id="p-num" type="number" min="1" max="10">How many?</hml-prompt>',
    '<hml-prompt id="p-color" type="color" default="#ff0000">Colour?</hml-prompt>',
    '<hml-prompt id="p-check" type="checkbox">I agree</hml-prompt>',
    '<hml-prompt id="p-many" type="checkboxes">Which?<data>["a", "b", "c"]</data></hml-prompt>',
    '<hml-prompt id="p-radio" type="radio">One?<data>["x", "y"]</data></hml-prompt>',
    '<hml-prompt id="p-select" type="select">Pick<data>["red", "green"]</data></hml-prompt>',
    '<hml-prompt id="p-range" type="range" min="0" max="100" step="5" default="50">Level?</hml-prompt>',
  ].join("\n\n");
  // The directive's text escapes `<` so that the user's own message holds no prompt.
  await send(page, `[[mock text=${JSON.stringify(prompts).replace(/</g, "\\u003c")}]]`);
  const p = (pg: Page, id: string) => pg.locator(`.msg-agent:not(.live) [data-hml-id="${id}"]`);
  await expect(p(page, "p-text")).toBeVisible({ timeout: 15_000 });
  const other = await context.newPage();
  await other.goto(`/s/${id}`);
  await connected(other);

  // Each answer shows before the next is given: an answer re-renders its message.
  const answered = async (pid: string, text: string) => {
    await expect(p(page, pid), pid).toHaveClass(/answered/, { timeout: 15_000 });
    await expect(p(page, pid).locator(".hml-prompt-response"), pid).toHaveText(text);
  };
  await p(page, "p-text").locator("input").fill("Ada");
  await p(page, "p-text").locator("input").press("Enter");
  await answered("p-text", "Ada");
  await p(page, "p-num").locator("input").fill("7");
  await p(page, "p-num").locator("input").press("Enter");
  await answered("p-num", "7");
  await p(page, "p-color").getByRole("button", { name: "OK" }).click();
  await answered("p-color", "#ff0000");
  await p(page, "p-check").locator("input").check();
  await p(page, "p-check").getByRole("button", { name: "OK" }).click();
  await answered("p-check", "true");
  await p(page, "p-many").getByLabel("a").check();
  await p(page, "p-many").getByLabel("c").check();
  await p(page, "p-many").getByRole("button", { name: "OK" }).click();
  await answered("p-many", "a, c");
  await p(page, "p-radio").getByLabel("y").check();
  await p(page, "p-radio").getByRole("button", { name: "OK" }).click();
  await answered("p-radio", "y");
  await p(page, "p-select").locator("select").selectOption("green");
  await p(page, "p-select").getByRole("button", { name: "OK" }).click();
  await answered("p-select", "green");
  await p(page, "p-range").getByRole("button", { name: "OK" }).click();
  await answered("p-range", "50");

  const want: [string, string][] = [
    ["p-text", "Ada"], ["p-num", "7"], ["p-color", "#ff0000"], ["p-check", "true"],
    ["p-many", "a, c"], ["p-radio", "y"], ["p-select", "green"], ["p-range", "50"],
  ];
  // The other tab follows.
  for (const [pid, text] of want) {
    await expect(p(other, pid).locator(".hml-prompt-response"), pid).toHaveText(text, { timeout: 15_000 });
  }
  await page.reload();
  await connected(page);
  for (const [pid, text] of want) {
    await expect(p(page, pid).locator(".hml-prompt-response"), pid).toHaveText(text);
  }
  // A second answer is refused.
  const msg = await page.locator(".msg-agent:not(.live)").last().getAttribute("data-message-id");
  const again = await page.request.post(`/api/sessions/${id}/answers`, { data: { message_id: msg, element_id: "p-text", answer: "Bob" } });
  expect(again.status()).toBe(409);
});
