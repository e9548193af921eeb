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
